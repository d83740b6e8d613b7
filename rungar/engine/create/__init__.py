"""Creating runners: the placement attempt carried out, the Create calls and their intents, and
room opening on a provider given to who waits for it."""

"""``rungar demo``: the embedded default, runnable with no account and no cloud."""

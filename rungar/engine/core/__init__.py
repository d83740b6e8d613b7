"""What every concern of the engine shares: the context, the runner table, each scale set's
state, the work in flight, the acting guard, and the notices the concerns give."""

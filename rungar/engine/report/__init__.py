"""What the engine tells: the event log, its Prometheus metrics, and every provider call counted
and timed."""

"""The engine: turns demand into runners through placement, and keeps the fleet honest.

One room per concern (docs/architecture.md): `core` (the shared context and state), `report`
(the event log, metrics, provider calls counted), `create`, `remove`, `jobs` (GitHub's news and
the scaling step) and `reconcile` (the pass and its pure plans); `engine.py` composes them."""

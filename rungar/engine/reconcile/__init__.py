"""The reconcile pass (docs/architecture.md), its pure plans (ownership, adoption, sightings),
the runner table recalled across a restart, and the sync of starting runners between passes."""

"""The daemon above the engine: `rungar serve`'s wiring (settings, providers, GitHub, state,
servers), the loops that run the engine, the lease between active and standby daemons, and the
admin surface (control, status, readiness, live reconfiguration)."""

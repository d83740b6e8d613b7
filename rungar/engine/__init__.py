"""The running system: scaling, the actuator, reconciliation and the daemon's wiring."""

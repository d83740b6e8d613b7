"""Removing runners: the registration, then the machine; and the jobs lost with a machine, run
again."""

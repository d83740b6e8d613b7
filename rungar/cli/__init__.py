"""The ``rungar`` command line."""

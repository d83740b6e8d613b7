"""Rungar's state: what a provider listing cannot tell (README, "Architecture")."""

from rungar.store.sqlite import CreateIntent, SqliteStore

__all__ = ["CreateIntent", "SqliteStore"]

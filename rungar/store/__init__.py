"""Rungar's state: what a provider listing cannot tell (ARCHITECTURE §1)."""

from rungar.store.sqlite import CreateIntent, SqliteStore

__all__ = ["CreateIntent", "SqliteStore"]

"""Rungar's state: what a provider listing cannot tell (docs/architecture.md)."""

from rungar.store.sqlite import CreateIntent, SqliteStore

__all__ = ["CreateIntent", "SqliteStore"]

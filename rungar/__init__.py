"""Rungar: places GitHub Actions runners across providers that create or refuse."""

__version__ = "0.1.0"

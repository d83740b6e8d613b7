"""Test kits shipped with Rungar, so plugin authors and the simulation can use them.

Modules are imported by path (``rungar.testing.fake_provider``, ``rungar.testing.conformance``)
so importing this package loads nothing heavy.
"""

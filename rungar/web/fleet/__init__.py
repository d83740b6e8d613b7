"""The fleet page: Rungar's own dashboard, served by the daemon on ``dashboard.listen``.

Everything it shows comes from where ``rungar status --json`` and ``rungar events`` read (the
engine's status document and event log, asked on the engine's loop) and, for the Usage tab,
from where ``rungar usage`` reads (the state database). It keeps no state of its own beyond a
bounded memory of past samples for the runners-over-time chart.
"""

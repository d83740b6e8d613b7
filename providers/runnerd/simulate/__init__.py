"""``runnerd simulate``: the history replayed through every admission policy.

The replay's engine loads compiled where a build matches its sources
(:mod:`runnerd.simulate.compiled`), else from these Python sources.
"""

from runnerd.simulate.compiled import search_path

__path__ = search_path(__path__)

"""``runnerd simulate``: the history replayed through every admission policy."""

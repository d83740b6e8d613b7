"""Rungar's GitHub side: App/PAT auth, the scale-set client, the listener and the webhook receiver.

What GitHub answers and how Rungar reads it is in docs/github.md; the modules cite its sections.
Nothing here imports grpc: this package is an HTTP boundary only.
"""

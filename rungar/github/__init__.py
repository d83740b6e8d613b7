"""Rungar's GitHub side: App/PAT auth, the scale-set client, the listener and the webhook receiver.

The protocol it speaks is written down in ``docs/github-scaleset-protocol.md``; every module cites
the section it implements. Nothing here imports grpc: this package is an HTTP boundary only.
"""

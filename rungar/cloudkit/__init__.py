"""What the cloud providers share: the search over places × machine types, its vocabulary of
outcomes and final refusals, the create flow that never makes a second machine, settings
parsing helpers and the provider process (docs/providers/gcp.md, docs/providers/aws.md).

Nothing here imports a cloud SDK or grpc: each provider imports its SDK lazily in one module
of its own, and :mod:`rungar.cloudkit.serve` reaches ``rungar.rpc``'s server (and grpc) only
when it serves.
"""

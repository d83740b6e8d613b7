"""The provider protocol over gRPC: the only package that imports grpc and generated code.

``client.GrpcProvider`` is the Provider role reached over the wire; ``server.serve`` serves any
Provider; ``plugin`` starts local provider executables; ``settle`` settles unanswered creates;
``convert`` is the one place protobuf messages become model values
(proto/rungar/provider/v1/provider.proto).
"""

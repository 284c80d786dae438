"""The Basra rules gRPC service: protobuf <-> engine translation plus operations."""

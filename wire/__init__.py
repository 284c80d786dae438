"""What the server and its clients share beyond the engine's values, so neither imports the other.

- `actions`: a basra.v1 Action read into an engine Action, as the server reads a call's and
  `basra-rules verify` a record's.
- `signing`: signed states (HMAC over a State's bytes) and the keys, as the server signs and
  verifies and `basra-rules load` seals.
- `tls`: TLS files read and checked, as `serve` reads its own and `play` and `load` theirs.
- `contract`: the contract's names (service, methods, path prefix), read from the generated
  descriptor: what the server registers, by the names its clients call.

A package beside engine/, shared by service/ and clients/: it knows the wire contract
(basra.v1) and reads files, which engine/ never does; engine/ never imports it.
"""

"""Programs that talk to a running server: play a match, load it, verify a match record.

They ship with the server (an operator may run `basra-rules verify` in a pod) and hold no
test machinery; `clients.cli` is the `basra-rules` command itself.
"""

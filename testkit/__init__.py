"""Test machinery that is not a test: the server as a child process, the soak, shared helpers,
and the oracles the engine and the service are checked against (brute, reference_encoder).

Used by tests/, benchmarks/ and the reliability runs from the repository root; never
installed and never in the image.
"""

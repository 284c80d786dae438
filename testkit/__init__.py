"""Test machinery that is not a test: the server as a child process, the soak, shared helpers,
and the oracle the engine is checked against (brute).

Used by tests/, benchmarks/ and the reliability runs from the repository root; never
installed and never in the image.
"""

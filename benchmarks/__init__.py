"""Benchmarks of the engine, the service and the bot (figures and commands in BENCHMARKS.md).

Each runs as a module from the repository root, `.venv/bin/python -m benchmarks.NAME`; they
share benchmarks.measure. Never installed and never in the image.
"""

"""A loopback port for the rare case its number is needed before a server starts.

Most callers need no such thing: `basra-rules serve --port 0` binds a port of its own and
says which in its "serving" log line (testkit.harness reads it). Where a number must be
passed in (the metrics port, whose 0 means "off"; a server whose log level hides the
"serving" line), `reserved_port` binds port 0 and keeps that socket bound, not listening,
until the block ends. Until then no other bind(0) is given the port and a plain bind of it
fails, while the server, which binds with SO_REUSEADDR (HTTP) or SO_REUSEPORT (gRPC), can
take it: there is no window between "found free" and "bound" for another process to use.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager

LOOPBACK = "127.0.0.1"


@contextmanager
def reserved_port(host: str = LOOPBACK) -> Iterator[int]:
    """Hold a free TCP port of `host` (bound, not listening) for the block; yield its number."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        holder.bind((host, 0))
        yield int(holder.getsockname()[1])

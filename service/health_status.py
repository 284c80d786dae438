"""The grpc.health.v1 Health service: each name's status, answered by Check, streamed by Watch.

grpc_health's own servicer sends each Watch update while it holds its lock, and its Watch
close callback takes that lock in grpc's polling thread, the thread that completes a send: a
status set as a Watch ends waits for that thread while it waits for the lock, and neither
moves again. Here the lock guards only the statuses and the watchers and is never held while
sending; a watcher's updates go out one at a time, each from whichever thread found none
going out (it sends the newest status until there is no newer one), and the close callback
only takes the watcher out.

Watch is non-blocking: grpc hands it a send callback and its handler returns after the first
status, so an open Watch holds no thread. It ends when its client goes (grpc then runs its
close callback), or when the server's stop cancels the calls still open at the end of the
grace.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from service import grpc_surface
from wire.contract import SERVICE_NAME

# Health names that probes ask about: "" (the whole server) and the rules service.
HEALTH_NAMES = ("", SERVICE_NAME)

_Response = health_pb2.HealthCheckResponse
_NOT_SERVING: int = _Response.NOT_SERVING
_SERVICE_UNKNOWN: int = _Response.SERVICE_UNKNOWN


@dataclass(eq=False, slots=True)
class _Watcher:
    """One open Watch: its name, the status it should see and the one it was last sent."""

    name: str
    send: Callable[[Any], None]
    latest: int
    sent: int | None = None
    sending: bool = False
    """Whether a thread is sending to it now (it sends `latest` too before it stops)."""
    open: bool = True


class HealthStatuses(health_pb2_grpc.HealthServicer):  # type: ignore[misc]  # generated, untyped
    """The health service of one server: Check and Watch, set by name, NOT_SERVING for good
    once a graceful shutdown began."""

    def __init__(self) -> None:
        # Re-entrant: the supervisor ends its statuses in its SIGTERM handler, in the main
        # thread, which the signal may have interrupted inside set(); so the shutdown is read
        # at each answer (_status), not written over the statuses, which that set() would undo.
        self._lock = threading.RLock()
        self._statuses: dict[str, int] = {}
        self._watchers: set[_Watcher] = set()
        self._final = False

    def _status(self, name: str) -> int:
        """The status `name` has now (under the lock); SERVICE_UNKNOWN for a name never set."""
        if name not in self._statuses:
            return _SERVICE_UNKNOWN
        return _NOT_SERVING if self._final else self._statuses[name]

    def Check(self, request: Any, context: Any) -> Any:  # noqa: N802
        """The name's status; NOT_FOUND for a name never set."""
        with self._lock:
            known = request.service in self._statuses
            status = self._status(request.service)
        if not known:
            context.set_code(grpc.StatusCode.NOT_FOUND)
            return _Response()
        return _Response(status=status)

    # grpc calls it with a send callback and needs no thread while it is open (NON_BLOCKING).
    @grpc_surface.non_blocking
    def Watch(  # noqa: N802
        self, request: Any, context: Any, send_response_callback: Callable[[Any], None]
    ) -> None:
        """Send the name's status now (SERVICE_UNKNOWN for a name never set), then each change."""
        with self._lock:
            watcher = _Watcher(
                request.service, send_response_callback, self._status(request.service)
            )
            self._watchers.add(watcher)
        if not context.add_callback(lambda: self._leave(watcher)):
            self._leave(watcher)  # the call ended already: grpc runs no callback now
            return
        self._deliver(watcher)

    def set(self, name: str, status: int) -> None:
        """Give `name` its status and tell its watchers; ignored once the shutdown began."""
        with self._lock:
            if self._final:
                return
            self._statuses[name] = status
            told = self._tell(lambda watcher: watcher.name == name)
        self._deliver_all(told)

    def enter_graceful_shutdown(self) -> None:
        """Every name NOT_SERVING, for good: later sets are ignored."""
        with self._lock:
            if self._final:
                return
            self._final = True
            told = self._tell(lambda watcher: watcher.name in self._statuses)
        self._deliver_all(told)

    def _tell(self, which: Callable[[_Watcher], bool]) -> list[_Watcher]:
        """Give the chosen watchers their name's status (under the lock); return them."""
        told = [watcher for watcher in self._watchers if which(watcher)]
        for watcher in told:
            watcher.latest = self._status(watcher.name)
        return told

    def _deliver_all(self, watchers: list[_Watcher]) -> None:
        for watcher in watchers:
            self._deliver(watcher)

    def _deliver(self, watcher: _Watcher) -> None:
        """Send `watcher` its newest status unless another thread is sending to it (that thread
        sends the newest before it stops), outside the lock: a send waits for grpc's polling
        thread, which may be waiting for the lock in a close callback."""
        with self._lock:
            if watcher.sending:
                return
            watcher.sending = True
        while True:
            with self._lock:
                status = watcher.latest
                if not watcher.open or status == watcher.sent:
                    watcher.sending = False
                    return
                watcher.sent = status
            watcher.send(_Response(status=status))

    def _leave(self, watcher: _Watcher) -> None:
        """The Watch ended (grpc's close callback, in its polling thread): never wait here."""
        with self._lock:
            watcher.open = False
            self._watchers.discard(watcher)

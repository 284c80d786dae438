"""grpcio's private and experimental surface (service/grpc_surface.py): every reliance holds in
the installed grpcio, and a grpcio that changes one fails the check by the reliance's name and
the grpcio version, within seconds: never a hang, never a count quietly wrong.

The changes are made the way a grpcio release would make them, by replacing the grpcio
function or attribute the reliance rests on (undone after each test)."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

from service import grpc_surface
from service.grpc_surface import SurfaceChanged

# A check takes well under a second; a changed reliance may cost it one bounded wait.
CHECK_TIMEOUT = 3.0
BOUND_SECONDS = 20.0

_server: Any = importlib.import_module("grpc._server")
_cygrpc: Any = importlib.import_module("grpc._cython.cygrpc")


def test_every_reliance_holds_in_the_installed_grpcio() -> None:
    """check() passes against the grpcio the test command installed, in a bounded time."""
    started = time.monotonic()
    grpc_surface.check(CHECK_TIMEOUT)
    assert time.monotonic() - started < BOUND_SECONDS
    assert {reliance.name for reliance in grpc_surface.RELIANCES} == {
        "CHANNELZ",
        "THREAD_POOL",
        "INLINE",
        "NON_BLOCKING",
        "SUBMITTED_CALL",
        "HANDLER_IN_SUBMITTED",
        "INTERCEPTED_THEN_SUBMITTED",
        "ABORT_WITH_STATUS",
        "CODE_SET",
    }


def test_the_check_runs_alone_in_a_fresh_interpreter_as_the_wheel_test_runs_it(
    tmp_path: Path,
) -> None:
    """The command the wheel's test runs at both ends of the grpcio range, away from the
    repository: it needs nothing of the tests (no testkit) and leaves no thread that holds
    the interpreter at exit."""
    script = (
        "import sys\n"
        "from service import grpc_surface\n"
        "grpc_surface.check()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('testkit', 'tests')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def _no_calls_started(monkeypatch: pytest.MonkeyPatch) -> None:
    """channelz's JSON without callsStarted: the count would read 0 for ever."""
    page = {"server": [{"ref": {"serverId": "1"}, "data": {}}], "end": True}
    monkeypatch.setattr(_cygrpc, "channelz_get_servers", lambda start: json.dumps(page))


def _no_thread_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    """grpc ignores experimental_thread_pool: every call runs on the server's pool."""
    monkeypatch.setattr(_server, "_select_thread_pool_for_behavior", lambda behaviour, pool: pool)


def _no_send_callback(monkeypatch: pytest.MonkeyPatch) -> None:
    """grpc ignores experimental_non_blocking's callback: the behaviour gets none."""
    original = _server._call_behavior

    def without(*args: Any, send_response_callback: Any = None) -> Any:
        return original(*args)

    monkeypatch.setattr(_server, "_call_behavior", without)


def _arguments_reordered(monkeypatch: pytest.MonkeyPatch) -> None:
    """grpc submits a unary call with its arguments in another order."""
    original = _server._unary_response_in_pool

    def handle(rpc_event: Any, state: Any, handler: Any, default_pool: Any) -> Any:
        thunk = _server._unary_request(rpc_event, state, handler.request_deserializer)
        pool = _server._select_thread_pool_for_behavior(handler.unary_unary, default_pool)

        def run(state: Any, rpc_event: Any, *rest: Any) -> None:
            state.context.run(original, rpc_event, state, *rest)

        return pool.submit(
            run,
            state,
            rpc_event,
            handler.unary_unary,
            thunk,
            handler.request_deserializer,
            handler.response_serializer,
        )

    monkeypatch.setattr(_server, "_handle_unary_unary", handle)


def _handler_in_another_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """grpc runs a call's handler in a thread of its own, not in the callable it submitted."""
    original = _server._unary_response_in_pool

    def elsewhere(*args: Any) -> None:
        thread = threading.Thread(target=original, args=args)
        thread.start()
        thread.join()

    monkeypatch.setattr(_server, "_unary_response_in_pool", elsewhere)


def _status_without_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    """abort_with_status keeps the code and details and drops the trailing metadata."""
    monkeypatch.setattr(
        _server._Context,
        "abort_with_status",
        lambda self, status: self.abort(status.code, status.details),
    )


def _code_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """context.code() says nothing of the code the handler set."""
    monkeypatch.setattr(_server._Context, "code", lambda self: None)


CHANGES: dict[str, Callable[[pytest.MonkeyPatch], None]] = {
    "CHANNELZ": _no_calls_started,
    "THREAD_POOL": _no_thread_pool,
    "NON_BLOCKING": _no_send_callback,
    "SUBMITTED_CALL": _arguments_reordered,
    "HANDLER_IN_SUBMITTED": _handler_in_another_thread,
    "ABORT_WITH_STATUS": _status_without_metadata,
    "CODE_SET": _code_not_kept,
}


@pytest.mark.parametrize("name", sorted(CHANGES))
def test_a_changed_reliance_fails_the_check_by_its_name_and_the_grpcio_version(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each change: SurfaceChanged naming that reliance, what it relies on and the grpcio
    version, within the bound."""
    CHANGES[name](monkeypatch)
    started = time.monotonic()
    with pytest.raises(SurfaceChanged) as raised:
        grpc_surface.check(CHECK_TIMEOUT)
    assert time.monotonic() - started < BOUND_SECONDS
    assert raised.value.reliance.name == name
    message = str(raised.value)
    assert message.startswith(f"grpcio {grpc.__version__}: {name} (")
    assert raised.value.reliance.behaviour in message


def test_the_count_of_calls_started_reads_every_page_of_channelz(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """channelz answers a hundred servers a page, and a false `end` is left out of its JSON:
    every page is read."""
    pages = {
        0: {
            "server": [{"ref": {"serverId": str(n)}, "data": {"callsStarted": "2"}} for n in (1, 5)]
        },
        6: {"server": [{"ref": {"serverId": "9"}, "data": {"callsStarted": "3"}}], "end": True},
    }
    monkeypatch.setattr(_cygrpc, "channelz_get_servers", lambda start: json.dumps(pages[start]))
    assert grpc_surface.calls_started() == 7

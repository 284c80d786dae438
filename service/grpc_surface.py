"""grpcio's private and experimental surface: every use the server makes of it goes through here.

Each reliance is a `Reliance`, named with the grpcio behaviour it depends on; the server's
modules call the functions below it and touch nothing of grpcio beyond its public API
otherwise. `check()` verifies every reliance against the installed grpcio on a server of its
own (127.0.0.1, an ephemeral port, every wait bounded) and raises `SurfaceChanged`, naming the
reliance and the grpcio version, when one no longer holds; the tests call it, and so does the
wheel's test at both ends of the admitted grpcio range.

What the public API does the job of is done with it instead: a refusal's status is built here
as a plain `grpc.Status` (grpcio-status's `rpc_status.to_status`, an experimental call, is not
used), and handlers are made by the public `grpc.*_rpc_method_handler` functions.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent import futures
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import grpc


@dataclass(frozen=True, slots=True)
class Reliance:
    """One thing the server relies on that grpcio does not promise to keep."""

    name: str
    surface: str
    """What of grpcio is used: a private module, an experimental attribute or call."""
    behaviour: str
    """What grpcio does with it that the server depends on."""


class SurfaceChanged(RuntimeError):  # noqa: N818 (a changed grpcio, not an error of ours)
    """A reliance no longer holds in the installed grpcio."""

    def __init__(self, reliance: Reliance, found: str) -> None:
        super().__init__(
            f"grpcio {grpc.__version__}: {reliance.name} ({reliance.surface}) no longer holds: "
            f"{reliance.behaviour}; found: {found}"
        )
        self.reliance = reliance


CHANNELZ = Reliance(
    "CHANNELZ",
    "grpc._cython.cygrpc.channelz_get_servers (private)",
    "returns JSON pages of this process's servers, each with data.callsStarted, the calls "
    "gRPC core started on it (admitted or not), and `end` on the last page",
)
THREAD_POOL = Reliance(
    "THREAD_POOL",
    "the experimental_thread_pool attribute of a handler's behaviour (experimental)",
    "grpc submits the call to that executor instead of the server's pool, provided it is a "
    "concurrent.futures.ThreadPoolExecutor",
)
INLINE = Reliance(
    "INLINE",
    "an executor passed as experimental_thread_pool that runs what it is given at once",
    "grpc submits a call in its polling thread, the thread that ran the interceptors, so a "
    "behaviour on such an executor runs right there; its request is not read first when the "
    "method is declared client-streaming",
)
NON_BLOCKING = Reliance(
    "NON_BLOCKING",
    "the experimental_non_blocking attribute of a response-streaming behaviour (experimental)",
    "grpc calls the behaviour with a third argument, a callback that sends a response (None "
    "ends the call), and does not iterate what it returns",
)
SUBMITTED_CALL = Reliance(
    "SUBMITTED_CALL",
    "the positional arguments grpcio's private grpc._server gives its pool's submit",
    "submit(run, in_pool, rpc_event, state, ...): rpc_event.call_details.deadline is the "
    "call's deadline (seconds since the epoch, far in the future without one); state.client "
    "is 'cancelled' once the client has gone and state.code None until a status is set",
)
HANDLER_IN_SUBMITTED = Reliance(
    "HANDLER_IN_SUBMITTED",
    "grpcio's sync server running a call's handler inside the callable it submitted",
    "the behaviour runs synchronously in the pool thread that runs the submitted callable, and "
    "not at all when the call's deadline passed or its client went before a thread took it",
)
INTERCEPTED_THEN_SUBMITTED = Reliance(
    "INTERCEPTED_THEN_SUBMITTED",
    "grpcio's sync server taking calls in from one polling thread",
    "the interceptors of a call run in the polling thread, which submits that call to the "
    "pool before it takes the next one in",
)
ABORT_WITH_STATUS = Reliance(
    "ABORT_WITH_STATUS",
    "ServicerContext.abort_with_status and grpc.Status (experimental)",
    "ends the call with the status's code and details and sends its trailing metadata (the "
    "google.rpc.Status in grpc-status-details-bin, the retry pushback)",
)
CODE_SET = Reliance(
    "CODE_SET",
    "ServicerContext.code() (experimental)",
    "returns the code the handler set with set_code, None when it set none",
)

RELIANCES = (
    CHANNELZ,
    THREAD_POOL,
    INLINE,
    NON_BLOCKING,
    SUBMITTED_CALL,
    HANDLER_IN_SUBMITTED,
    INTERCEPTED_THEN_SUBMITTED,
    ABORT_WITH_STATUS,
    CODE_SET,
)

Behaviour = Callable[..., Any]
Context = Any
Metadata = tuple[tuple[str, str | bytes], ...]

# CHANNELZ -------------------------------------------------------------------------------------


def _channelz_page(start: int) -> bytes | str:
    from grpc._cython import cygrpc  # type: ignore[attr-defined]  # CHANNELZ

    return cygrpc.channelz_get_servers(start)  # type: ignore[no-any-return]


def channelz_servers() -> list[dict[str, Any]]:
    """Every server of this process as channelz describes it, page after page (CHANNELZ)."""
    found: list[dict[str, Any]] = []
    start = 0
    while True:
        page = json.loads(_channelz_page(start))
        servers = page.get("server", [])
        found += servers
        if page.get("end", False) or not servers:  # JSON leaves a false "end" out
            return found
        start = 1 + max(int(server["ref"]["serverId"]) for server in servers)


def calls_started() -> int:
    """Calls gRPC core started on the servers of this process (channelz, on by default):
    every call that reached them, whether or not a server took it in. 0 when channelz says
    nothing readable (the count is then missing, never made up)."""
    try:
        return sum(int(server["data"].get("callsStarted", 0)) for server in channelz_servers())
    except (ValueError, RuntimeError, KeyError, TypeError):
        return 0


# THREAD_POOL, INLINE, NON_BLOCKING --------------------------------------------------------------


def on_pool(behaviour: Behaviour, pool: futures.ThreadPoolExecutor) -> Behaviour:
    """`behaviour`, run by grpc's server on `pool` (THREAD_POOL); a new function, so the
    original keeps its own pool."""

    def run(*args: Any) -> Any:
        return behaviour(*args)

    run.experimental_thread_pool = pool  # type: ignore[attr-defined]
    if is_non_blocking(behaviour):
        run.experimental_non_blocking = True  # type: ignore[attr-defined]
    return run


def pool_of(behaviour: Behaviour) -> futures.ThreadPoolExecutor | None:
    """The executor grpc runs `behaviour` on, when it names one (THREAD_POOL)."""
    pool = getattr(behaviour, "experimental_thread_pool", None)
    return pool if isinstance(pool, futures.ThreadPoolExecutor) else None


def non_blocking(behaviour: Behaviour) -> Behaviour:
    """Mark a response-streaming behaviour non-blocking (NON_BLOCKING): grpc calls it with a
    send callback and holds no thread while it streams. Returns it, marked (a decorator)."""
    behaviour.experimental_non_blocking = True  # type: ignore[attr-defined]
    return behaviour


def is_non_blocking(behaviour: Behaviour) -> bool:
    """Whether grpc calls `behaviour` with a send callback (NON_BLOCKING)."""
    return bool(getattr(behaviour, "experimental_non_blocking", False))


class Inline(futures.ThreadPoolExecutor):
    """An executor that runs what it is given at once, in the calling thread (INLINE: grpc's
    polling thread); a ThreadPoolExecutor only because grpc takes no other (THREAD_POOL)."""

    def __init__(self) -> None:
        super().__init__(max_workers=1)

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> futures.Future[Any]:
        """Run `fn` now; return its outcome as a finished future."""
        done: futures.Future[Any] = futures.Future()
        try:
            done.set_result(fn(*args, **kwargs))
        except BaseException as error:  # grpc's own wrapper catches; this is a safety net
            done.set_exception(error)
        return done


# SUBMITTED_CALL, HANDLER_IN_SUBMITTED -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Submitted:
    """What the server's pool can read of a call grpc submits to it (SUBMITTED_CALL); None
    for what it cannot read."""

    deadline: float | None
    """The call's deadline, seconds since the epoch."""
    client: str | None
    """'open', 'closed' (half-closed) or 'cancelled'."""
    code: object | None
    """The status code set on the call, if any."""


def submitted(args: Sequence[Any]) -> Submitted:
    """Read a submitted call from the arguments grpc gave submit, defensively: what is not
    there reads as None."""
    event = args[1] if len(args) > 2 else None
    state = args[2] if len(args) > 2 else None
    deadline = getattr(getattr(event, "call_details", None), "deadline", None)
    client = getattr(state, "client", None)
    return Submitted(
        deadline if isinstance(deadline, float) else None,
        client if isinstance(client, str) else None,
        getattr(state, "code", None),
    )


_started = threading.local()


def noting_start(behaviour: Behaviour) -> Behaviour:
    """`behaviour`, noting in its thread that its call reached it (HANDLER_IN_SUBMITTED)."""

    def run(*args: Any) -> Any:
        _started.flag = True
        return behaviour(*args)

    return run


@contextmanager
def seeing_start() -> Iterator[Callable[[], bool]]:
    """Around a submitted callable run in this thread: the function it gives says whether the
    call's behaviour (wrapped by `noting_start`) was reached (HANDLER_IN_SUBMITTED)."""
    _started.flag = False
    try:
        yield lambda: bool(getattr(_started, "flag", False))
    finally:
        _started.flag = False


# ABORT_WITH_STATUS, CODE_SET --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Status(grpc.Status):
    """The status a call ends with: code, details, trailing metadata (ABORT_WITH_STATUS)."""

    code: grpc.StatusCode
    details: str
    trailing_metadata: Metadata


def abort_with(context: Context, status: Status) -> None:
    """End the call with `status` (ABORT_WITH_STATUS); raises, as grpc's abort does. A context
    without abort_with_status (grpc_testing's) gets the status set and the call ends normally."""
    try:
        context.abort_with_status(status)
    except NotImplementedError:
        # grpc_testing lacks abort_with_status and its abort drops trailing metadata.
        context.set_code(status.code)
        context.set_details(status.details)
        context.set_trailing_metadata(status.trailing_metadata)
        return
    raise AssertionError("abort_with_status always raises")  # pragma: no cover


def code_set(context: Context) -> grpc.StatusCode | None:
    """The code the handler set on its call, None when it set none (CODE_SET)."""
    code = context.code()
    return code if isinstance(code, grpc.StatusCode) else None


# check() ----------------------------------------------------------------------------------------

PROBE_SERVICE = "basra.surface.Probe"
# Binary trailing metadata, as a refusal's google.rpc.Status is sent.
PROBE_KEY = "basra-probe-bin"


@contextmanager
def _relying_on(reliance: Reliance) -> Iterator[None]:
    """Any failure inside is the reliance's."""
    try:
        yield
    except SurfaceChanged:
        raise
    except grpc.RpcError as error:
        raise SurfaceChanged(
            reliance, f"the call ended {error.code()}: {error.details()}"
        ) from None
    except Exception as error:
        raise SurfaceChanged(reliance, f"{type(error).__name__}: {error}") from error


def _expect(reliance: Reliance, holds: bool, found: str) -> None:
    if not holds:
        raise SurfaceChanged(reliance, found)


class _Pool(futures.ThreadPoolExecutor):
    """The probe server's pool: one thread; keeps what each probe call's submit was given,
    whether the call reached its behaviour, and the order of interceptions and submits."""

    def __init__(self) -> None:
        super().__init__(max_workers=1, thread_name_prefix="surface-work")
        self.steps: list[tuple[str, str, str]] = []
        self.arriving = ""
        self.calls: dict[str, tuple[Sequence[Any], futures.Future[bool]]] = {}

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> futures.Future[Any]:
        """Keep the call's arguments; run it, seeing whether its behaviour is reached."""
        method, self.arriving = self.arriving, ""
        self.steps.append(("submitted", method, threading.current_thread().name))
        reached: futures.Future[bool] = futures.Future()
        self.calls[method] = (args, reached)

        def run() -> None:
            with seeing_start() as seen:
                try:
                    fn(*args, **kwargs)
                except BaseException as error:
                    reached.set_exception(error)
                    return
                reached.set_result(seen())

        return super().submit(run)

    def call(self, method: str, timeout: float) -> tuple[Sequence[Any], futures.Future[bool]]:
        """The submitted arguments and reaching of the last call of `method` (waits for it)."""
        _until(lambda: method in self.calls, timeout, f"no call of {method} was submitted")
        return self.calls[method]


class _Interceptor(grpc.ServerInterceptor):  # type: ignore[type-arg]
    """Notes each call's interception, and its method for the submit that follows."""

    def __init__(self, pool: _Pool) -> None:
        self._pool = pool

    def intercept_service(self, continuation: Callable[[Any], Any], details: Any) -> Any:
        """Note the call; go on."""
        method = details.method.rpartition("/")[2]
        self._pool.steps.append(("intercepted", method, threading.current_thread().name))
        self._pool.arriving = method
        return continuation(details)


class _Probe:
    """The probe server's handlers and what they saw."""

    def __init__(self) -> None:
        self.lane = futures.ThreadPoolExecutor(1, thread_name_prefix="surface-lane")
        self.release = threading.Event()
        self.held = threading.Event()
        self.threads: dict[str, str] = {}
        self.codes: list[grpc.StatusCode | None] = []

    def handlers(self) -> dict[str, grpc.RpcMethodHandler[Any, Any]]:
        """Every probe method's handler, by name."""

        def echo(request: bytes, context: Context) -> bytes:
            return request

        def hold(request: bytes, context: Context) -> bytes:
            self.held.set()
            self.release.wait(60)
            return request

        def on_lane(request: bytes, context: Context) -> bytes:
            self.threads["lane"] = threading.current_thread().name
            return request

        def refuse(requests: Any, context: Context) -> None:
            self.threads["inline"] = threading.current_thread().name
            abort_with(context, PROBE_STATUS)

        def watch(request: bytes, context: Context, send: Any = None) -> None:
            if send is None:
                raise TypeError("no send callback was given")
            send(b"first")
            send(b"second")
            send(None)

        def coded(request: bytes, context: Context) -> bytes:
            context.set_code(grpc.StatusCode.NOT_FOUND)
            self.codes.append(code_set(context))
            return b""

        unary = grpc.unary_unary_rpc_method_handler
        return {
            "Echo": unary(noting_start(echo)),
            "Late": unary(noting_start(echo)),
            "Gone": unary(noting_start(echo)),
            "Hold": unary(noting_start(hold)),
            "Lane": unary(on_pool(on_lane, self.lane)),
            "Refuse": grpc.stream_unary_rpc_method_handler(on_pool(refuse, Inline())),
            "Watch": grpc.unary_stream_rpc_method_handler(non_blocking(watch)),
            "Code": unary(coded),
        }


# The deadline of the probe call that expires while it waits (seconds).
SHORT = 0.1
PROBE_STATUS = Status(grpc.StatusCode.RESOURCE_EXHAUSTED, "probe", ((PROBE_KEY, b"\x08\x08"),))


def _until(condition: Callable[[], bool], timeout: float, failure: str) -> None:
    give_up = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > give_up:
            raise TimeoutError(failure)
        time.sleep(0.005)


def check(timeout: float = 5.0) -> None:
    """Verify every reliance against the installed grpcio; raise SurfaceChanged naming the
    first that no longer holds. Every wait is bounded by `timeout` seconds."""
    with _relying_on(CHANNELZ):
        others = {server["ref"]["serverId"] for server in channelz_servers()}
    pool, probe = _Pool(), _Probe()
    server: Any = grpc.server(pool, interceptors=[_Interceptor(pool)])  # stubs lack registered
    server.add_registered_method_handlers(PROBE_SERVICE, probe.handlers())
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            _check_calls(channel, pool, probe, timeout)
        made = sum(1 for step in pool.steps if step[0] == "intercepted")
        with _relying_on(CHANNELZ):
            # Only the probe server's own: others of the process come and go meanwhile.
            ours = [s for s in channelz_servers() if s["ref"]["serverId"] not in others]
            started = sum(int(server["data"].get("callsStarted", 0)) for server in ours)
        _expect(CHANNELZ, started == made, f"{started} calls started after {made} were made")
    finally:
        probe.release.set()
        server.stop(0).wait(timeout)
        pool.shutdown(wait=False, cancel_futures=True)
        probe.lane.shutdown(wait=False, cancel_futures=True)


def _path(method: str) -> str:
    return f"/{PROBE_SERVICE}/{method}"


def _unary(channel: grpc.Channel, method: str) -> Any:
    return channel.unary_unary(_path(method), _registered_method=True)  # type: ignore[call-arg]


def _check_calls(channel: grpc.Channel, pool: _Pool, probe: _Probe, timeout: float) -> None:
    """Make the probe calls, each reliance's in turn."""
    with _relying_on(HANDLER_IN_SUBMITTED):
        sent = time.time()
        answer = _unary(channel, "Echo")(b"echo", timeout=timeout)
        args, reached = pool.call("Echo", timeout)
        _expect(HANDLER_IN_SUBMITTED, answer == b"echo", f"answered {answer!r}")
        _expect(HANDLER_IN_SUBMITTED, reached.result(timeout), "its behaviour was not seen")
    with _relying_on(SUBMITTED_CALL):
        seen = submitted(args)
        _expect(
            SUBMITTED_CALL,
            seen.deadline is not None and sent < seen.deadline <= time.time() + timeout + 1,
            f"deadline {seen.deadline} of a call sent at {sent} with {timeout} s",
        )
    with _relying_on(INTERCEPTED_THEN_SUBMITTED):
        steps = [step for step in pool.steps if step[1] == "Echo"]
        _expect(
            INTERCEPTED_THEN_SUBMITTED,
            [step[0] for step in steps] == ["intercepted", "submitted"]
            and steps[0][2] == steps[1][2],
            f"{steps}",
        )
        polling_thread = steps[0][2]
    with _relying_on(THREAD_POOL):
        _unary(channel, "Lane")(b"", timeout=timeout)
        lane = probe.threads.get("lane", "")
        _expect(THREAD_POOL, lane.startswith("surface-lane"), f"it ran in thread {lane!r}")
    refused: Any = None
    with _relying_on(INLINE):
        refuse = channel.stream_unary(_path("Refuse"), _registered_method=True)  # type: ignore[call-arg]
        try:
            refuse(iter(()), timeout=timeout)
        except grpc.RpcError as error:
            refused = error
        inline = probe.threads.get("inline", "")
        _expect(INLINE, inline == polling_thread, f"it ran in {inline!r}, not {polling_thread!r}")
    with _relying_on(ABORT_WITH_STATUS):
        _expect(ABORT_WITH_STATUS, refused is not None, "the call was answered")
        found = (refused.code(), refused.details(), dict(refused.trailing_metadata() or ()))
        wanted = (PROBE_STATUS.code, PROBE_STATUS.details, PROBE_STATUS.trailing_metadata[0][1])
        _expect(ABORT_WITH_STATUS, (*found[:2], found[2].get(PROBE_KEY)) == wanted, f"{found}")
    with _relying_on(NON_BLOCKING):
        watch = channel.unary_stream(_path("Watch"), _registered_method=True)  # type: ignore[call-arg]
        answers = list(watch(b"", timeout=timeout))
        _expect(NON_BLOCKING, answers == [b"first", b"second"], f"answers {answers}")
    with _relying_on(CODE_SET):
        try:
            _unary(channel, "Code")(b"", timeout=timeout)
        except grpc.RpcError as error:
            _expect(CODE_SET, error.code() == grpc.StatusCode.NOT_FOUND, f"{error.code()}")
        _expect(CODE_SET, probe.codes == [grpc.StatusCode.NOT_FOUND], f"read {probe.codes}")
    _check_given_up(channel, pool, probe, timeout)


def _check_given_up(channel: grpc.Channel, pool: _Pool, probe: _Probe, timeout: float) -> None:
    """Two calls wait for the pool's one thread, held by a third: one's deadline passes, the
    other's client cancels it. Neither reaches its behaviour, and what submit was given says
    how each ended."""
    with _relying_on(HANDLER_IN_SUBMITTED):
        holding = _unary(channel, "Hold").future(b"", timeout=timeout)
        _expect(HANDLER_IN_SUBMITTED, probe.held.wait(timeout), "the holding call never ran")
        sent = time.time()
        _unary(channel, "Late").future(b"", timeout=SHORT)
        gone = _unary(channel, "Gone").future(b"", timeout=timeout)
        (late_args, late_reached), (gone_args, gone_reached) = (
            pool.call("Late", timeout),
            pool.call("Gone", timeout),
        )
        gone.cancel()
    with _relying_on(SUBMITTED_CALL):
        for name, args in (("Late", late_args), ("Gone", gone_args)):
            _until(
                lambda args=args: submitted(args).client == "cancelled",  # type: ignore[misc]
                timeout,
                f"the state of {name} never said 'cancelled': {submitted(args)}",
            )
    with _relying_on(HANDLER_IN_SUBMITTED):
        probe.release.set()
        holding.result(timeout)
        _expect(HANDLER_IN_SUBMITTED, not late_reached.result(timeout), "the late call ran")
        _expect(HANDLER_IN_SUBMITTED, not gone_reached.result(timeout), "the gone call ran")
    with _relying_on(SUBMITTED_CALL):
        late_seen, gone_seen = submitted(late_args), submitted(gone_args)
        _expect(
            SUBMITTED_CALL,
            late_seen.deadline is not None and sent < late_seen.deadline <= sent + SHORT + 1,
            f"deadline {late_seen.deadline} of a call sent at {sent} with {SHORT} s",
        )
        _expect(
            SUBMITTED_CALL,
            gone_seen.deadline is not None
            and sent + SHORT < gone_seen.deadline <= sent + timeout + 1
            and gone_seen.code is None,
            f"{gone_seen} of a call sent at {sent} with {timeout} s, cancelled by its client",
        )

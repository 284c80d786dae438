"""basra-gateway (deploy/gateway, the HTTP/JSON port of docs/http.md) as a child process on
loopback, in front of a running gRPC server; and curl, the real binary, to call it.

The gateway binds a port of its own choosing (--listen 127.0.0.1:0) and says which in its
"serving" log line (JSON on stderr), which is read back here, as testkit.harness does for the
server. The binary is the one `bash deploy/gateway/build` makes (.ci/setup dev runs it); a
missing binary fails the caller with that command, it never skips.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testkit.ports import LOOPBACK

REPO = Path(__file__).resolve().parents[1]
BINARY = REPO / ".cache" / "gateway" / "basra-gateway"
SERVICE_CONFIG = REPO / "deploy" / "grpc-service-config.json"
BUILD = "bash deploy/gateway/build"
START_SECONDS = 30.0
ROUTE = "/basra.v1.RulesService/"


@dataclass
class RunningGateway:
    """A started gateway: its base URL, its process and the JSON lines it has logged."""

    url: str
    process: subprocess.Popen[str]
    lines: list[dict[str, Any]] = field(default_factory=list)
    text: list[str] = field(default_factory=list)
    """Every line it wrote, JSON or not (a Go panic's is not)."""
    arrived: threading.Condition = field(default_factory=threading.Condition)

    def find(self, message: str) -> list[dict[str, Any]]:
        """The log lines whose msg is `message`."""
        with self.arrived:
            return [line for line in self.lines if line.get("msg") == message]

    def wait_for(self, message: str, timeout: float) -> dict[str, Any]:
        """The first log line whose msg is `message`, waiting while the gateway runs."""
        with self.arrived:
            found = self.arrived.wait_for(
                lambda: self.find(message) or self.process.poll() is not None, timeout
            )
        lines = self.find(message)
        if not found or not lines:
            raise TimeoutError(f"basra-gateway logged no {message!r}: {self.log_text()[-2000:]}")
        return lines[0]

    def log_text(self) -> str:
        """Everything it has written, as text."""
        with self.arrived:
            return "\n".join(self.text)

    def terminate(self, timeout: float = 30.0) -> int:
        """Send SIGTERM (the drain begins) and wait for the exit; its exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)

    def _read(self) -> None:
        assert self.process.stderr is not None
        for raw in self.process.stderr:
            text = raw.rstrip("\n")
            try:
                line = json.loads(text)
            except ValueError:
                line = None
            with self.arrived:
                self.text.append(text)
                if isinstance(line, dict):
                    self.lines.append(line)
                self.arrived.notify_all()
        with self.arrived:
            self.arrived.notify_all()


def binary() -> Path:
    """The built gateway; an AssertionError naming the build command when it is missing."""
    if not os.access(BINARY, os.X_OK):
        raise AssertionError(f"{BINARY.relative_to(REPO)} is missing: build it with `{BUILD}`")
    return BINARY


@contextmanager
def running(backend: str, *flags: str) -> Iterator[RunningGateway]:
    """Start basra-gateway on a free loopback port in front of the gRPC server at `backend`
    (host:port), with the published service config and then `flags`; stop it in `finally`."""
    process = subprocess.Popen(
        [
            str(binary()),
            "--listen",
            f"{LOOPBACK}:0",
            "--backend",
            backend,
            "--service-config",
            str(SERVICE_CONFIG),
            *flags,
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    started = RunningGateway("", process)
    reader = threading.Thread(target=started._read, name="gateway-log", daemon=True)
    reader.start()
    try:
        serving = started.wait_for("serving", START_SECONDS)
        started.url = f"http://{serving['address']}"
        yield started
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(10)
        reader.join(10)


def first_move(legal: dict[str, Any]) -> dict[str, Any]:
    """The action of the first legal move (its first plan, or a trail), in proto3 JSON."""
    move = legal["moves"][0]
    action: dict[str, Any] = {"seat": legal.get("seat", 0), "card": move["card"]}
    if move.get("plans"):
        action["planId"] = move["plans"][0]["id"]
    else:
        action["trail"] = True
    return action


@contextmanager
def gateway(backend: str) -> Iterator[str]:
    """basra-gateway in front of the gRPC server at `backend`; its base URL
    (http://127.0.0.1:PORT), for the block."""
    with running(backend) as started:
        yield started.url


@dataclass(frozen=True)
class Answer:
    """An HTTP answer as curl saw it: status, headers (names in lower case), body."""

    status: int
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Any:
        """The body, parsed as JSON."""
        return json.loads(self.body)


def curl(
    url: str,
    body: bytes | str | None = None,
    *,
    method: str = "POST",
    headers: Sequence[str] = ("Content-Type: application/json",),
    timeout: float = 30.0,
) -> Answer:
    """One request by the real curl binary (HTTP/1.1): `body` goes on standard input."""
    data = body.encode() if isinstance(body, str) else body
    command = ["curl", "--silent", "--show-error", "--http1.1", "--include", "-X", method]
    command += ["--max-time", str(timeout)]
    for header in headers:
        command += ["-H", header]
    if data is not None:
        command += ["--data-binary", "@-"]
    command.append(url)
    done = subprocess.run(
        command, check=False, input=data or b"", capture_output=True, timeout=timeout + 5
    )
    if done.returncode != 0:
        raise AssertionError(f"curl {url} failed ({done.returncode}): {done.stderr.decode()}")
    return parse_answer(done.stdout)


def call(url: str, method: str, request: Mapping[str, Any], *headers: str) -> Answer:
    """POST `request` as JSON to the RulesService `method` of the gateway at `url`."""
    return curl(
        url + ROUTE + method,
        json.dumps(request),
        headers=("Content-Type: application/json", *headers),
    )


def parse_answer(raw: bytes) -> Answer:
    """The last response of curl --include's output (an interim 100 Continue comes first)."""
    head, _, body = raw.partition(b"\r\n\r\n")
    while head.startswith(b"HTTP/") and b" 100 " in head.split(b"\r\n", 1)[0]:
        head, _, body = body.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return Answer(int(status_line.split()[1]), headers, body)


class GatedApply:
    """Handlers whose Apply waits until the gate opens: a call held in flight, or holding a
    server's admission slot, for as long as a test needs (tests/http)."""

    def __init__(self, handlers: Any, wait: float = 30.0) -> None:
        self._handlers = handlers
        self._wait = wait
        self.waiting = threading.Semaphore(0)
        """Released once by each Apply that reached the gate."""
        self.opened = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handlers, name)

    def apply(self, request: Any, facts: Any) -> bytes:
        """Wait for the gate, then apply."""
        self.waiting.release()
        if not self.opened.wait(self._wait):
            raise TimeoutError("the gate was never opened")
        return bytes(self._handlers.apply(request, facts))


# ---- docs/http.md's two tables, which tests hold to the binary and to its answers ----

DOC = REPO / "docs" / "http.md"
REASONS_HEADER = "| reason | HTTP status | code | when |"
MAPPING_HEADER = "| gRPC code | HTTP status |"


def doc_table(header: str, page: Path = DOC) -> list[tuple[str, ...]]:
    """The rows of the Markdown table whose header row is `header`, cells without their
    backticks."""
    lines = page.read_text(encoding="utf-8").splitlines()
    start = lines.index(header) + 2  # the header, then the |---| row
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        rows.append(
            tuple(
                cell[1:-1]
                if cell.startswith("`") and cell.endswith("`") and cell.count("`") == 2
                else cell
                for cell in cells
            )
        )
    return rows


def documented_reasons() -> dict[str, tuple[int, str, str]]:
    """The gateway's reasons as docs/http.md lists them: HTTP status, code, when."""
    return {row[0]: (int(row[1]), row[2], row[3]) for row in doc_table(REASONS_HEADER)}


def documented_mapping() -> dict[str, int]:
    """The HTTP status of each gRPC code, as docs/http.md lists them."""
    return {row[0]: int(row[1]) for row in doc_table(MAPPING_HEADER)}


def described() -> dict[str, Any]:
    """What `basra-gateway --describe` prints: its reasons and the code mapping it applies."""
    done = subprocess.run(
        [str(binary()), "--describe"], check=True, capture_output=True, text=True, timeout=30
    )
    return dict(json.loads(done.stdout))

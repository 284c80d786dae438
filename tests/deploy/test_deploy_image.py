"""The container image, built by the documented command and run the way the chart runs it.

A Docker engine of the test's own (docker_engine.py) builds deploy/Dockerfile on a Python base
made from Debian's packages, with BuildKit (no frontend image may be fetched), and shows that
the legacy builder (the default of Debian's docker.io 20.10) and BuildKit send the same trimmed
context. The image then runs with the security context, volumes and environment of the
chart's default render: read-only root, every capability dropped, no privilege escalation,
uid 10001, /tmp a tmpfs. Only the bind address and ports change (the host's loopback, ports
chosen free: the engine has no bridge), and the metrics emptyDir is a directory of the host,
as an emptyDir is a directory of the node, so that the workers' last values can be read after
the container is gone. The HTTP/JSON gateway the image carries (built on the host first, as
docs/deploy.md shows) runs beside it as the chart's gateway container runs it, with the chart's
flags and security context, and answers a NewMatch and a move over HTTP; the Dockerfile's
optional COPY of it is built alone with both builders, with and without the binary.

With CI=true the engine must start; elsewhere, without root, dockerd or debootstrap, the test
is skipped and says why. Timings go to the test's output (pytest -s) for docs/deploy.md.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
import tarfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from testkit import docker_engine, images
from testkit import reflection as reflect
from testkit.deployment import (
    CHART_OVERRIDES,
    DOCKERFILE,
    HEALTH_SERVICE,
    REPO,
    container,
    context_files,
    env_map,
    manifests,
    one,
    parse_dockerfile,
    read_lock,
    render,
)
from testkit.doc_commands import commands
from testkit.docker_engine import Engine
from testkit.http_gateway import call
from testkit.metrics_files import counter_total

IMAGE = "basra-rules:0.1.0"
DEPLOY_DOC = REPO / "docs" / "deploy.md"
# The whole test, a cold base included, on a busy 2-core machine: a bound, not a target.
TOTAL_SECONDS = 1800
BUILD_SECONDS = 900.0
SERVING_SECONDS = 60.0
SPREAD_SECONDS = 60.0
METRICS_SECONDS = 15.0
# Answers before the stop, so that the signal lands while calls are in flight.
BURST_CALLS = 200
BURST_THREADS = 4
NEVER_IN_CONTEXT = (".git/", ".venv/", "tests/", "testkit/", "benchmarks/", ".cache/", "gen/")
# The one file of .cache/ the context keeps: the gateway `bash deploy/gateway/build` made.
GATEWAY_BINARY = ".cache/gateway/basra-gateway"
SERVER_RUN = "docker run --rm --name"
GATEWAY_RUN = "docker run --rm --network container:"
HTTP_CALLS = 2
METRICS_ERROR = "cannot use the metrics directory"

pytestmark = pytest.mark.timeout(TOTAL_SECONDS)


def _doc_commands() -> list[str]:
    """The commands docs/deploy.md shows (read by tests/docs' own reader)."""
    return [c.text for c in commands() if c.page == "docs/deploy.md"]


def documented(prefix: str) -> list[str]:
    """The words of the one docs/deploy.md command that starts with `prefix`."""
    found = [c for c in _doc_commands() if c.startswith(prefix)]
    assert len(found) == 1, f"docs/deploy.md should show one `{prefix}...`: {found}"
    return shlex.split(found[0])


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    """A dockerd of this test's own; skipped with the reason where none can start (not in CI)."""
    reason = docker_engine.unavailable()
    if reason is not None:
        if docker_engine.IN_CI:
            pytest.fail(f"CI=true, yet no Docker engine can be started: {reason}")
        pytest.skip(f"no Docker engine here: {reason}")
    with docker_engine.started() as started:
        yield started


@dataclass
class Timings:
    """What the run measured, printed at the end for docs/deploy.md."""

    values: dict[str, float] = field(default_factory=dict)

    def since(self, name: str, start: float) -> float:
        """Record the seconds since `start` under `name`; return them."""
        self.values[name] = round(time.monotonic() - start, 2)
        return self.values[name]


@dataclass(frozen=True)
class ChartRun:
    """How the chart's default render runs the server container, as docker run flags."""

    env: dict[str, str]
    flags: list[str]
    metrics_dir: str
    grace: float
    termination_grace: int
    probes: dict[str, Any]
    """The container's startup, liveness and readiness probes."""


def chart_run() -> ChartRun:
    """The security context, volumes and environment of the chart's default render."""
    objects = manifests(render())
    server = container(objects)
    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    flags = security_flags(server["securityContext"], pod)
    env = env_map(server)
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: volumes[m["name"]] for m in server["volumeMounts"]}
    assert all("emptyDir" in v for v in mounts.values()), "only emptyDir volumes by default"
    metrics_dir = env["BASRA_METRICS_DIR"]
    assert set(mounts) == {"/tmp", metrics_dir}
    return ChartRun(
        env=env,
        flags=flags,
        metrics_dir=metrics_dir,
        grace=float(env["BASRA_GRACE_SECONDS"]),
        termination_grace=int(pod["terminationGracePeriodSeconds"]),
        probes={p: server[p] for p in ("startupProbe", "livenessProbe", "readinessProbe")},
    )


@dataclass(frozen=True)
class GatewayRun:
    """How the chart runs the gateway container (http.enabled), as docker run flags."""

    flags: list[str]
    entrypoint: str
    args: list[str]
    """Its command after the binary: --name=value words."""
    port: int
    """Its containerPort."""


def security_flags(security: dict[str, Any], pod: dict[str, Any]) -> list[str]:
    """docker run flags for a container's security context and its pod's user."""
    flags = []
    if security["readOnlyRootFilesystem"]:
        flags.append("--read-only")
    for capability in security["capabilities"]["drop"]:
        flags += ["--cap-drop", capability]
    if security["allowPrivilegeEscalation"] is False:
        flags += ["--security-opt", "no-new-privileges"]
    user = pod["securityContext"]
    flags += ["--user", f"{user['runAsUser']}:{user['runAsGroup']}"]
    return flags


def gateway_run() -> GatewayRun:
    """The gateway container of the chart's render with HTTP on."""
    objects = manifests(render({"http": {"enabled": True}}))
    gateway = container(objects, "gateway")
    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    assert "volumeMounts" not in gateway, "the gateway writes nothing"
    entrypoint, *args = gateway["command"]
    (port,) = gateway["ports"]
    return GatewayRun(
        security_flags(gateway["securityContext"], pod), entrypoint, args, port["containerPort"]
    )


def with_flag(args: list[str], name: str, value: str) -> list[str]:
    """`args` with the --name=value word's value replaced."""
    assert sum(a.startswith(f"{name}=") for a in args) == 1, (name, args)
    return [f"{name}={value}" if a.startswith(f"{name}=") else a for a in args]


def test_the_documented_run_command_is_the_charts() -> None:
    """docs/deploy.md's `docker run` carries the chart's security context, mounts and metrics
    directory, and a stop timeout longer than the grace (docker stop's default 10 s is not)."""
    words = documented(SERVER_RUN)
    chart = chart_run()
    text = " ".join(words)
    for flag in chart.flags:
        assert flag in words, flag
    for path in ("/tmp", chart.metrics_dir):
        assert f"--tmpfs {path}" in text, path
    assert f"BASRA_METRICS_DIR={chart.metrics_dir}" in words
    assert f"BASRA_WORKERS={CHART_OVERRIDES['BASRA_WORKERS']}" in words
    timeout = int(words[words.index("--stop-timeout") + 1])
    assert timeout > chart.grace
    assert words[-1] == IMAGE


def test_the_documented_gateway_run_command_is_the_charts() -> None:
    """docs/deploy.md's gateway `docker run` joins the server container's network namespace
    (as a pod's containers share one, the server's container publishing the gateway's port)
    and carries the chart's gateway container: its security context, binary and flags."""
    words = documented(GATEWAY_RUN)
    server = documented(SERVER_RUN)
    name = server[server.index("--name") + 1]
    assert words[words.index("--network") + 1] == f"container:{name}"
    gateway = gateway_run()
    for flag in gateway.flags:
        assert flag in words, flag
    assert words[words.index("--entrypoint") + 1] == gateway.entrypoint
    image = words.index(IMAGE)
    assert words[image + 1 :] == gateway.args
    assert f"{gateway.port}:{gateway.port}" in server


def _probe_context(engine: Engine, workdir: Path, buildkit: bool) -> list[str]:
    """The files a builder sends as the context of the repository root."""
    probe = workdir / f"probe-{int(buildkit)}.Dockerfile"
    probe.write_text("FROM scratch\nCOPY . /context/\n")
    tag = f"context-probe:{'buildkit' if buildkit else 'legacy'}"
    engine.run("build", "-q", "-f", str(probe), "-t", tag, str(REPO), buildkit=buildkit)
    created = engine.output("create", tag, "/none")
    exported = workdir / f"probe-{int(buildkit)}.tar"
    engine.run("export", "-o", str(exported), created, timeout=120)
    engine.run("rm", created)
    with tarfile.open(exported) as archive:
        names = [m.name for m in archive.getmembers() if m.isfile()]
    return sorted(n.removeprefix("context/") for n in names if n.startswith("context/"))


def _optional_gateway_copy(engine: Engine, workdir: Path) -> None:
    """The final stage's one COPY from the context, alone on scratch, with each builder, in a
    context with the gateway's binary and in one without (a checkout where Go never ran): the
    binary is copied when it is there, and its absence fails neither builder."""
    _, stages = parse_dockerfile(DOCKERFILE.read_text())
    (line,) = [a for a in stages[-1].all("COPY") if "--from" not in a]
    *sources, target = shlex.split(line)
    plain = [re.sub(r"\[(.)\]", r"\1", s) for s in sources]
    assert GATEWAY_BINARY in plain and target.endswith("/")
    for with_binary in (True, False):
        context = workdir / f"gateway-copy-{int(with_binary)}"
        for source in plain:
            if source != GATEWAY_BINARY or with_binary:
                (context / source).parent.mkdir(parents=True, exist_ok=True)
                (context / source).write_bytes((REPO / source).read_bytes())
        (context / "Dockerfile").write_text(f"FROM scratch\nCOPY {line}\n")
        for buildkit in (False, True):
            tag = f"gateway-copy:{int(with_binary)}{int(buildkit)}"
            engine.run("build", "-q", "-t", tag, str(context), buildkit=buildkit)
            created = engine.output("create", tag, "/none")
            exported = workdir / "gateway-copy.tar"
            engine.run("export", "-o", str(exported), created, timeout=120)
            engine.run("rm", created)
            with tarfile.open(exported) as archive:
                names = {m.name for m in archive.getmembers() if m.isfile()}
            copied = {n for n in names if n.startswith(target.strip("/") + "/")}
            wanted = {f"{target.strip('/')}/{Path(s).name}" for s in plain}
            if not with_binary:
                wanted.discard(f"{target.strip('/')}/{Path(GATEWAY_BINARY).name}")
            assert copied == wanted, (with_binary, buildkit, copied)


def _build(engine: Engine, base: str, buildkit: bool) -> str:
    """Run the documented offline build command against the engine; return its output."""
    words = documented("docker build -f deploy/Dockerfile --build-arg PYTHON_IMAGE=")
    assert f"PYTHON_IMAGE={base}" in words
    assert [w for w in words if "PYTHON_IMAGE" not in w and w != "--build-arg"] == shlex.split(
        " ".join(documented("docker build -f deploy/Dockerfile -t"))
    ), "the offline build is the plain build with the base named"
    # The engine has no bridge: the build's pip reaches the index through the host's network.
    done = engine.run(
        *words[1:-1], "--network", "host", words[-1], timeout=BUILD_SECONDS, buildkit=buildkit
    )
    return done.stdout + done.stderr


def _health(target: str, service: str) -> Any:
    with grpc.insecure_channel(target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        return stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=2).status


def _wait_serving(target: str, engine: Engine, name: str) -> None:
    deadline = time.monotonic() + SERVING_SECONDS
    serving = health_pb2.HealthCheckResponse.SERVING
    while time.monotonic() < deadline:
        try:
            if all(_health(target, s) == serving for s in ("", HEALTH_SERVICE)):
                return
        except grpc.RpcError:
            pass
        state = docker_engine.inspect(engine, name)["State"]
        assert isinstance(state, dict)
        assert state["Running"], engine.run("logs", name, check=False).stdout[-3000:]
        time.sleep(0.05)
    raise TimeoutError(f"{name} not SERVING within {SERVING_SECONDS} s")


def _log_lines(engine: Engine, name: str) -> list[dict[str, Any]]:
    done = engine.run("logs", name)
    lines = []
    for text in (done.stdout + done.stderr).splitlines():
        parsed = json.loads(text)  # every line the server prints is JSON (the chart's format)
        assert isinstance(parsed, dict)
        lines.append(parsed)
    return lines


def _handled_ok(text: str) -> float:
    """RulesService calls answered OK, summed over methods, from /metrics' text."""
    return sum(
        float(line.rpartition(" ")[2])
        for line in text.splitlines()
        if line.startswith('grpc_server_handled_total{grpc_code="OK"')
        and f'grpc_service="{HEALTH_SERVICE}"' in line
    )


def _metrics_text(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        assert response.status == 200
        return str(response.read().decode())


def _rules_total(directory: Path, family: str, code: str | None = None) -> float:
    """A RulesService counter summed over methods (and codes, unless one is named), from the
    workers' values left in the metrics directory, aggregated as /metrics aggregates them."""
    labels = {"grpc_service": HEALTH_SERVICE, **({"grpc_code": code} if code else {})}
    return counter_total(sorted(directory.glob("*.db")), family, labels)


def _spread_calls(target: str, connections: int) -> int:
    """A few NewMatch calls on each of several connections; return how many were made."""
    made = 0
    for index in range(connections):
        options = [("grpc.use_local_subchannel_pool", 1)]
        with grpc.insecure_channel(target, options=options) as channel:
            new_match = reflect.Reflector(channel).caller(f"{reflect.RULES_SERVICE}.NewMatch")
            for _ in range(3):
                assert new_match({"seed": f"c3ByZWFk{index:02d}"})["state"]["seq"] == 0
                made += 1
    return made


@dataclass
class Burst:
    """Threads calling NewMatch and Apply through reflected types, each on its own connection,
    until a call fails."""

    target: str
    outcomes: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    pool: ThreadPoolExecutor | None = None
    running: list[Future[None]] = field(default_factory=list)

    def run(self, index: int) -> None:
        """Play moves until a call fails; record how every call ended."""
        options = [("grpc.use_local_subchannel_pool", 1)]
        with grpc.insecure_channel(self.target, options=options) as channel:
            reflector = reflect.Reflector(channel, "v1")
            new_match = reflector.caller(f"{reflect.RULES_SERVICE}.NewMatch")
            apply = reflector.caller(f"{reflect.RULES_SERVICE}.Apply")
            answer: dict[str, Any] | None = None
            seed = f"YnVyc3Q{index}"  # base64 of a few bytes, one seed per thread
            for _ in range(100_000):
                try:
                    if answer is None or answer["state"]["status"] == "STATUS_OVER":
                        answer = new_match({"seed": seed}, timeout=5)
                    else:
                        state, moves = answer["state"], answer["legal_moves"]
                        action = {"seat": moves["seat"], "card": moves["moves"][-1]["card"]}
                        answer = apply(
                            {"state": state, "action": action, "expected_seq": state["seq"]},
                            timeout=5,
                        )
                    code = "OK"
                except grpc.RpcError as error:
                    code = error.code().name if isinstance(error, grpc.Call) else "?"
                with self.lock:
                    self.outcomes.append(code)
                if code != "OK":
                    return

    def start(self, count: int) -> None:
        """Start `count` calling threads."""
        self.pool = ThreadPoolExecutor(count, thread_name_prefix="burst")
        self.running = [self.pool.submit(self.run, n) for n in range(count)]

    def join(self, timeout: float) -> None:
        """Wait for every thread to end (each ends at its first failed call)."""
        done, late = wait(self.running, timeout)
        assert not late, "calls still running"
        for future in done:
            future.result()
        assert self.pool is not None
        self.pool.shutdown()


def _http_calls(engine: Engine, target: str, timings: Timings) -> int:
    """Run the image's gateway as the chart does in front of the server at `target`, begin a
    match and make a move through it, stop it; return the calls it handed the server."""
    gateway = gateway_run()
    port = docker_engine.free_port()
    args = with_flag(gateway.args, "--listen", f"127.0.0.1:{port}")
    args = with_flag(args, "--backend", target)
    name = "basra-gateway-under-test"
    engine.run(
        "run",
        "-d",
        "--name",
        name,
        "--network",
        "host",
        *gateway.flags,
        "--entrypoint",
        gateway.entrypoint,
        IMAGE,
        *args,
    )
    deadline = time.monotonic() + SERVING_SECONDS
    while not [line for line in _log_lines(engine, name) if line.get("msg") == "serving"]:
        state = docker_engine.inspect(engine, name)["State"]
        assert isinstance(state, dict) and state["Running"], _log_lines(engine, name)
        assert time.monotonic() < deadline, f"the gateway did not serve in {SERVING_SECONDS} s"
        time.sleep(0.05)
    url = f"http://127.0.0.1:{port}"
    begun = call(url, "NewMatch", {"seed": base64.b64encode(b"image-http").decode()})
    assert begun.status == 200, begun.body
    assert begun.headers["content-type"] == "application/json"
    state, legal = begun.json()["state"], begun.json()["legalMoves"]
    assert state.get("seq", 0) == 0  # proto3 JSON leaves zero out
    move = legal["moves"][0]
    action = {"seat": legal.get("seat", 0), "card": move["card"]}
    action |= {"planId": move["plans"][0]["id"]} if move.get("plans") else {"trail": True}
    moved = call(url, "Apply", {"state": state, "action": action, "expectedSeq": 0})
    assert moved.status == 200, moved.body
    assert moved.json()["state"]["seq"] == 1
    start = time.monotonic()
    engine.run("stop", name, timeout=60)
    timings.since("gateway stop", start)
    state = docker_engine.inspect(engine, name)["State"]
    assert isinstance(state, dict)
    assert (state["ExitCode"], state["OOMKilled"]) == (0, False), state
    said = [line.get("msg") for line in _log_lines(engine, name)]
    assert "draining" in said and said[-1] == "stopped", said
    assert _written(engine, name, []) == []
    engine.run("rm", name)
    return HTTP_CALLS


def _installed_distributions(engine: Engine, chart: ChartRun) -> dict[str, str]:
    script = (
        "import importlib.metadata as m, json;"
        "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))"
    )
    output = engine.output(
        "run", "--rm", *chart.flags, "--entrypoint", "/opt/basra/bin/python", IMAGE, "-c", script
    )
    found = json.loads(output)
    assert isinstance(found, dict)
    return {re.sub(r"[-_.]+", "-", k).lower(): v for k, v in found.items()}


def _written(engine: Engine, name: str, mounts: list[str]) -> list[str]:
    """`docker diff` of a container, less the mount points docker made for its volumes (and
    the directories above them), which the server did not write."""
    script = "import os, sys; print(*(os.path.realpath(p) for p in sys.argv[1:]))"
    real = engine.output("run", "--rm", "--entrypoint", "python", IMAGE, "-c", script, *mounts)
    made = {str(parent) for path in real.split() for parent in (Path(path), *Path(path).parents)}
    changes = engine.output("diff", name).splitlines()
    return [line for line in changes if line.split(" ", 1)[1] not in made]


def _refused_start(engine: Engine, flags: list[str]) -> tuple[int, list[str]]:
    done = engine.run("run", "--rm", *flags, IMAGE, check=False, timeout=120)
    return done.returncode, (done.stdout + done.stderr).splitlines()


def test_the_image_builds_and_runs_as_the_chart_runs_it(
    engine: Engine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Build (both builders), then one container with the chart's settings, end to end."""
    timings = Timings()
    chart = chart_run()

    # The base: debootstrap once per checkout (cached), imported into this engine.
    start = time.monotonic()
    _, made = docker_engine.base_tarball()
    timings.since("base made" if made else "base from cache", start)
    assert documented("deploy/python-base.sh")[2:] == [], "the script's own arguments only"
    start = time.monotonic()
    base = docker_engine.import_base(engine)
    timings.since("base import", start)
    assert documented("docker import")[3] == base

    # The gateway, by the documented command (Go on the host), before the build.
    assert documented("bash deploy/gateway/build") == [
        "bash",
        images.GATEWAY_BUILD.relative_to(REPO).as_posix(),
    ]
    start = time.monotonic()
    images.build_gateway()
    timings.since("gateway build", start)

    # The context: the same files with both builders, never tests, the venv or git; of the
    # local caches, the gateway's binary only.
    start = time.monotonic()
    expected = context_files()
    assert GATEWAY_BINARY in expected
    for buildkit in (False, True):
        sent = _probe_context(engine, tmp_path, buildkit)
        builder = "BuildKit" if buildkit else "legacy builder"
        assert not [f for f in sent if f.startswith(NEVER_IN_CONTEXT) and f != GATEWAY_BINARY]
        assert sent == expected, f"{builder} sent other files than .dockerignore keeps"
    timings.since("context probes", start)
    _optional_gateway_copy(engine, tmp_path)

    # The image, by the documented command, with BuildKit: no frontend image is fetched (no
    # registry is reachable). The legacy builder reads the same Dockerfile and context.
    start = time.monotonic()
    output = _build(engine, base, buildkit=True)
    timings.since("build", start)
    assert "docker.io/docker/dockerfile" not in output
    image = json.loads(engine.output("image", "inspect", IMAGE))[0]
    timings.values["image MB"] = round(image["Size"] / 1e6, 1)
    base_size = json.loads(engine.output("image", "inspect", base))[0]["Size"]
    timings.values["base MB"] = round(base_size / 1e6, 1)
    # The sizes docs/deploy.md gives, within 5 % (a new release of a dependency moves them).
    page = DEPLOY_DOC.read_text()
    for name, size in (("the image is", image["Size"]), ("its base", base_size)):
        found = re.search(rf"{name} (\d+) MB", page)
        assert found, f"docs/deploy.md gives no size after '{name}'"
        assert abs(size / 1e6 - int(found.group(1))) <= 0.05 * int(found.group(1)), (name, size)
    config = image["Config"]
    assert config["User"] == "10001:10001"
    assert config["Entrypoint"] == ["/opt/basra/bin/basra-rules", "serve"]
    assert set(config["ExposedPorts"]) == {"50051/tcp", "9464/tcp"}
    images.check_gateway(engine, IMAGE)

    # Exactly the locked runtime versions in the image, and no installer.
    _, pins = read_lock(REPO / "deploy" / "requirements.lock")
    installed = _installed_distributions(engine, chart)
    assert installed.pop("basra-rules") == "0.1.0"
    assert installed == {name: pin.version for name, pin in pins.items()}

    # The chart's settings with no writable metrics directory: one clear line, exit 1; the
    # first is the line docs/deploy.md shows (all but its time).
    shown = json.loads(
        next(b for b in re.findall(r"```text\n(.*?)\n```", page, re.S) if METRICS_ERROR in b)
    )
    for mounts, why in (
        (["--tmpfs", "/tmp"], shown["error"]),
        ([], "No usable temporary directory"),
    ):
        env = dict(chart.env)
        if not mounts:
            del env["BASRA_METRICS_DIR"]  # nothing writable at all: not even a temporary dir
        code, lines = _refused_start(
            engine, [*chart.flags, *mounts, *docker_engine.run_flags(env), "--network", "none"]
        )
        assert code == 1, lines
        (line,) = lines
        parsed = json.loads(line)
        assert parsed["event"] == METRICS_ERROR and parsed["level"] == "error", parsed
        assert why in parsed["error"], parsed
        if mounts:
            assert list(parsed) == list(shown)
            assert {**parsed, "timestamp": "..."} == shown

    # The container as the chart runs it.
    metrics_dir = tmp_path / "metrics"  # the emptyDir: a directory of the node
    metrics_dir.mkdir()
    metrics_dir.chmod(0o770)
    os.chown(metrics_dir, 10001, 10001)
    port, metrics_port = docker_engine.free_port(), docker_engine.free_port()
    health_port = docker_engine.free_port()
    env = {
        **chart.env,
        "BASRA_HOST": "127.0.0.1",
        "BASRA_PORT": str(port),
        "BASRA_METRICS_PORT": str(metrics_port),
        "BASRA_HEALTH_PORT": str(health_port),
    }
    name = "basra-under-test"
    run_args = [
        "run",
        "-d",
        "--name",
        name,
        "--network",
        "host",
        *chart.flags,
        "--tmpfs",
        "/tmp",
        "--mount",
        f"type=bind,source={metrics_dir},target={chart.metrics_dir}",
        "--stop-timeout",
        str(chart.termination_grace),
        *docker_engine.run_flags(env),
        IMAGE,
    ]
    target = f"127.0.0.1:{port}"
    start = time.monotonic()
    engine.run(*run_args)
    _wait_serving(target, engine, name)
    timings.since("start to SERVING", start)
    # The chart's three probes, as the kubelet makes them: gRPC health on the health port,
    # which turns SERVING once both workers serve (the startup probe asks until it does).
    serving = health_pb2.HealthCheckResponse.SERVING
    deadline = time.monotonic() + SERVING_SECONDS
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        action = chart.probes[probe]["grpc"]
        assert action["port"] == int(chart.env["BASRA_HEALTH_PORT"]), probe
        while _health(f"127.0.0.1:{health_port}", action["service"]) != serving:
            assert probe == "startupProbe" and time.monotonic() < deadline, probe
            time.sleep(0.05)

    # Every RPC through reflection, v1 and v1alpha, with types from the reflected descriptors.
    with grpc.insecure_channel(target) as channel:
        for protocol in ("v1", "v1alpha"):
            reflector = reflect.Reflector(channel, protocol)
            listed = set(reflector.services())
            assert {HEALTH_SERVICE, "grpc.health.v1.Health"} <= listed
            assert {
                "grpc.reflection.v1.ServerReflection",
                "grpc.reflection.v1alpha.ServerReflection",
            } <= listed
            assert sorted(reflect.method_names(reflector, HEALTH_SERVICE)) == sorted(
                reflect.RULE_RPCS
            )
            assert set(reflect.every_rulesservice_call(reflector)) == set(reflect.RULE_RPCS)

    # Two workers (the chart's BASRA_WORKERS) share the port: connections reach both.
    deadline = time.monotonic() + SPREAD_SECONDS
    spread = 0
    workers: set[int] = set()
    while len(workers) < 2:
        assert time.monotonic() < deadline, f"calls reached only workers {workers}"
        spread += _spread_calls(target, connections=4)
        workers = {line["worker"] for line in _log_lines(engine, name) if line["event"] == "rpc"}
    assert len(workers) == 2

    # /metrics, aggregated over both workers by the supervisor (each writes every second).
    calls = 2 * reflect.COUNTED_CALLS + spread
    deadline = time.monotonic() + METRICS_SECONDS
    while (handled := _handled_ok(_metrics_text(metrics_port))) < calls:
        assert time.monotonic() < deadline, f"/metrics counts {handled} of {calls} calls"
        time.sleep(0.2)
    assert handled == calls

    # Nothing written outside the mounts.
    mounts = ["/tmp", chart.metrics_dir]
    assert _written(engine, name, mounts) == []

    # The gateway as the chart runs it beside the server (the pod's loopback is the host's
    # here): its security context, binary and flags, on a free port; a match begun and a move
    # made over HTTP/JSON; then SIGTERM: it drains and exits 0, having written nothing.
    start = time.monotonic()
    http_answers = _http_calls(engine, target, timings)
    timings.since("gateway run", start)

    # SIGTERM (docker stop) in the middle of a burst: drained within the grace, exit 0.
    burst = Burst(target)
    burst.start(BURST_THREADS)
    deadline = time.monotonic() + SPREAD_SECONDS
    while len(burst.outcomes) < BURST_CALLS:
        assert time.monotonic() < deadline, f"{len(burst.outcomes)} answers"
        time.sleep(0.01)
    start = time.monotonic()
    engine.run("stop", name, timeout=chart.termination_grace + 30)  # its --stop-timeout
    stopped = timings.since("stop", start)
    burst.join(30)
    state = docker_engine.inspect(engine, name)["State"]
    assert isinstance(state, dict)
    assert (state["ExitCode"], state["OOMKilled"]) == (0, False), state
    assert stopped < chart.grace, f"stopped in {stopped} s, grace {chart.grace} s"
    events = [line["event"] for line in _log_lines(engine, name)]
    assert events.count("worker stopped") == 2 and events[-1] == "stopped", events[-6:]
    assert _written(engine, name, mounts) == []

    # No call the server accepted was lost: every call started was answered, and answered
    # OK, and those are exactly the calls the clients saw succeed (by reflection above: each
    # RPC twice, and the batch's items, each counted as an Apply).
    started_calls = _rules_total(metrics_dir, "grpc_server_started_total")
    assert started_calls == _rules_total(metrics_dir, "grpc_server_handled_total")
    answered = _rules_total(metrics_dir, "grpc_server_handled_total", "OK")
    assert answered == started_calls
    assert answered == (
        2 * reflect.COUNTED_CALLS + spread + http_answers + burst.outcomes.count("OK")
    )
    assert set(burst.outcomes) <= {"OK", "UNAVAILABLE", "CANCELLED"}, set(burst.outcomes)
    engine.run("rm", name)

    with capsys.disabled():
        print(f"\nimage figures: {json.dumps(timings.values)}")

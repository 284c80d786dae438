"""The project installed the way a user installs it, and used from outside the repository.

Exactly what deploy/Dockerfile copies into its build stage is copied into a temporary
directory outside the checkout; the Dockerfile's generate step runs there; `python -m build`
makes the sdist and, from the sdist, the wheel (without build isolation, as the image builds
it); the wheel goes into a fresh virtual environment holding the locked runtime versions and
nothing else (installed by uv, the lock's own tool; the image installs the same lock with pip),
once at each end of what its metadata admits: the newest versions (deploy/requirements.lock,
what the image runs) and the lowest (deploy/requirements-lowest.lock, uv's lowest-direct
resolution of pyproject.toml's floors). Each environment then serves every RPC from a working
directory outside the checkout, plays a match and verifies its record, with no path of the
repository importable.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from basra.v1 import rules_pb2 as pb
from basra.v1 import rules_pb2_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from packaging.utils import canonicalize_name

from testkit import harness, otlp
from testkit import reflection as reflect
from testkit.deployment import REPO, copy_build_sources, read_lock
from testkit.pki import make_pki

SHIPPED = ("engine", "wire", "service", "clients")
NEVER_SHIPPED = ("tests", "testkit", "benchmarks")
STEP_SECONDS = 300.0


# Both ends of the runtime ranges pyproject.toml declares, each a lock with hashes.
LOCKS = ("requirements.lock", "requirements-lowest.lock")


@dataclass(frozen=True)
class Built:
    """The sdist and wheel, built outside the checkout."""

    root: Path
    wheel: Path
    sdist: Path
    build_output: str


@dataclass(frozen=True)
class Installed:
    """The wheel installed into a venv of one lock's versions."""

    root: Path
    lock: str
    venv: Path

    @property
    def command(self) -> list[str]:
        """The installed `basra-rules` console script."""
        return [str(self.venv / "bin" / "basra-rules")]

    @property
    def elsewhere(self) -> Path:
        """A working directory outside the checkout and the sources."""
        path = self.root / "elsewhere"
        path.mkdir(exist_ok=True)
        return path


def _run(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        args,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=STEP_SECONDS,
        check=False,
    )
    assert done.returncode == 0, f"{' '.join(args)}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout + done.stderr


def _clean_env() -> dict[str, str]:
    """The user's environment without anything that would put the checkout on the path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(str(REPO))
    )
    return env


@pytest.fixture(scope="module")
def built() -> Iterator[Built]:
    """Build the sdist and wheel outside the checkout."""
    root = Path(tempfile.mkdtemp(prefix="basra-wheel-"))
    assert not root.is_relative_to(REPO)
    src = root / "src"
    copy_build_sources(src)
    env = _clean_env()
    # The Dockerfile's generate step (this environment holds the code generator).
    _run([sys.executable, "proto/generate.py"], src, env)
    # `python -m build`: the sdist, then the wheel from the unpacked sdist. Without build
    # isolation, as the image builds: this environment's setuptools is the locked one.
    dist = root / "dist"
    output = _run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(src)],
        root,
        env,
    )
    (wheel,) = dist.glob("*.whl")
    (sdist,) = dist.glob("*.tar.gz")
    try:
        yield Built(root, wheel, sdist, output)
    finally:
        subprocess.run(["rm", "-rf", str(root)], check=False)


@pytest.fixture(scope="module", params=LOCKS)
def installed(request: pytest.FixtureRequest, built: Built) -> Iterator[Installed]:
    """The wheel in a new venv holding one lock's runtime versions and nothing else."""
    lock: str = request.param
    root = Path(tempfile.mkdtemp(prefix="basra-venv-", dir=built.root))
    env = _clean_env()
    # A venv with nothing in it (no pip either), filled by uv, the lock's own tool (the image
    # installs the newest lock with pip): the locked runtime versions by hash, then the wheel.
    venv = root / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], root, env)
    _run([*_uv(venv, "install"), "--require-hashes", "-r", str(REPO / "deploy" / lock)], root, env)
    _run([*_uv(venv, "install"), "--no-deps", str(built.wheel)], root, env)
    _run(_uv(venv, "check"), root, env)
    yield Installed(root, lock, venv)


def _uv(venv: Path, command: str) -> list[str]:
    """`uv pip COMMAND` acting on `venv` (uv from this environment's development tools)."""
    uv = str(Path(sys.executable).parent / "uv")
    return [uv, "pip", command, "--quiet", "--python", str(venv / "bin" / "python")]


def _tree_modules(package: str) -> set[str]:
    return {
        p.relative_to(REPO).as_posix()
        for p in (REPO / package).rglob("*.py")
        if "__pycache__" not in p.parts
    }


def test_the_build_prints_no_warning(built: Built) -> None:
    """No deprecation (the `project.license` table was one) and no missing file."""
    lowered = built.build_output.lower()
    for word in ("deprecat", "setuptoolswarning", "userwarning", "cannot be found"):
        assert word not in lowered, built.build_output[-3000:]


def test_the_wheel_ships_every_module_of_the_tree_and_nothing_else(built: Built) -> None:
    """Every .py of engine/, wire/, service/ and clients/, the generated contract, the package data;
    nothing of tests/, testkit/ or benchmarks/."""
    names = set(zipfile.ZipFile(built.wheel).namelist())
    for package in SHIPPED:
        missing = _tree_modules(package) - names
        assert not missing, f"not in the wheel: {sorted(missing)}"
    generated = {"basra/__init__.py", "basra/v1/__init__.py", "basra/v1/rules_pb2.py"}
    data = {"basra/v1/rules_pb2_grpc.py", "basra/v1/rules_pb2.pyi", "basra/v1/rules.proto"}
    assert generated | data | {"service/plan_table.bin.gz"} <= names
    tops = {name.split("/")[0] for name in names}
    assert tops == {*SHIPPED, "basra", "basra_rules-0.1.0.dist-info"}
    for name in names:
        assert name.split("/")[0] not in NEVER_SHIPPED, name
    shipped_py = {n for n in names if n.endswith(".py") and n.split("/")[0] in SHIPPED}
    assert shipped_py == set().union(*(_tree_modules(p) for p in SHIPPED)), "a module not in tree"


def test_the_sdist_holds_the_sources_and_no_test_machinery(built: Built) -> None:
    """The sdist (the wheel was built from it) carries the same modules and the metadata."""
    with tarfile.open(built.sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    for package in SHIPPED:
        assert _tree_modules(package) <= names
    assert {"pyproject.toml", "README.md", "gen/basra/v1/rules_pb2.py"} <= names
    assert not [n for n in names if n.split("/")[0] in NEVER_SHIPPED]


def test_the_environment_holds_exactly_the_locked_versions(installed: Installed) -> None:
    """Every installed distribution is pinned in the runtime lock, at its version, and every
    pin is installed: nothing else (the venv was made without pip)."""
    listing = _run(
        [*_uv(installed.venv, "list"), "--format", "json"], installed.elsewhere, _clean_env()
    )
    found: dict[str, str] = {
        canonicalize_name(d["name"]): d["version"]
        for d in json.loads(listing[listing.index("[") :].splitlines()[0])
    }
    _, pins = read_lock(REPO / "deploy" / installed.lock)
    assert found.pop("basra-rules") == "0.1.0"
    assert found == {name: pin.version for name, pin in pins.items()}


def test_the_installed_code_is_imported_from_the_environment(installed: Installed) -> None:
    """From elsewhere, engine, wire, service, clients and basra.v1 come from the venv;
    testkit is absent."""
    script = (
        "import importlib.util, json, engine, wire, service, clients, basra.v1.rules_pb2 as pb;"
        "print(json.dumps([engine.__file__, wire.__file__, service.__file__, clients.__file__,"
        " pb.__file__,"
        " importlib.util.find_spec('testkit') is None]))"
    )
    output = _run(
        [str(installed.venv / "bin" / "python"), "-c", script], installed.elsewhere, _clean_env()
    )
    *files, no_testkit = json.loads(output.strip().splitlines()[-1])
    assert all(Path(f).is_relative_to(installed.venv) for f in files), files
    assert no_testkit


@pytest.mark.timeout(STEP_SECONDS)
def test_the_installed_server_serves_every_rpc_plays_and_verifies(installed: Installed) -> None:
    """`basra-rules serve` from the venv, outside the checkout: health, reflection v1 and
    v1alpha, every RPC by reflected descriptors; then `play` records a match that `verify`
    accepts, both run from the same venv."""
    env = _clean_env()
    server = harness.start(
        [], program=installed.command, cwd=installed.elsewhere, env=env, inherit_env=False
    )
    try:
        with grpc.insecure_channel(server.target) as channel:
            health = health_pb2_grpc.HealthStub(channel)
            for name in ("", reflect.RULES_SERVICE):
                reply = health.Check(health_pb2.HealthCheckRequest(service=name), timeout=5)
                assert reply.status == health_pb2.HealthCheckResponse.SERVING, name
            for protocol in ("v1", "v1alpha"):
                reflector = reflect.Reflector(channel, protocol)
                assert reflect.RULES_SERVICE in reflector.services()
                methods = reflect.method_names(reflector, reflect.RULES_SERVICE)
                assert sorted(methods) == sorted(reflect.RULE_RPCS)
                answers = reflect.every_rulesservice_call(reflector)
                assert set(answers) == set(reflect.RULE_RPCS)
        record = installed.root / "match.json"
        played = _run(
            [
                *installed.command,
                "play",
                "--bots",
                "strong",
                "greedy",
                "--target",
                server.target,
                "--record",
                str(record),
            ],
            installed.elsewhere,
            env,
        )
        assert "wins" in played.lower(), played[-2000:]
        verified = _run([*installed.command, "verify", str(record)], installed.elsewhere, env)
        assert verified.startswith("honest: "), verified
        assert "(match over)" in verified, verified
        served = {line["method"] for line in server.find("rpc", code="OK")}
        assert served == {f"{reflect.RULES_SERVICE}/{name}" for name in reflect.RULE_RPCS}
    finally:
        assert server.stop(30) == 0


def test_grpcios_private_surface_holds_on_the_installed_versions(installed: Installed) -> None:
    """service.grpc_surface.check() in the installed environment: every reliance on grpcio's
    private and experimental surface holds at both ends of the admitted range."""
    script = (
        "import grpc; from service import grpc_surface; grpc_surface.check(); "
        "print('checked', grpc.__version__)"
    )
    output = _run(
        [str(installed.venv / "bin" / "python"), "-c", script], installed.elsewhere, _clean_env()
    )
    _, pins = read_lock(REPO / "deploy" / installed.lock)
    assert f"checked {pins['grpcio'].version}" in output, output


@pytest.mark.timeout(STEP_SECONDS)
def test_the_installed_server_traces_over_mutual_tls(installed: Installed) -> None:
    """The optional parts run on the installed versions too: mutual TLS (cryptography reads and
    checks the files at start) and tracing (the OpenTelemetry SDK exports a span per call)."""
    (installed.root / "pki").mkdir(exist_ok=True)
    pki = make_pki(installed.root / "pki")
    with otlp.receiving() as receiver:
        env = {
            **_clean_env(),
            "BASRA_TLS_CERT": pki.server.cert_path,
            "BASRA_TLS_KEY": pki.server.key_path,
            "BASRA_TLS_CLIENT_CA": pki.ca.cert_path,
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
            "OTEL_BSP_SCHEDULE_DELAY": "100",
        }
        server = harness.start(
            ["--tracing", "--workers", "1"],
            program=installed.command,
            cwd=installed.elsewhere,
            env=env,
            inherit_env=False,
        )
        try:
            client = grpc.ssl_channel_credentials(pki.ca.cert, pki.client.key, pki.client.cert)
            with grpc.secure_channel(server.target, client) as channel:
                stub = rules_pb2_grpc.RulesServiceStub(channel)  # type: ignore[no-untyped-call]
                stub.NewMatch(pb.NewMatchRequest(seed=b"both ends"), timeout=10)
            anonymous = grpc.ssl_channel_credentials(pki.ca.cert)
            with grpc.secure_channel(server.target, anonymous) as channel:
                stub = rules_pb2_grpc.RulesServiceStub(channel)  # type: ignore[no-untyped-call]
                with pytest.raises(grpc.RpcError) as refused:
                    stub.NewMatch(pb.NewMatchRequest(seed=b"both ends"), timeout=10)
                assert refused.value.code() is grpc.StatusCode.UNAVAILABLE
            (span,) = receiver.wait_for(lambda s: s.name.endswith("/NewMatch"))
            assert span.resource.get("service.name") == "basra-rules", span.resource
        finally:
            assert server.stop(30) == 0

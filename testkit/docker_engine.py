"""A Docker engine of the test's own, and the Python base image made from Debian's packages.

Other checkouts may run their suites on the same machine at the same time, each with an engine
of its own, so nothing here is shared: dockerd gets its own socket, data root, exec root,
pidfile and (empty) configuration file, all in a temporary directory, and no bridge (the
shared docker0 and its iptables rules are never touched); builds and containers use the host's
network, on ports chosen free. No image registry is reachable here, so the base image is made
by deploy/python-base.sh (debootstrap) and imported; its tarball is cached in the checkout
(.cache/, git-ignored) and rebuilt when the script changes.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from testkit import commands
from testkit.deployment import REPO

BASE_SCRIPT = REPO / "deploy" / "python-base.sh"
BASE_LOCK = REPO / "deploy" / "python-base.lock"
CACHE_DIR = REPO / ".cache" / "python-base"
BASE_SUITE = "trixie"
BASE_TAG = f"basra-python-base:{BASE_SUITE}"
START_SECONDS = 60.0
BASE_SECONDS = 900.0
IN_CI = os.environ.get("CI") == "true"


def unavailable() -> str | None:
    """Why no engine can be started here, or None when one can."""
    if os.geteuid() != 0:
        return "dockerd and debootstrap need root"
    for tool in ("dockerd", "debootstrap"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (.ci/setup installs docker.io and debootstrap as root)"
    if client() is None:
        return "no docker client"
    return None


def client() -> str | None:
    """The docker client of the engine's own package (/usr/sbin/dockerd -> /usr/bin/docker).

    A newer client elsewhere on the PATH may lack BuildKit without its buildx plugin; the one
    shipped with the engine has both builders built in.
    """
    daemon = shutil.which("dockerd")
    if daemon is not None:
        beside = Path(daemon).resolve().parent.parent / "bin" / "docker"
        if beside.is_file():
            return str(beside)
    return shutil.which("docker")


def free_port() -> int:
    """A TCP port of the loopback that nothing listens on now (the container binds it next)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Engine:
    """A running dockerd of this test and the client that talks to it."""

    root: Path
    process: subprocess.Popen[bytes]
    docker: str

    @property
    def host(self) -> str:
        """The engine's address, for DOCKER_HOST or -H."""
        return f"unix://{self.root / 'docker.sock'}"

    def env(self, buildkit: bool = False) -> dict[str, str]:
        """The client's environment: this engine, and which builder `docker build` uses."""
        return {
            **os.environ,
            "DOCKER_HOST": self.host,
            "DOCKER_BUILDKIT": "1" if buildkit else "0",
            "DOCKER_CONFIG": str(self.root / "client"),
        }

    def run(
        self,
        *args: str,
        timeout: float = 120.0,
        check: bool = True,
        buildkit: bool = False,
        input_bytes: bytes | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run one docker command against this engine; its output as text."""
        return commands.run(
            [self.docker, *args],
            name=f"docker {' '.join(args)}",
            env=self.env(buildkit),
            stdin=input_bytes.decode() if input_bytes is not None else None,
            timeout=timeout,
            check=check,
        )

    def output(self, *args: str, timeout: float = 120.0) -> str:
        """The standard output of one docker command, stripped."""
        return self.run(*args, timeout=timeout).stdout.strip()

    def log(self) -> str:
        """What dockerd printed so far (for failure messages)."""
        return (self.root / "dockerd.log").read_text(errors="replace")[-4000:]


def _wait_ready(engine: Engine) -> None:
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if engine.process.poll() is not None:
            raise RuntimeError(f"dockerd exited {engine.process.returncode}: {engine.log()}")
        done = engine.run("version", "--format", "{{.Server.Version}}", check=False, timeout=10)
        if done.returncode == 0 and done.stdout.strip():
            return
        time.sleep(0.2)
    raise TimeoutError(f"dockerd did not answer within {START_SECONDS} s: {engine.log()}")


@contextmanager
def started() -> Iterator[Engine]:
    """Start a dockerd of our own; stop it and remove everything it made afterwards."""
    docker = client()
    assert docker is not None
    root = Path(tempfile.mkdtemp(prefix="basra-docker-"))
    (root / "daemon.json").write_text("{}")
    (root / "client").mkdir()
    log = (root / "dockerd.log").open("wb")
    process = subprocess.Popen(
        [
            "dockerd",
            "--host",
            f"unix://{root / 'docker.sock'}",
            "--data-root",
            str(root / "data"),
            "--exec-root",
            str(root / "exec"),
            "--pidfile",
            str(root / "dockerd.pid"),
            "--config-file",
            str(root / "daemon.json"),
            # No docker0 and no iptables rules: those are shared by every engine on the host.
            "--bridge=none",
            "--iptables=false",
            "--ip-forward=false",
            "--ip-masq=false",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    engine = Engine(root, process, docker)
    try:
        _wait_ready(engine)
        yield engine
    finally:
        _stop(engine)
        log.close()
        _unmount_below(root)
        shutil.rmtree(root, ignore_errors=True)


def _unmount_below(root: Path) -> None:
    """Unmount what dockerd left mounted in its directories (its default network namespace
    stays bound under the exec root after it stops), deepest first."""
    mounted = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
    below = [m for m in mounted if Path(m).is_relative_to(root)]
    for point in sorted(below, key=len, reverse=True):
        subprocess.run(["umount", "--lazy", point], check=False, capture_output=True)


def _stop(engine: Engine) -> None:
    if engine.process.poll() is None:
        containers = engine.run("ps", "-aq", check=False, timeout=30).stdout.split()
        if containers:
            engine.run("rm", "-f", *containers, check=False, timeout=60)
        engine.process.send_signal(signal.SIGTERM)
        try:
            engine.process.wait(60)
        except subprocess.TimeoutExpired:
            engine.process.kill()
            engine.process.wait(10)


def base_tarball() -> tuple[Path, bool]:
    """The cached base root filesystem, made first if missing; and whether it was made now."""
    digest = hashlib.sha256(BASE_SCRIPT.read_bytes() + BASE_LOCK.read_bytes()).hexdigest()[:12]
    tarball = CACHE_DIR / f"{BASE_SUITE}-{digest}.tar"
    if tarball.is_file():
        return tarball, False
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    for stale in CACHE_DIR.glob(f"{BASE_SUITE}-*.tar"):
        stale.unlink()
    done = subprocess.run(
        ["bash", str(BASE_SCRIPT), str(tarball), BASE_SUITE],
        env={**os.environ, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=BASE_SECONDS,
        check=False,
    )
    assert done.returncode == 0, f"deploy/python-base.sh failed:\n{done.stderr[-3000:]}"
    return tarball, True


def import_base(engine: Engine) -> str:
    """Import the base tarball into the engine; return its tag."""
    tarball, _ = base_tarball()
    engine.run("import", str(tarball), BASE_TAG, timeout=300)
    return BASE_TAG


def inspect(engine: Engine, container: str) -> dict[str, object]:
    """`docker inspect` of one container."""
    (found,) = json.loads(engine.output("inspect", container))
    assert isinstance(found, dict)
    return found


def run_flags(env: Mapping[str, str], extra: Sequence[str] = ()) -> list[str]:
    """`-e NAME=value` for each variable, then the extra flags."""
    return [*(f for name, value in env.items() for f in ("-e", f"{name}={value}")), *extra]

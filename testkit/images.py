"""The images a test cluster runs, built offline and saved as archives for containerd.

No registry is reachable here, so both come from a Docker engine of the test's own
(testkit/docker_engine.py): the project's image by the documented offline build (deploy/Dockerfile
on the Python base made from Debian's packages, with the HTTP/JSON gateway that
`bash deploy/gateway/build` makes on the host first, for the chart's http.enabled), and the pod
sandbox image, the `pause` binary of testkit/kube in a FROM scratch image. An archive is kept
in the checkout's .cache/ under the digest of what went into it, so a second run with the same
sources imports it again at once.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from testkit import commands, docker_engine
from testkit.cluster import PAUSE, PAUSE_IMAGE
from testkit.deployment import DOCKERFILE, REPO, context_files

IMAGE = "basra-rules:0.1.0"
# The same build under a second tag: "a new release" for the upgrade procedure's rollout.
NEXT_IMAGE = "basra-rules:0.1.1"
TAGS = (IMAGE, NEXT_IMAGE)
CACHE = REPO / ".cache" / "cluster-images"
BUILD_SECONDS = 900.0
GATEWAY_BUILD = REPO / "deploy" / "gateway" / "build"
# Where the image carries the gateway (the chart's gateway container runs it).
GATEWAY = "/opt/basra-gateway/basra-gateway"


def build_gateway() -> None:
    """`bash deploy/gateway/build` (Go on the host; seconds with Go's build cache): the image
    carries the gateway only when its binary is in the context before `docker build`."""
    commands.run(["bash", str(GATEWAY_BUILD)], name="bash deploy/gateway/build", timeout=600)


def check_gateway(engine: docker_engine.Engine, image: str) -> None:
    """The image's gateway starts (its -h exits 0): a build without it fails here, not in a
    pod that cannot start its second container."""
    engine.run("run", "--rm", "--network", "none", "--entrypoint", GATEWAY, image, "-h")


def _digest(paths: Sequence[Path], extra: str = "") -> str:
    digest = hashlib.sha256(extra.encode())
    for path in paths:
        digest.update(str(path).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def _cached(name: str, digest: str) -> Path:
    return CACHE / f"{name}-{digest}.tar"


def archives(tags: Sequence[str] = (IMAGE,)) -> list[Path]:
    """The project's image (under each of `tags`), with the gateway, and the pause image, as
    archives."""
    build_gateway()
    base_script = REPO / "deploy" / "python-base.sh"
    project = _cached(
        "basra-rules",
        _digest(
            # The Dockerfile too: it is no file of the context it builds.
            [
                base_script,
                docker_engine.BASE_LOCK,
                DOCKERFILE,
                *(REPO / f for f in context_files()),
            ],
            extra=" ".join(tags),
        ),
    )
    pause = _cached("pause", _digest([PAUSE], extra=PAUSE_IMAGE))
    if project.is_file() and pause.is_file():
        return [project, pause]
    CACHE.mkdir(parents=True, exist_ok=True)
    for stale in CACHE.glob("*.tar"):
        stale.unlink()
    with docker_engine.started() as engine, tempfile.TemporaryDirectory() as work:
        base = docker_engine.import_base(engine)
        engine.run(
            "build",
            "-f",
            "deploy/Dockerfile",
            "--build-arg",
            f"PYTHON_IMAGE={base}",
            "-t",
            tags[0],
            "--network",
            "host",
            str(REPO),
            timeout=BUILD_SECONDS,
        )
        check_gateway(engine, tags[0])
        for tag in tags[1:]:
            engine.run("tag", tags[0], tag)
        context = Path(work) / "pause"
        context.mkdir()
        shutil.copy2(PAUSE, context / "pause")
        (context / "Dockerfile").write_text(
            'FROM scratch\nCOPY pause /pause\nENTRYPOINT ["/pause"]\n'
        )
        engine.run("build", "-t", PAUSE_IMAGE, str(context), timeout=120)
        for archive, names in ((project, tags), (pause, (PAUSE_IMAGE,))):
            partial = archive.with_suffix(".partial")
            engine.run("save", "-o", str(partial), *names, timeout=300)
            partial.rename(archive)
    return [project, pause]

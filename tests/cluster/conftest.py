"""The test cluster and the chart installed on it, once for the whole session.

The cluster (testkit/cluster.py) needs root, Debian's containerd, runc, etcd and CNI plugins,
and the tools .ci/cluster-tools builds; the images come from a Docker engine of the test's own.
With CI=true nothing here may skip; elsewhere a machine that cannot run it skips with one line
saying why.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit import cluster as kube
from testkit import docker_engine, images
from testkit.chart_on_cluster import Release, install, uninstall_all

IN_CI = os.environ.get("CI") == "true"


def _unavailable() -> str | None:
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # Each xdist worker would start a cluster of its own on the same 2 cores, and the
        # modules share one cluster in name order: the test command runs them without -n.
        return "tests/cluster runs in one process: pytest -p no:xdist tests/cluster"
    return kube.unavailable() or docker_engine.unavailable()


@pytest.fixture(scope="session")
def archives() -> list[Path]:
    """The project's images and the pause image, as archives for the cluster's containerd;
    skipped (with CI=true, failed) where no cluster can start."""
    why = _unavailable()
    if why is not None:
        if IN_CI:
            pytest.fail(f"the test cluster cannot start here: {why}")
        pytest.skip(f"no test cluster: {why}")
    return images.archives(images.TAGS)


@pytest.fixture(scope="session")
def cluster(archives: list[Path]) -> Iterator[kube.Cluster]:
    """A running cluster of testkit.cluster.NODES nodes with the project's images imported
    into each."""
    with kube.started(archives) as running:
        yield running


@pytest.fixture(scope="session")
def release(cluster: kube.Cluster) -> Release:
    """The chart installed as users install it: its own values, only the image's reference
    and pull policy set (the image is imported, never pulled)."""
    return install(cluster, "basra-rules", namespace="games")


# Half the chart's 1 CPU a pod: a rollout's surge pod, a second release beside the first and
# the autoscaler's maxReplicas all find room on the nodes' allocatable CPU
# (testkit.cluster.NODE_CPUS each, 2 on any machine), with the release's pods spread.
SMALL = ("--set", "resources.requests.cpu=500m")


@pytest.fixture(scope="module")
def small_release(cluster: kube.Cluster) -> Iterator[Release]:
    """The chart asking half a CPU a pod, alone on the cluster (every other release is
    uninstalled first); uninstalled after the module."""
    uninstall_all(cluster)
    # Named as the chart (in a namespace of its own), so that its objects carry the release's
    # name, which Release's helpers (get, target, ...) expect: "basra-small" would make them
    # "basra-small-basra-rules".
    yield install(cluster, "basra-rules", namespace="small", values=SMALL)
    uninstall_all(cluster)

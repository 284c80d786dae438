"""Where the chart's pods land on a cluster of several nodes, each in a zone of its own: the
chart's default soft topology spread (helm/basra-rules/templates/deployment.yaml: maxSkew 1
over kubernetes.io/hostname and over topology.kubernetes.io/zone, ScheduleAnyway) spreads
them after install and after scaling.

The release is the module's own, alone on the cluster, with the autoscaler off so that the
count is the test's: replicaCount set at install and by `helm upgrade`, each pod asking
SPREAD_CPU so that every count here fits on any one node (nothing but the spread keeps the
pods apart). The skew is counted over every node and zone of the cluster, those with no pod
included, as the scheduler counts it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest

from testkit import cluster as kube
from testkit.chart_on_cluster import Release, install, uninstall_all

pytestmark = pytest.mark.timeout(300)

SPREAD_CPU = "100m"
INSTALLED = 3
SCALED = (5, 8)
HOSTNAME = "kubernetes.io/hostname"


@pytest.fixture(scope="module")
def spread_release(cluster: kube.Cluster) -> Iterator[Release]:
    """The chart with INSTALLED pods and no autoscaler, alone on the cluster; uninstalled
    after the module."""
    uninstall_all(cluster)
    yield install(
        cluster,
        "basra-rules",
        namespace="spread",
        values=(
            "--set",
            "autoscaling.enabled=false",
            "--set",
            f"replicaCount={INSTALLED}",
            "--set",
            f"resources.requests.cpu={SPREAD_CPU}",
        ),
    )
    uninstall_all(cluster)


def placement(release: Release) -> tuple[Counter[str], Counter[str]]:
    """The release's Ready pods counted by node and by zone, every node and zone of the
    cluster listed (0 where none runs)."""
    nodes = release.cluster.get("nodes")["items"]
    zone_of = {n["metadata"]["name"]: n["metadata"]["labels"][kube.ZONE_LABEL] for n in nodes}
    by_node = Counter(dict.fromkeys(zone_of, 0))
    by_zone = Counter(dict.fromkeys(zone_of.values(), 0))
    for pod in release.ready_pods():
        node = pod["spec"]["nodeName"]
        by_node[node] += 1
        by_zone[zone_of[node]] += 1
    return by_node, by_zone


def skew(counts: Counter[str]) -> int:
    """The most minus the fewest pods over the domains."""
    return max(counts.values()) - min(counts.values())


def test_the_nodes_carry_their_zones(spread_release: Release) -> None:
    """Every node of the cluster is Ready with a zone label of its own, and the pods carry
    the chart's two soft constraints."""
    nodes = spread_release.cluster.get("nodes")["items"]
    assert len(nodes) == kube.NODES
    zones = {n["metadata"]["labels"][kube.ZONE_LABEL] for n in nodes}
    assert len(zones) == kube.NODES, zones
    pod = spread_release.wait_ready(INSTALLED)[0]
    constraints = pod["spec"]["topologySpreadConstraints"]
    assert {(c["topologyKey"], c["maxSkew"], c["whenUnsatisfiable"]) for c in constraints} == {
        (HOSTNAME, 1, "ScheduleAnyway"),
        (kube.ZONE_LABEL, 1, "ScheduleAnyway"),
    }


def test_after_install_the_pods_are_spread_over_nodes_and_zones(
    spread_release: Release,
) -> None:
    """`helm install --wait` of INSTALLED pods on as many nodes: one pod a node and a zone."""
    spread_release.wait_ready(INSTALLED)
    by_node, by_zone = placement(spread_release)
    print(f"\ninstalled {INSTALLED}: by node {dict(by_node)}, by zone {dict(by_zone)}")
    assert sum(by_node.values()) == INSTALLED
    assert skew(by_node) <= 1 and skew(by_zone) <= 1, (by_node, by_zone)
    assert min(by_node.values()) >= 1, by_node


@pytest.mark.parametrize("count", SCALED)
def test_after_scaling_the_pods_stay_spread(spread_release: Release, count: int) -> None:
    """`helm upgrade --set replicaCount=N` scales the Deployment up: the new pods land where
    the fewest are, so that no node and no zone has more than one pod more than another."""
    spread_release.upgrade("--set", f"replicaCount={count}")
    spread_release.wait_ready(count)
    by_node, by_zone = placement(spread_release)
    print(f"\nscaled to {count}: by node {dict(by_node)}, by zone {dict(by_zone)}")
    assert sum(by_node.values()) == count
    assert skew(by_node) <= 1 and skew(by_zone) <= 1, (by_node, by_zone)

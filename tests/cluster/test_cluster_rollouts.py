"""Rollouts of the chart on a real cluster with matches in flight: `helm upgrade`, each
documented change to a running deployment, `kubectl delete pod`, and a pod that never turns
Ready.

The release is the module's `small_release` (conftest.py): the chart with
`resources.requests.cpu=500m`, alone on the cluster. The modules of this folder run in name
order on one cluster; the tests of this one build on each other in the order written (each
procedure starts from the configuration the one before left, as on a real deployment).

Lobbies (testkit/lobbies.py) play 16 matches at once through the Service's ClusterIP, over
four lobby replicas with the published service config loaded whole (round_robin, health
check, retries of UNAVAILABLE, CANCELLED and RESOURCE_EXHAUSTED, throttle): every answer is
checked (testkit/matchplay.py), and no call may fail. Beside them, in the rollout and the pod
delete, plain grpcio lobbies without the service config play 8 more matches: what they see is
measured, not asserted (the figures are printed at the end of the module, `-s`).

Each procedure of the chart README's "Changing a running deployment" is walked through step
by step as written: one `helm upgrade --reuse-values --wait` a step, then `kubectl rollout
status`, then until the old pods are gone. Where a step begins "Once no match holds ...", the
test waits until every match has made a move since the last rollout's old pods were gone
(the last old pod still serves its open connections during its preStop pause, after `rollout
status` has returned), and checks that no match holds such a state. What helm cannot do here:
- renew-tls-certificate is a Secret replaced and `kubectl rollout restart`, as written (not a
  helm step: the chart reads the Secret it is named);
- switch-tls is done as written (a second release, the lobby replicas moved one by one, the
  old release uninstalled), TLS on only; mutual TLS and TLS off, a certificate of another CA,
  the tracing, limits and connection-age variants of change-a-setting, and an upgrade from
  the last release's own code are tests/rollout's (testkit/rollout.py): here the "new
  release" is the same image under a second tag (testkit.images.NEXT_IMAGE).
"""

from __future__ import annotations

import base64
import json
import random
import socket
import ssl
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from basra.v1 import rules_pb2 as pb
from basra.v1 import rules_pb2_grpc

from service.metrics import FLUSH_SECONDS
from testkit import images
from testkit.chart_on_cluster import (
    RULES_SERVICE,
    CallsSeen,
    Release,
    install,
    ready,
    rollout_status,
    wait_drained,
)
from testkit.cluster import NODE_CPUS
from testkit.lobbies import Lobbies, replica
from testkit.matchplay import failures_by_kind
from testkit.pki import issue, make_pki
from testkit.procedures import STEP, blocks

pytestmark = pytest.mark.timeout(300)

REPLICAS = 4
MATCHES = 16
PLAIN_REPLICAS = 2
PLAIN_MATCHES = 8
# The least pace of the configured lobbies' calls through a rollout, calls a second: 16
# matches pausing 50 ms between calls make about 250 (docs/capacity.md); a fifth of that.
MIN_PACE = 50
# The most the 99th percentile of their calls may take through a rollout: far below the
# calls' 10 s deadline, so a stall fails the test; 65-600 ms measured on the shared 2-core
# machine under other work (docs/capacity.md), the most in the TLS renewal's handshakes.
P99_SECONDS = 2.0
KEYS = {kid: base64.b64encode(random.Random(kid).randbytes(32)).decode() for kid in ("k1", "k2")}


@pytest.fixture(scope="module")
def figures() -> Iterator[list[str]]:
    """Lines of measured figures, printed once the module is done."""
    found: list[str] = []
    yield found
    print("\n--- rollout figures (tests/cluster/test_cluster_rollouts.py)")
    print("\n".join(found))


def lobbies(release: Release, seed: str, *, plain: bool = False) -> Lobbies:
    """Lobbies on the release's Service: four replicas with the published service config and
    16 matches, or (`plain`) two plain grpcio replicas and 8 matches."""
    count = PLAIN_REPLICAS if plain else REPLICAS
    replicas = [
        replica(release.name, release.target(), service_config=not plain) for _ in range(count)
    ]
    return Lobbies(replicas, matches=PLAIN_MATCHES if plain else MATCHES, seed=seed)


def assert_clean(played: Lobbies) -> None:
    """No call failed or was answered wrong, and the matches went on."""
    tally = played.tally
    assert tally.failures == [], (failures_by_kind(tally.failures), tally.failures[:3])
    assert tally.calls["Apply"] > 0 and tally.matches >= MATCHES


def failed(played: Lobbies) -> str:
    """What a lobby's calls ended with, for the figures."""
    kinds = failures_by_kind(played.tally.failures)
    return ", ".join(f"{code} {n}" for (code, _), n in sorted(kinds.items())) or "none"


@dataclass(frozen=True)
class Flowed:
    """The calls the configured lobbies made while something happened to the pods."""

    seconds: float
    calls: int
    p99: float
    """Seconds, of the calls that ended meanwhile."""
    slowest: float


def flowed(played: Lobbies, began: float, before: int) -> Flowed:
    """What the lobbies' calls did from `began` (when `before` calls were made) to now; that
    they flowed is asserted: at least MIN_PACE calls a second, a p99 of at most P99_SECONDS
    (a stall that each call waits out within its deadline passes no "0 failed" here)."""
    now = time.monotonic()
    calls = played.tally.total() - before
    took = sorted(played.tally.ended_between(began, now))
    seen = Flowed(
        now - began,
        calls,
        took[int(0.99 * (len(took) - 1))] if took else 0.0,
        took[-1] if took else 0.0,
    )
    assert seen.calls >= MIN_PACE * seen.seconds, seen
    assert seen.p99 <= P99_SECONDS, seen
    return seen


def said(seen: Flowed) -> str:
    """A rollout's figures, for the module's printout."""
    return (
        f"{seen.seconds:.1f} s/{seen.calls} calls ({seen.calls / seen.seconds:.0f}/s, p99 "
        f"{1000 * seen.p99:.0f} ms, slowest {1000 * seen.slowest:.0f} ms)"
    )


@dataclass(frozen=True)
class Rolled:
    """One rollout as the lobbies lived it."""

    flowed: Flowed
    """From `helm upgrade` to `kubectl rollout status` done."""
    drained: float
    """When the old pods were gone (time.monotonic())."""


def roll(release: Release, played: Lobbies, *flags: str) -> Rolled:
    """One step: `helm upgrade --reuse-values --wait` with `flags`, `kubectl rollout status`,
    then until the old pods are gone; the calls flowed meanwhile."""
    before = played.tally.total()
    began = time.monotonic()
    release.upgrade(*flags)
    rollout_status(release)
    seen = flowed(played, began, before)
    wait_drained(release)
    return Rolled(seen, time.monotonic())


def spread(seen: CallsSeen) -> str:
    """Calls per pod, as the pods' own counters last read."""
    return ", ".join(f"{name[-5:]} {int(n)}" for name, n in sorted(seen.seen.items()) if n)


def old_and_new(seen: CallsSeen, since: dict[str, float]) -> str:
    """Calls per pod since the reading `since`: the pods read then (the old ones), and the
    others (the new ones)."""
    grown = {name: int(n - since.get(name, 0.0)) for name, n in seen.seen.items()}
    old = sorted(n for name, n in grown.items() if name in since)
    new = sorted(n for name, n in grown.items() if name not in since)
    return f"old pods {old}, new pods {new}"


def test_the_smallest_override_has_room_for_a_rollout(small_release: Release) -> None:
    """On nodes of NODE_CPUS allocatable CPUs each whatever the machine, with
    requests.cpu=500m, `helm upgrade --wait` of a pod-template change replaces both pods: the
    surge pod is scheduled (the Deployment may not go below its count, so nothing else lets
    the rollout finish) and no pod waited for room."""
    release = small_release
    nodes = release.cluster.get("nodes")["items"]
    assert len(nodes) == len(release.cluster.nodes)
    for node in nodes:
        allocatable = node["status"]["allocatable"]["cpu"]
        assert allocatable in (str(NODE_CPUS), f"{NODE_CPUS * 1000}m"), allocatable
    strategy = release.get("deployment", release.name)["spec"]["strategy"]["rollingUpdate"]
    assert strategy["maxUnavailable"] == 0
    before = {p["metadata"]["name"] for p in release.wait_ready(2)}
    release.upgrade("--set", "podAnnotations.rolled=first")
    rollout_status(release)
    after = release.wait_ready(2)
    assert not before & {p["metadata"]["name"] for p in after}
    (template,) = {p["metadata"]["labels"]["pod-template-hash"] for p in after}
    events = release.get("events")["items"]
    assert any(
        e["reason"] == "ScalingReplicaSet"
        and f"{release.name}-{template} from 0 to 1" in e["message"]
        for e in events
    ), [e["message"] for e in events if e["reason"] == "ScalingReplicaSet"]
    unscheduled = [e["message"] for e in events if e["reason"] == "FailedScheduling"]
    assert unscheduled == []


def test_a_rolling_update_drops_no_call_of_matches_in_flight(
    small_release: Release, figures: list[str]
) -> None:
    """`helm upgrade` changes the pod template while 16 matches play through the Service with
    the published service config: no call fails, every answer is right, and the matches go on
    (some finish) on the new pods. Plain grpcio lobbies beside them are measured."""
    release = small_release
    with (
        CallsSeen(release) as seen,
        lobbies(release, "rolling") as played,
        lobbies(release, "rolling-plain", plain=True) as plain,
    ):
        finished = played.tally.finished
        seen.read()
        at_start = dict(seen.seen)
        rolled = roll(release, played, "--set", "podAnnotations.rolled=second")
        time.sleep(2 * FLUSH_SECONDS)  # the calls until the old pods were gone are counted
        seen.read()
        during = old_and_new(seen, at_start)
        played.wait_for_every_match_to_move(rolled.drained)
        played.matches.wait("a match finished", lambda: played.tally.finished > finished, 120)
    assert_clean(played)
    figures.append(
        f"rolling update (pod template): {said(rolled.flowed)}, "
        f"{len(played.tally.failures)} failed with the service config "
        f"({played.tally.total()} calls in all); plain grpcio: {failed(plain)} "
        f"of {plain.tally.total()} calls; calls by pod from helm upgrade until 2 s after the "
        f"old pods were gone (their counters' last reading, both lobbies' calls): {during}"
    )


@dataclass(frozen=True)
class Step:
    """One numbered step of a procedure: the values set, and what a "Once" waits for."""

    flags: tuple[str, ...]
    once_none_hold: str | None = None
    """The signing key ("" unsigned) no match may hold before the step (a step "Once")."""


def signing_keys(*kids: str) -> tuple[str, ...]:
    """`signing.keys`, the first key signing, as one --set-json (the list replaced whole)."""
    keys = [{"id": kid, "key": KEYS[kid]} for kid in kids]
    return ("--set-json", f"signing.keys={json.dumps(keys)}")


def sets(**values: str) -> tuple[str, ...]:
    """--set flags, dots in the names written as __."""
    return tuple(f for k, v in values.items() for f in ("--set", f"{k.replace('__', '.')}={v}"))


PROCEDURES: dict[str, tuple[tuple[Step, ...], set[str] | None]] = {
    "turn-signing-on": (
        (
            Step(
                sets(signing__enabled="true", signing__acceptUnsigned="true") + signing_keys("k1")
            ),
            Step(sets(signing__acceptUnsigned="false"), once_none_hold=""),
        ),
        {"k1"},
    ),
    "rotate-signing-key": (
        (
            Step(signing_keys("k1", "k2")),
            Step(signing_keys("k2", "k1")),
            Step(signing_keys("k2"), once_none_hold="k1"),
        ),
        {"k2"},
    ),
    "turn-signing-off": (
        (
            Step(sets(signing__acceptUnsigned="true")),
            Step(sets(signing__enabled="false", signing__acceptUnsigned="false")),
        ),
        {""},
    ),
    "change-a-setting": (
        (Step(sets(server__workers="1", resources__limits__cpu="1")),),
        None,
    ),
    "upgrade-release": (
        (Step(sets(image__tag=images.NEXT_IMAGE.partition(":")[2])),),
        None,
    ),
}
"""The procedures helm can do, in the order run: the steps, and the keys that sign the
states the matches hold at the end (None: whatever they were)."""


def test_the_procedures_are_the_documented_steps() -> None:
    """Each procedure here has the README's numbered steps, with a wait exactly where a step
    begins "Once"."""
    documented = blocks("helm/basra-rules/README.md")
    for name, (steps, _) in PROCEDURES.items():
        written = STEP.findall(documented[name])
        assert [first == "Once" for _, first in written] == [
            s.once_none_hold is not None for s in steps
        ], name


@pytest.mark.parametrize("name", list(PROCEDURES))
def test_each_documented_procedure_with_matches_in_flight(
    name: str, small_release: Release, figures: list[str]
) -> None:
    """Step by step as written, with 16 matches in flight: no call fails, every answer is
    right; a "Once" step waits until every match has moved since the last rollout ended."""
    release = small_release
    steps, final_keys = PROCEDURES[name]
    times = []
    with lobbies(release, name) as played:
        drained = time.monotonic()
        for step in steps:
            if step.once_none_hold is not None:
                played.wait_for_every_match_to_move(drained)
                assert step.once_none_hold not in played.keys_held()
            rolled = roll(release, played, *step.flags)
            drained = rolled.drained
            times.append(said(rolled.flowed))
        played.wait_for_every_match_to_move(drained)
        if final_keys is not None:
            assert played.keys_held() == final_keys
    assert_clean(played)
    figures.append(f"{name}: {len(steps)} rollouts ({', '.join(times)}), 0 failed")
    if name == "upgrade-release":
        tags = {p["spec"]["containers"][0]["image"] for p in release.pods()}
        assert tags == {images.NEXT_IMAGE}
    if name == "change-a-setting":
        for pod in release.pods():
            served = [json.loads(line) for line in release.logs(pod)]
            (serving,) = [line for line in served if line.get("event") == "serving"]
            assert len(serving["pids"]) == 1


def test_a_deleted_pod_costs_no_call_of_matches_in_flight(
    small_release: Release, figures: list[str]
) -> None:
    """`kubectl delete pod` under load: the matches go on, no call fails with the service
    config (its retries cover what the callers see); plain grpcio lobbies are measured."""
    release = small_release
    with (
        CallsSeen(release) as seen,
        lobbies(release, "delete") as played,
        lobbies(release, "delete-plain", plain=True) as plain,
    ):
        victim = release.wait_ready(2)[0]["metadata"]["name"]
        before = played.tally.total()
        began = time.monotonic()
        release.kubectl("delete", "pod", victim, "--timeout=90s", timeout=120)
        gone = time.monotonic() - began
        release.wait_ready(2, seconds=90)
        meanwhile = flowed(played, began, before)
        played.wait_for_every_match_to_move(time.monotonic())
    assert_clean(played)
    figures.append(
        f"kubectl delete pod: gone in {gone:.1f} s, 2 Ready again: {said(meanwhile)}, "
        f"0 failed with the service config; plain grpcio: "
        f"{failed(plain)} of {plain.tally.total()} calls; calls per pod {spread(seen)}"
    )


def _probed_unready(release: Release, seconds: float = 90.0) -> dict[str, Any]:
    """The release's one pod, once its container runs and the kubelet has reported a failed
    readiness probe for it."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for pod in release.pods():
            failed = [
                e["message"]
                for e in release.events(pod["metadata"]["name"])
                if e["reason"] == "Unhealthy" and "Readiness probe failed" in e["message"]
            ]
            if failed and pod["status"]["containerStatuses"][0].get("started"):
                return pod
        time.sleep(1)
    raise TimeoutError(f"no failed readiness probe of {release.name} within {seconds} s")


def _reachable(target: str, seconds: float = 30.0) -> None:
    """Wait until a call through `target` is answered."""
    deadline = time.monotonic() + seconds
    with grpc.insecure_channel(target) as channel:
        stub = rules_pb2_grpc.RulesServiceStub(channel)  # type: ignore[no-untyped-call]
        while True:
            try:
                stub.NewMatch(pb.NewMatchRequest(), timeout=5)
                return
            except grpc.RpcError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)


def _settled(done: Callable[[], bool], seconds: float = 10.0) -> None:
    """Poll `done()` for at most `seconds` (the caller asserts after)."""
    deadline = time.monotonic() + seconds
    while not done() and time.monotonic() < deadline:
        time.sleep(0.5)


def test_a_pod_whose_readiness_fails_gets_no_traffic(small_release: Release) -> None:
    """A second release whose readiness probe asks for a service the health server does not
    know: its pod runs but is never Ready. A Service selecting both releases' pods (by the
    chart's name label) lists only the good pods as ready, and every call through it lands
    on them; the unready pod, which answers when called directly, handled none."""
    release = small_release
    bad = install(
        release.cluster,
        "basra-rules-unready",
        release.namespace,
        values=(
            "--set",
            "resources.requests.cpu=100m",
            "--set",
            "autoscaling.enabled=false",
            "--set",
            "replicaCount=1",
            "--set",
            "probes.readiness.service=basra.v1.NoSuchService",
        ),
        wait=False,
    )
    shared = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "basra-shared", "namespace": release.namespace},
        "spec": {
            "selector": {"app.kubernetes.io/name": "basra-rules"},
            "ports": [{"name": "grpc", "port": 50051, "targetPort": 50051}],
        },
    }
    try:
        pod = _probed_unready(bad)
        release.kubectl("apply", "-f", "-", stdin=json.dumps(shared))
        good = release.wait_ready(2)
        good_ips = sorted(p["status"]["podIP"] for p in good)
        deadline = time.monotonic() + 60
        while release.endpoints("basra-shared") != good_ips:
            assert time.monotonic() < deadline, release.endpoints("basra-shared")
            time.sleep(0.5)
        assert not ready(pod) and not any(ready(p) for p in bad.pods())
        slices = release.get("endpointslices", "-l", "kubernetes.io/service-name=basra-shared")
        listed = {
            a: e["conditions"].get("ready")
            for s in slices["items"]
            for e in s.get("endpoints") or []
            for a in e["addresses"]
        }
        assert listed[pod["status"]["podIP"]] is False, listed
        target = f"{release.service_ip('basra-shared')}:50051"
        _reachable(target)  # kube-proxy has programmed the new Service
        time.sleep(2 * FLUSH_SECONDS)  # and that call is in the counters
        before = {p["metadata"]["name"]: sum(release.worker_calls(p).values()) for p in good}
        made = 0
        for index in range(8):
            channel = replica("shared", target, service_config=index % 2 == 0)
            for _ in range(25):
                channel.stub.NewMatch(pb.NewMatchRequest(), timeout=10)
                made += 1
            channel.channel.close()
        landed = {
            p["metadata"]["name"]: sum(
                f'"method":"{RULES_SERVICE}/NewMatch"' in line for line in release.logs(p)
            )
            for p in [*good, pod]
        }

        def handled() -> float:
            return sum(sum(release.worker_calls(p).values()) for p in good)

        _settled(lambda: handled() - sum(before.values()) == made)
        assert handled() - sum(before.values()) == made, (before, landed)
        assert sum(bad.worker_calls(pod).values()) == 0, landed
        with grpc.insecure_channel(f"{pod['status']['podIP']}:50051") as direct:
            stub = rules_pb2_grpc.RulesServiceStub(direct)  # type: ignore[no-untyped-call]
            stub.NewMatch(pb.NewMatchRequest(), timeout=10)
        _settled(lambda: sum(bad.worker_calls(pod).values()) == 1)
        assert sum(bad.worker_calls(pod).values()) == 1
    finally:
        release.kubectl("delete", "service", "basra-shared", "--ignore-not-found", check=False)
        release.cluster.helm("uninstall", bad.name, "--namespace", bad.namespace, "--wait")
        deadline = time.monotonic() + 90  # its CPU free again for the tests after
        while bad.get("pods", "-l", bad.selector)["items"] and time.monotonic() < deadline:
            time.sleep(0.5)


def _secret(release: Release, name: str, cert: str, key: str) -> None:
    """Create or replace a kubernetes.io/tls Secret."""
    made = release.kubectl(
        "create",
        "secret",
        "tls",
        name,
        f"--cert={cert}",
        f"--key={key}",
        "--dry-run=client",
        "-o",
        "json",
    ).stdout
    release.kubectl("apply", "-f", "-", stdin=made)


def _served_certificate(address: str) -> bytes:
    """The certificate a pod's gRPC port presents, DER."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols(["h2"])
    with (
        socket.create_connection((address, 50051), timeout=10) as raw,
        context.wrap_socket(raw) as wrapped,
    ):
        der = wrapped.getpeercert(binary_form=True)
    assert der is not None
    return der


def test_switch_tls_on_then_renew_the_certificate_with_matches_in_flight(
    small_release: Release, tmp_path: Path, figures: list[str]
) -> None:
    """switch-tls as written: a TLS release installed beside the plaintext one with the same
    values, the lobby replicas moved to it one by one (meanwhile each release takes the
    other's states), the old release uninstalled once no call reaches it; then
    renew-tls-certificate: the Secret replaced and the Deployment restarted. No call fails.
    Clients check the certificate for the name it carries (localhost), since it cannot know
    the ClusterIP."""
    old = small_release
    pki = make_pki(tmp_path)
    renewed = issue(tmp_path, "renewed", pki.ca, "server")
    _secret(old, "basra-tls", pki.server.cert_path, pki.server.key_path)
    values = tmp_path / "values.json"
    values.write_text(
        old.cluster.helm("get", "values", old.name, "-n", old.namespace, "-o", "json").stdout
    )
    trust = grpc.ssl_channel_credentials(pki.ca.cert)
    with CallsSeen(old) as seen, lobbies(old, "switch-tls") as played:
        began = time.monotonic()
        new = install(
            old.cluster,
            "basra-rules-tls",
            old.namespace,
            values=("-f", str(values), *sets(tls__enabled="true", tls__secretName="basra-tls")),
        )
        installed = time.monotonic() - began
        target = new.target()
        played.move(
            [
                replica("tls", target, credentials=trust, server_name="localhost")
                for _ in range(REPLICAS)
            ]
        )
        played.wait_for_every_match_to_move(time.monotonic())
        with played.tally.lock:
            crossed = dict(played.tally.crossings)
        assert crossed.get((old.name, "tls"), 0) > 0 and crossed.get(("tls", old.name), 0) > 0, (
            crossed
        )
        time.sleep(2 * FLUSH_SECONDS)  # the calls before the move are in the counters
        seen.read()
        last = dict(seen.seen)
        time.sleep(3)
        seen.read()
        assert seen.seen == last, "calls still reach the old release"
        old.cluster.helm("uninstall", old.name, "--namespace", old.namespace, "--wait")
        switched = time.monotonic() - began
        _secret(new, "basra-tls", renewed.cert_path, renewed.key_path)
        before = played.tally.total()
        restarted = time.monotonic()
        new.kubectl("rollout", "restart", f"deployment/{new.name}")
        rollout_status(new)
        renewal = flowed(played, restarted, before)
        wait_drained(new)
        played.wait_for_every_match_to_move(time.monotonic())
    assert_clean(played)
    wanted = ssl.PEM_cert_to_DER_cert(renewed.cert.decode())
    for pod in new.wait_ready(2):
        assert _served_certificate(pod["status"]["podIP"]) == wanted
    figures.append(
        f"switch-tls (on): TLS release Ready {installed:.1f} s after install, old release "
        f"uninstalled after {switched:.1f} s; renew-tls-certificate: restart {said(renewal)}; "
        f"{played.tally.total()} calls, 0 failed"
    )

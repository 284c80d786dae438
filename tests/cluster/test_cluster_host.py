"""A test cluster (of testkit.cluster.NODES nodes) leaves the host as it found it: the kernel's
settings untouched while it runs and after, and a cluster whose owner was killed stopped by the
next cluster on its slot, every node's components, namespaces and links.

Each test starts a cluster of its own beside the session's (another slot), with only the pause
image: what is checked is the cluster's machinery (testkit/cluster.py), not the chart.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from testkit import cluster as kube
from testkit.deployment import REPO

pytestmark = pytest.mark.timeout(300)

# Entries that count something, or that the kernel adjusts by itself, whoever runs.
COUNTERS = (
    "fs.aio-nr",
    "fs.dentry-state",
    "fs.file-nr",
    "fs.inode-nr",
    "fs.inode-state",
    "fs.quota.",
    "kernel.hung_task_detect_count",
    "kernel.ns_last_pid",
    "kernel.oops_count",
    "kernel.perf_event_max_sample_rate",
    "kernel.pty.nr",
    "kernel.random.",
    "kernel.warn_count",
    "net.netfilter.nf_conntrack_count",
)
# What a killed owner's cluster leaves running: components, a shim and a pod's containers.
LEFT = ("kube kubelet", "containerd --config", "kube kube-apiserver", "etcd", "shim", "/pause")
# What the kubelet writes when protectKernelDefaults is off: its values.
KUBELET_WANTS = {"vm.overcommit_memory": "1", "kernel.panic": "10", "kernel.panic_on_oops": "1"}


def _sysctls() -> dict[str, str]:
    """Every readable kernel setting as the test's process sees it (the host's), counters
    aside."""
    found = {}
    for path in Path("/proc/sys").rglob("*"):
        name = ".".join(path.relative_to("/proc/sys").parts)
        if name.startswith(COUNTERS):
            continue
        try:
            if path.is_file():
                found[name] = path.read_text()
        except OSError:
            continue
    return found


def _changed(before: dict[str, str], now: dict[str, str]) -> dict[str, tuple[str, str]]:
    """Settings present in both whose values differ."""
    return {k: (before[k], now[k]) for k in before.keys() & now.keys() if before[k] != now[k]}


def test_a_cluster_leaves_the_hosts_kernel_settings_as_it_found_them(
    archives: list[Path],
) -> None:
    """All of /proc/sys as the host sees it (its network namespace included) is the same
    while a cluster runs and after it is gone as before it started, the settings the kubelets
    write (vm.overcommit_memory, kernel.panic, kernel.panic_on_oops, ...) among them; each
    node's kubelet's writes landed in that node's own files instead."""
    first = _sysctls()
    time.sleep(1)
    before = _sysctls()
    moving = set(_changed(first, before))  # what changed on its own meanwhile
    with kube.started(archives[-1:]) as running:
        during = _sysctls()
        kept = {
            node.name: {
                name: (node.files / "sysctl" / name).read_text().strip()
                for name in kube.KUBELET_SYSCTLS
            }
            for node in running.nodes
        }
    after = _sysctls()
    assert len(kept) == kube.NODES
    for node, wrote in kept.items():
        assert wrote.items() >= KUBELET_WANTS.items(), (node, wrote)
    for name in KUBELET_WANTS:
        assert during[name] == before[name] and after[name] == before[name], name
    changed_during = {k: v for k, v in _changed(before, during).items() if k not in moving}
    changed_after = {k: v for k, v in _changed(before, after).items() if k not in moving}
    assert changed_during == {}, changed_during
    assert changed_after == {}, changed_after


def _owner_slot(owner: subprocess.Popen[str], seconds: float) -> int:
    """The slot a `python -m testkit.cluster` reports once its cluster is up."""
    found: list[int] = []
    printed: list[str] = []

    def read() -> None:
        assert owner.stdout is not None
        for line in owner.stdout:
            printed.append(line)
            if match := re.match(r"cluster slot (\d+) up", line):
                found.append(int(match.group(1)))
            if line.startswith("KUBECONFIG=") and found:
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(seconds)
    assert found and not reader.is_alive(), "".join(printed)
    return found[0]


def test_the_next_cluster_on_a_slot_stops_what_a_killed_owner_left_running(
    archives: list[Path],
) -> None:
    """A cluster whose owning process is SIGKILLed (no teardown) leaves every component, a
    pod's containers and their shims running; the next cluster started on that slot kills
    them all before it removes their files, and starts clean."""
    owner = subprocess.Popen(
        [sys.executable, "-m", "testkit.cluster", str(archives[-1])],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        slot = _owner_slot(owner, kube.START_SECONDS + 60)
        left = kube.Cluster(slot, Path(f"/var/tmp/basra-k8s-{slot}"))
        left.kubectl("run", "sleeper", f"--image={kube.PAUSE_IMAGE}", "--image-pull-policy=Never")
        left.kubectl("wait", "pod/sleeper", "--for=condition=Ready", "--timeout=90s", timeout=120)
        running = kube.leftovers(left)
        owner.send_signal(signal.SIGKILL)
        owner.wait(30)
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait(30)
    time.sleep(1)
    # The components outlive their owner (what the next cluster must deal with).
    commands = {pid: c for pid in running if (c := _command(pid))}
    for name in LEFT:
        assert any(name in c for c in commands.values()), (name, commands)
    kubelets = [c for c in commands.values() if "kube kubelet" in c]
    assert len(kubelets) == kube.NODES, kubelets
    with kube.started(archives[-1:], slot=slot) as again:
        survivors = {pid: c for pid in commands if (c := _command(pid)) == commands[pid]}
        assert survivors == {}
        assert again.get("pods", "--all-namespaces")["items"] == []
    assert not again.root.exists()
    for netns in [again.switch_netns, *(node.netns for node in again.nodes)]:
        assert not Path(f"/run/netns/{netns}").exists(), netns
    assert not Path(f"/sys/class/net/{again.host_link}").exists()


def _command(pid: int) -> str:
    """A process's command line ("" once it is gone or a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rpartition(")")[2].split()[0] == "Z":
            return ""
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""

"""A Kubernetes of the test's own, of NODES nodes on this one machine: started, used and always
removed, the host left as it was.

The components are the pinned build of .ci/cluster-tools (Kubernetes from the Go module proxy,
as one multi-call binary `kube`, and helm), with Debian's containerd, runc, CNI plugins and
etcd. Everything a cluster makes is its own, so that two checkouts' suites can run one each on
the same machine:

- a network namespace per node: each node's containerd, kubelet and kube-proxy run in it, so
  that the kubelet listens on the node's own address and kube-proxy's iptables chains are the
  node's alone; the control plane (etcd, the apiserver, the controller-manager and the
  scheduler) runs in node 0's, the apiserver on node 0's address;
- the nodes' links (each node's eth0) joined on one bridge in a namespace of its own (the
  switch), with the host on it too, so that nothing of the cluster passes the host's own
  bridge or forwarding rules; each node routes the other nodes' pod ranges to them, and the
  host routes each node's pod range to it and the Service range to node 0;
- addresses from the range reserved for testing (198.18.0.0/15), a slot of them per cluster,
  taken by an exclusive lock: a /26 of pods per node, a /24 of Services; pods get routes to
  the pods of every node and to the Services, and none off the machine;
- per node, a containerd with its own socket, root and state, a kubelet with its own root
  directory, pod-log directory and cgroup root, and the node's zone label
  (topology.kubernetes.io/zone=zone-I), all below one state directory per slot;
- per node, a mount namespace of the node's own, for containerd and the kubelet (and so every
  container and volume mount): the kubelet sets kernel settings it wants
  (vm.overcommit_memory, kernel.panic, kernel.panic_on_oops, ...: `protectKernelDefaults`
  off), and there each of those /proc/sys files is a file of the cluster's bound over the
  host's, so that its writes land in the cluster's files and the host's kernel is left as it
  was (no other component writes a setting outside the nodes' network namespaces:
  tests/cluster/test_cluster_host.py compares all of /proc/sys before, during and after a
  cluster);
- CoreDNS in node 0, answering for cluster.local from the API (the kubernetes plugin), so that
  a client on the host can resolve a headless Service's name to its ready pods as in a cluster;
- each node's allocatable CPU, NODE_CPUS whatever the machine's count (the rest reserved for
  the system), so that a test of room on the nodes means the same on any machine.

Teardown runs even when a test fails: workloads deleted while the kubelets can still stop
them, then the processes by PID, then any process left in the slot's network namespaces or
the kubelets' cgroups, the sandboxes' network namespaces, mounts, cgroups, the host's link and
the namespaces (and with them their links, iptables chains and forwarding switches). A run
that was killed before its teardown leaves its slot's lock free and its components running;
the next cluster on that slot kills them (found by their network namespaces and cgroups, not
by name, for as many nodes as a slot can hold) and removes what they left before anything
else.
"""

from __future__ import annotations

import base64
import concurrent.futures
import contextlib
import datetime
import fcntl
import ipaddress
import json
import os
import shlex
import shutil
import signal
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from testkit import commands

REPO = Path(__file__).resolve().parent.parent
TOOLS = REPO / ".ci" / "tools" / "cluster" / "bin"
KUBE = TOOLS / "kube"
HELM = TOOLS / "helm"
PAUSE = TOOLS / "pause"
METRICS_SERVER = TOOLS / "metrics-server"
COREDNS = TOOLS / "coredns"
CNI_BIN = Path("/usr/lib/cni")
LOCKS = Path("/run/basra-cluster")
SLOTS = 16
# The nodes of a cluster, and the most a slot's addresses hold (a /26 of pods each).
NODES = 3
MAX_NODES = 4
ZONE_LABEL = "topology.kubernetes.io/zone"
# The components each node runs, named COMPONENT-INDEX (Node.component); the control
# plane's are named alone.
MOUNTS = "node-mounts"
PAUSE_IMAGE = "basra.test/pause:1"
START_SECONDS = 90.0
STOP_SECONDS = 60.0
DEBIAN_TOOLS = (
    "containerd",
    "containerd-shim-runc-v2",
    "runc",
    "etcd",
    "ctr",
    "nsenter",
    "unshare",
    "mount",
    "ip",
    "iptables",
)
# The cgroup v1 hierarchies the kubelet (cgroupfs driver) and runc need: _make_cgroup_root
# makes each kubelet's root in each hierarchy, which is cgroup v1's layout.
CGROUP_CONTROLLERS = ("cpu", "cpuacct", "cpuset", "memory", "pids", "devices", "freezer")
# Each node's allocatable CPU: its kubelet reserves the rest of the machine's for the system.
NODE_CPUS = 2
# What the kubelet sets when protectKernelDefaults is off (its setupKernelTunables), each
# bound over from a file of the cluster's in the node's mount namespace.
KUBELET_SYSCTLS = (
    "vm.overcommit_memory",
    "vm.panic_on_oom",
    "kernel.panic",
    "kernel.panic_on_oops",
    "kernel.keys.root_maxkeys",
    "kernel.keys.root_maxbytes",
)


def _cgroup_v1_controllers() -> set[str]:
    """The cgroup v1 controllers mounted below /sys/fs/cgroup."""
    found: set[str] = set()
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _, point, kind, options, *_ = line.split()
        if kind == "cgroup" and point.startswith("/sys/fs/cgroup/"):
            found.update(options.split(","))
    return found


def unavailable() -> str | None:
    """Why no cluster can be started here, or None when one can."""
    if os.geteuid() != 0:
        return "a cluster needs root (network namespaces, mounts, cgroups)"
    missing = [tool for tool in DEBIAN_TOOLS if shutil.which(tool) is None]
    if missing:
        return f"{', '.join(missing)} not installed (.ci/cluster-tools installs them as root)"
    for path in (
        *(KUBE, HELM, PAUSE, METRICS_SERVER, COREDNS),
        *(CNI_BIN / "bridge", CNI_BIN / "host-local"),
    ):
        if not path.exists():
            return f"{path} is missing (.ci/cluster-tools makes it)"
    absent = sorted(set(CGROUP_CONTROLLERS) - _cgroup_v1_controllers())
    if absent:
        return (
            f"cgroup v1 hierarchies missing: {', '.join(absent)} (the test cluster's kubelet "
            "runs on cgroup v1 with the cgroupfs driver; this host mounts "
            f"{_cgroup_kind()} at /sys/fs/cgroup)"
        )
    if not Path("/proc/sys/net/bridge/bridge-nf-call-iptables").exists():
        return "br_netfilter is not loaded (kube-proxy needs it for pods on the node's bridge)"
    if "overlay" not in Path("/proc/filesystems").read_text().split():
        return "the kernel has no overlay filesystem (containerd's snapshotter)"
    for name in KUBELET_SYSCTLS:
        if not _sysctl_path(name).exists():
            return f"{_sysctl_path(name)} does not exist (the kubelet reads it)"
    if (os.cpu_count() or 1) < NODE_CPUS:
        return f"the node's {NODE_CPUS} allocatable CPUs need at least {NODE_CPUS} on the machine"
    return None


def _cgroup_kind() -> str:
    """What is mounted at /sys/fs/cgroup, for a message."""
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _, point, kind, *_ = line.split()
        if point == "/sys/fs/cgroup":
            return kind
    return "nothing"


def _sysctl_path(name: str) -> Path:
    """A kernel setting's file, in the namespace of whoever opens it."""
    return Path("/proc/sys") / name.replace(".", "/")


@dataclass(frozen=True)
class Addresses:
    """The ranges of one slot, all in 198.18.0.0/15 (RFC 2544, reserved for testing)."""

    slot: int

    @property
    def link(self) -> ipaddress.IPv4Network:
        """The switch's network: the host and every node's eth0."""
        return ipaddress.IPv4Network(f"198.19.{self.slot}.0/24")

    @property
    def host(self) -> str:
        """The host's address on the switch."""
        return str(self.link.network_address + 1)

    def node_address(self, index: int) -> str:
        """Node `index`'s address on the switch: its InternalIP."""
        return str(self.link.network_address + 10 + index)

    @property
    def node(self) -> str:
        """Node 0's address: the control plane's (the apiserver's, metrics-server's)."""
        return self.node_address(0)

    @property
    def pods(self) -> ipaddress.IPv4Network:
        """The pods' range, every node's."""
        return ipaddress.IPv4Network(f"198.18.{2 * self.slot}.0/24")

    def node_pods(self, index: int) -> ipaddress.IPv4Network:
        """Node `index`'s pods, a /26 of `pods` on its bridge."""
        return list(self.pods.subnets(new_prefix=26))[index]

    @property
    def services(self) -> ipaddress.IPv4Network:
        """The Services' ClusterIP range."""
        return ipaddress.IPv4Network(f"198.18.{2 * self.slot + 1}.0/24")


@dataclass(frozen=True)
class Node:
    """One node of a slot's cluster: its names, addresses and places."""

    slot: int
    index: int
    root: Path
    """The cluster's state directory."""

    @property
    def name(self) -> str:
        """The Node object's name (the kubelet's hostname)."""
        return f"basra-node-{self.index}"

    @property
    def zone(self) -> str:
        """The node's topology.kubernetes.io/zone."""
        return f"zone-{self.index}"

    @property
    def netns(self) -> str:
        """The node's network namespace."""
        return f"basra-k8s-{self.slot}-n{self.index}"

    @property
    def address(self) -> str:
        """The node's address on the switch (its eth0)."""
        return Addresses(self.slot).node_address(self.index)

    @property
    def pods(self) -> ipaddress.IPv4Network:
        """The node's pod range."""
        return Addresses(self.slot).node_pods(self.index)

    @property
    def gateway(self) -> str:
        """The node's address on its pods' bridge."""
        return str(self.pods.network_address + 1)

    @property
    def link(self) -> str:
        """The switch's end of the node's link (in the switch's namespace)."""
        return f"n{self.index}"

    @property
    def files(self) -> Path:
        """The node's state directory: containerd, kubelet, CNI, kernel settings."""
        return self.root / f"node-{self.index}"

    @property
    def containerd_socket(self) -> Path:
        """The node's containerd."""
        return self.files / "containerd" / "containerd.sock"

    @property
    def cgroup_root(self) -> str:
        """The node's kubelet's cgroup root, in every hierarchy."""
        return f"/basra-k8s-{self.slot}-n{self.index}"

    def component(self, name: str) -> str:
        """A component of this node, as Cluster.processes names it."""
        return f"{name}-{self.index}"


@dataclass
class Cluster:
    """A running cluster: where its files are, and how to reach it."""

    slot: int
    root: Path
    node_count: int = NODES
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    logs: list[IO[bytes]] = field(default_factory=list)
    commands: dict[str, tuple[tuple[str, ...], int, bool]] = field(default_factory=dict)
    """Each component's command line, the node it runs in and whether it entered the node's
    mount namespace, so that `restart_component` starts it again as it was."""

    @property
    def addresses(self) -> Addresses:
        """The slot's address ranges."""
        return Addresses(self.slot)

    @property
    def nodes(self) -> list[Node]:
        """The cluster's nodes, node 0 (the control plane's) first."""
        return [Node(self.slot, index, self.root) for index in range(self.node_count)]

    def node(self, name: str) -> Node:
        """The node of that name (a pod's spec.nodeName)."""
        (found,) = [n for n in self.nodes if n.name == name]
        return found

    @property
    def netns(self) -> str:
        """Node 0's network namespace, where the control plane runs."""
        return self.nodes[0].netns

    @property
    def switch_netns(self) -> str:
        """The switch's network namespace: the bridge joining the nodes and the host."""
        return f"basra-k8s-{self.slot}-sw"

    @property
    def host_link(self) -> str:
        """The host's end of its link to the switch."""
        return f"bk8s{self.slot}"

    @property
    def dns(self) -> str:
        """The cluster's DNS (CoreDNS, names of cluster.local), host:port on node 0's address,
        for a `dns://HOST:PORT/NAME` target."""
        return f"{self.addresses.node}:53"

    @property
    def kubeconfig(self) -> Path:
        """The administrator's kubeconfig (system:masters)."""
        return self.root / "pki" / "admin.kubeconfig"

    def in_node(self, *command: str, node: int = 0, mounts: bool = False) -> list[str]:
        """`command` run in node `node`'s network namespace, and (`mounts`) in its mount
        namespace (containerd's and the kubelet's: see `_node_mounts`)."""
        entered = [f"--net=/run/netns/{self.nodes[node].netns}"]
        if mounts:
            holder = self.processes[self.nodes[node].component(MOUNTS)].pid
            entered.append(f"--mount=/proc/{holder}/ns/mnt")
        return ["nsenter", *entered, "--", *command]

    def env(self) -> dict[str, str]:
        """Environment for kubectl and helm: this cluster, and a home of its own for helm."""
        return {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "HELM_CACHE_HOME": str(self.root / "helm" / "cache"),
            "HELM_CONFIG_HOME": str(self.root / "helm" / "config"),
            "HELM_DATA_HOME": str(self.root / "helm" / "data"),
            # kubectl caches discovery by server address: each cluster keeps its own.
            "KUBECACHEDIR": str(self.root / "kube-cache"),
        }

    def run(
        self,
        *command: str,
        node: int = 0,
        timeout: float = 120.0,
        check: bool = True,
        stdin: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run a command in a node's network namespace (node 0's by default); its output as
        text."""
        return commands.run(
            self.in_node(*command, node=node),
            name=" ".join(command),
            env=self.env(),
            stdin=stdin,
            timeout=timeout,
            check=check,
        )

    def kubectl(self, *args: str, **options: Any) -> subprocess.CompletedProcess[str]:
        """kubectl against this cluster."""
        return self.run(str(KUBE), "kubectl", *args, **options)

    def helm(self, *args: str, **options: Any) -> subprocess.CompletedProcess[str]:
        """helm against this cluster."""
        return self.run(str(HELM), *args, **options)

    def get(self, *args: str) -> Any:
        """`kubectl get ... -o json`, parsed."""
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    def ctr(
        self, *args: str, node: int = 0, timeout: float = 300.0
    ) -> subprocess.CompletedProcess[str]:
        """containerd's ctr in the kubelet's namespace of a node's containerd."""
        return self.run(
            "ctr",
            "--address",
            str(self.nodes[node].containerd_socket),
            "-n",
            "k8s.io",
            *args,
            node=node,
            timeout=timeout,
        )

    def import_image(self, archive: Path, node: int = 0) -> None:
        """Import an image archive (`docker save`) into a node's containerd."""
        self.ctr("images", "import", "--no-unpack", str(archive), node=node)

    def log(self, name: str, tail: int = 3000) -> str:
        """What one component printed so far (for failure messages)."""
        path = self.root / "logs" / f"{name}.log"
        return path.read_text(errors="replace")[-tail:] if path.exists() else ""

    def start(self, name: str, *command: str, node: int = 0, mounts: bool = False) -> None:
        """Start one component in a node (node 0 by default; and its mount namespace:
        `mounts`), its output to logs/NAME.log."""
        log = (self.root / "logs" / f"{name}.log").open("ab")
        self.logs.append(log)
        self.commands[name] = (command, node, mounts)
        self.processes[name] = subprocess.Popen(
            self.in_node(*command, node=node, mounts=mounts),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )

    def wait(
        self, what: str, ready: Callable[[], Any], seconds: float, logs: Sequence[str] = ()
    ) -> None:
        """Poll `ready()` until it is true, for at most `seconds`; fail naming `what`."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for name, process in self.processes.items():
                if process.poll() is not None:
                    raise RuntimeError(
                        f"{name} exited {process.returncode} while waiting for {what}:\n"
                        f"{self.log(name)}"
                    )
            with contextlib.suppress(subprocess.SubprocessError, ValueError, AssertionError):
                if ready():
                    return
            time.sleep(0.2)
        told = "\n".join(f"--- {name}:\n{self.log(name)}" for name in logs)
        raise TimeoutError(f"{what} not within {seconds} s\n{told}")

    def stop_component(
        self, name: str, seconds: float = 20.0, sent: signal.Signals = signal.SIGTERM
    ) -> None:
        """Stop one component started with `start` before the cluster stops (`sent`, SIGTERM
        by default, to its process group, SIGKILL after `seconds`), and forget it, so that
        `wait` no longer watches it."""
        process = self.processes.pop(name, None)
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sent)
        try:
            process.wait(seconds)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)

    def restart_component(self, name: str, sent: signal.Signals = signal.SIGTERM) -> None:
        """Stop one component (`stop_component`, with `sent`) and start it again with the
        same command line, in the same namespaces, its output appended to the same log."""
        command, node, mounts = self.commands[name]
        self.stop_component(name, sent=sent)
        self.start(name, *command, node=node, mounts=mounts)

    def nodes_running(self, selector: str) -> dict[str, list[str]]:
        """The names of the pods matching `selector` (all namespaces, not being deleted),
        by the node they are bound to."""
        found: dict[str, list[str]] = {}
        for pod in self.get("pods", "--all-namespaces", "-l", selector)["items"]:
            if not pod["metadata"].get("deletionTimestamp") and pod["spec"].get("nodeName"):
                found.setdefault(pod["spec"]["nodeName"], []).append(pod["metadata"]["name"])
        return found


# ---- certificates ---------------------------------------------------------------------------


def _write(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    path.chmod(0o600)


def _certificate(
    pki: Path,
    name: str,
    common: str,
    ca: tuple[Any, x509.Certificate] | None,
    *,
    organization: str | None = None,
    addresses: Sequence[str] = (),
    names: Sequence[str] = (),
) -> tuple[Any, x509.Certificate]:
    """A key and certificate written to pki/NAME.key and NAME.crt: a CA when `ca` is None."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common)]
    if organization:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    subject = x509.Name(attributes)
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
    )
    if ca is None:
        builder = (
            builder.issuer_name(subject)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
        )
        signer = key
    else:
        builder = (
            builder.issuer_name(ca[1].subject)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
        )
        alternatives: list[x509.GeneralName] = [x509.DNSName(n) for n in names]
        alternatives += [x509.IPAddress(ipaddress.ip_address(a)) for a in addresses]
        if alternatives:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(alternatives), critical=False
            )
        signer = ca[0]
    cert = builder.sign(signer, hashes.SHA256())
    _write(
        pki / f"{name}.key",
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        ),
    )
    _write(pki / f"{name}.crt", cert.public_bytes(serialization.Encoding.PEM))
    return key, cert


def _kubeconfig(pki: Path, user: str, server: str) -> Path:
    """A kubeconfig for `user`'s certificate against `server` (JSON is YAML)."""

    def data(name: str) -> str:
        return base64.b64encode((pki / name).read_bytes()).decode()

    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "basra",
                "cluster": {"server": server, "certificate-authority-data": data("ca.crt")},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate-data": data(f"{user}.crt"),
                    "client-key-data": data(f"{user}.key"),
                },
            }
        ],
        "contexts": [{"name": "basra", "context": {"cluster": "basra", "user": user}}],
        "current-context": "basra",
    }
    path = pki / f"{user}.kubeconfig"
    _write(path, json.dumps(config, indent=1).encode())
    return path


def _make_pki(cluster: Cluster) -> None:
    """The cluster's CA, the apiserver's serving certificate, the clients' certificates and
    the service-account signing key. Every component talks as system:masters: the tests
    exercise the chart, not the cluster's RBAC."""
    pki = cluster.root / "pki"
    pki.mkdir()
    address = cluster.addresses
    ca = _certificate(pki, "ca", "basra-test-ca", None)
    _certificate(
        pki,
        "apiserver",
        "kube-apiserver",
        ca,
        addresses=("127.0.0.1", str(address.services.network_address + 1), address.node),
        names=("kubernetes", "kubernetes.default", "kubernetes.default.svc", "localhost"),
    )
    _certificate(pki, "admin", "basra-admin", ca, organization="system:masters")
    _certificate(pki, "front-proxy", "front-proxy", ca)
    # The aggregator checks metrics-server's certificate against its Service's DNS name.
    _certificate(
        pki,
        "metrics-server",
        "metrics-server",
        ca,
        addresses=(address.node, "127.0.0.1"),
        names=("metrics-server.kube-system.svc",),
    )
    account = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    _write(
        pki / "sa.key",
        account.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        ),
    )
    _write(
        pki / "sa.pub",
        account.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ),
    )
    # Every node's components reach the apiserver on node 0's address.
    _kubeconfig(pki, "admin", f"https://{address.node}:6443")


# ---- the nodes: namespaces, the switch, addresses, routes -----------------------------------


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False, timeout=30)
    if check and done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done


def _make_network(cluster: Cluster) -> None:
    """The switch (a bridge in a namespace of its own), the host's link to it, each node's
    namespace with its eth0 on the switch, and the routes between them."""
    address = cluster.addresses
    switch = cluster.switch_netns
    _ip("netns", "add", switch)
    _ip("-n", switch, "link", "add", "br0", "type", "bridge")
    _ip("-n", switch, "link", "set", "br0", "up")
    _ip("link", "add", cluster.host_link, "type", "veth", "peer", "name", "host", "netns", switch)
    _ip("-n", switch, "link", "set", "host", "master", "br0", "up")
    _ip("addr", "add", f"{address.host}/{address.link.prefixlen}", "dev", cluster.host_link)
    _ip("link", "set", cluster.host_link, "up")
    for node in cluster.nodes:
        _make_node(cluster, node)
    # The host reaches each node's pods through that node and the Services through node 0,
    # and nothing else of the cluster's ranges.
    for node in cluster.nodes:
        _ip("route", "add", str(node.pods), "via", node.address, "dev", cluster.host_link)
    _ip("route", "add", str(address.services), "via", address.node, "dev", cluster.host_link)


def _make_node(cluster: Cluster, node: Node) -> None:
    """One node's namespace, its eth0 on the switch, its routes to the other nodes' pods, its
    forwarding and masquerade."""
    address = cluster.addresses
    ns = node.netns
    switch = cluster.switch_netns
    _ip("netns", "add", ns)
    _ip("-n", switch, "link", "add", node.link, "type", "veth", "peer", "name", "eth0", "netns", ns)
    _ip("-n", switch, "link", "set", node.link, "master", "br0", "up")
    _ip("-n", ns, "addr", "add", f"{node.address}/{address.link.prefixlen}", "dev", "eth0")
    _ip("-n", ns, "link", "set", "lo", "up")
    _ip("-n", ns, "link", "set", "eth0", "up")
    for other in cluster.nodes:
        if other.index != node.index:
            _ip("-n", ns, "route", "add", str(other.pods), "via", other.address, "dev", "eth0")
    run = cluster.in_node
    for setting in ("net.ipv4.ip_forward=1", "net.bridge.bridge-nf-call-iptables=1"):
        subprocess.run(run("sysctl", "-qw", setting, node=node.index), check=True, timeout=30)
    # Calls from the host or another node (kube-proxy's masquerade leaves with the node's
    # eth0 address) to a pod's own address leave with the node's bridge address, which the
    # pod reaches without a route of its own to the switch's network.
    subprocess.run(
        run(
            "iptables",
            "-t",
            "nat",
            "-A",
            "POSTROUTING",
            "-s",
            str(address.link),
            "-d",
            str(node.pods),
            "-j",
            "MASQUERADE",
            node=node.index,
        ),
        check=True,
        timeout=30,
    )


# ---- components -----------------------------------------------------------------------------


def _write_json(path: Path, value: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=1))
    return path


def _node_mounts(cluster: Cluster, node: Node) -> None:
    """The node's mount namespace, held by a process that only sleeps: a private copy of the
    host's mounts, where each of KUBELET_SYSCTLS is a file of the node's (holding the host's
    value) bound over the /proc/sys file. The node's containerd and kubelet enter it, so that
    the kubelet's volume mounts are seen by containerd and its containers, and its writes to
    those settings change the node's files, not the host's kernel. Nothing made there
    propagates to the host, and it goes with its last process."""
    files = node.files / "sysctl"
    files.mkdir(parents=True)
    binds = []
    for name in KUBELET_SYSCTLS:
        kept = files / name
        kept.write_text(_sysctl_path(name).read_text())
        binds.append(f"mount --bind {shlex.quote(str(kept))} {_sysctl_path(name)}")
    script = "\n".join([*binds, "exec sleep infinity"])
    name = node.component(MOUNTS)
    cluster.start(
        name,
        *("unshare", "--mount", "--propagation", "private", "--", "sh", "-ec", script),
        node=node.index,
    )
    holder = cluster.processes[name].pid
    host = os.stat("/proc/self/ns/mnt").st_ino

    def bound() -> bool:
        if os.stat(f"/proc/{holder}/ns/mnt").st_ino == host:
            return False
        mounted = Path(f"/proc/{holder}/mounts").read_text()
        return all(f" {_sysctl_path(name)} " in mounted for name in KUBELET_SYSCTLS)

    cluster.wait(f"{node.name}'s mount namespace", bound, 10, [name])


def _containerd(cluster: Cluster, node: Node) -> None:
    """A containerd of the node's own, with its CRI plugin set for this sandbox."""
    root = node.files / "containerd"
    root.mkdir(parents=True)
    cni = node.files / "cni"
    address = cluster.addresses
    _write_json(
        cni / "net.d" / "10-basra.conflist",
        {
            "cniVersion": "1.0.0",
            "name": node.netns,
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": "cni0",
                    "isGateway": True,
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "dataDir": str(cni / "ipam"),
                        "ranges": [[{"subnet": str(node.pods), "gateway": node.gateway}]],
                        # Routes to every node's pods and to the Services, none off the
                        # machine.
                        "routes": [{"dst": str(address.pods)}, {"dst": str(address.services)}],
                    },
                },
                {"type": "portmap", "capabilities": {"portMappings": True}},
            ],
        },
    )
    config = f"""version = 2
root = "{root / "root"}"
state = "{root / "state"}"
[grpc]
  address = "{node.containerd_socket}"
[ttrpc]
  address = "{root / "containerd.sock.ttrpc"}"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  # The sandbox withholds CAP_SYS_RESOURCE: an oom_score_adj below containerd's own fails
  # runc's container start, so containerd clamps it instead.
  restrict_oom_score_adj = true
  enable_selinux = false
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "{root / "runc"}"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_BIN}"
    conf_dir = "{cni / "net.d"}"
[plugins."io.containerd.internal.v1.opt"]
  path = "{root / "opt"}"
"""
    (root / "config.toml").write_text(config)
    name = node.component("containerd")
    cluster.start(
        name, "containerd", "--config", str(root / "config.toml"), node=node.index, mounts=True
    )
    cluster.wait(
        f"{node.name}'s containerd",
        lambda: (
            cluster.run(
                *("ctr", "--address", str(node.containerd_socket), "version"),
                node=node.index,
                timeout=10,
            ).returncode
            == 0
        ),
        30,
        [name],
    )


def _control_plane(cluster: Cluster) -> None:
    """etcd on node 0's loopback, then the apiserver on node 0's address, the
    controller-manager and the scheduler."""
    pki = cluster.root / "pki"
    address = cluster.addresses
    cluster.start(
        "etcd",
        "etcd",
        "--name",
        "basra",
        "--data-dir",
        str(cluster.root / "etcd"),
        "--listen-client-urls",
        "http://127.0.0.1:2379",
        "--advertise-client-urls",
        "http://127.0.0.1:2379",
        "--listen-peer-urls",
        "http://127.0.0.1:2380",
        "--initial-advertise-peer-urls",
        "http://127.0.0.1:2380",
        "--initial-cluster",
        "basra=http://127.0.0.1:2380",
        "--listen-metrics-urls",
        "http://127.0.0.1:2381",
    )
    cluster.start(
        "kube-apiserver",
        str(KUBE),
        "kube-apiserver",
        "--etcd-servers=http://127.0.0.1:2379",
        f"--bind-address={address.node}",
        "--secure-port=6443",
        f"--advertise-address={address.node}",
        f"--service-cluster-ip-range={address.services}",
        f"--client-ca-file={pki / 'ca.crt'}",
        f"--tls-cert-file={pki / 'apiserver.crt'}",
        f"--tls-private-key-file={pki / 'apiserver.key'}",
        f"--service-account-key-file={pki / 'sa.pub'}",
        f"--service-account-signing-key-file={pki / 'sa.key'}",
        "--service-account-issuer=https://kubernetes.default.svc",
        "--authorization-mode=Node,RBAC",
        f"--kubelet-client-certificate={pki / 'admin.crt'}",
        f"--kubelet-client-key={pki / 'admin.key'}",
        "--kubelet-preferred-address-types=InternalIP",
        # The aggregation layer, for the metrics API of metrics-server.
        f"--requestheader-client-ca-file={pki / 'ca.crt'}",
        "--requestheader-allowed-names=front-proxy",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        f"--proxy-client-cert-file={pki / 'front-proxy.crt'}",
        f"--proxy-client-key-file={pki / 'front-proxy.key'}",
        "--enable-aggregator-routing=true",
        "--profiling=false",
        "--v=1",
    )
    cluster.wait(
        "the apiserver's /readyz",
        lambda: cluster.kubectl("get", "--raw", "/readyz", check=False, timeout=10).stdout == "ok",
        START_SECONDS,
        ["etcd", "kube-apiserver"],
    )
    kubeconfig = str(cluster.kubeconfig)
    cluster.start(
        "kube-controller-manager",
        str(KUBE),
        "kube-controller-manager",
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        "--secure-port=10257",
        f"--service-account-private-key-file={pki / 'sa.key'}",
        f"--root-ca-file={pki / 'ca.crt'}",
        "--use-service-account-credentials=false",
        "--allocate-node-cidrs=false",
        "--leader-elect=false",
        # The autoscaler looks every 5 s (default 15 s), so that its tests take less time.
        "--horizontal-pod-autoscaler-sync-period=5s",
        "--v=1",
    )
    cluster.start(
        "kube-scheduler",
        str(KUBE),
        "kube-scheduler",
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        "--secure-port=10259",
        "--leader-elect=false",
        "--v=1",
    )


def _make_cgroup_root(relative: str) -> None:
    """A kubelet's cgroup root in every hierarchy (cgroup v1), made before it starts: it
    checks the root exists; cpuset's needs its parent's CPUs and memory nodes to take tasks."""
    for hierarchy in Path("/sys/fs/cgroup").iterdir():
        if hierarchy.is_dir() and not hierarchy.is_symlink() and hierarchy.name != "unified":
            top = hierarchy / relative.lstrip("/")
            top.mkdir(exist_ok=True)
            for name in ("cpuset.cpus", "cpuset.mems"):
                if (hierarchy / name).exists():
                    (top / name).write_text((hierarchy / name).read_text())


def _reserved_millicores() -> int:
    """The machine's CPU beyond a node's NODE_CPUS, reserved for the system."""
    return max(0, (os.cpu_count() or NODE_CPUS) - NODE_CPUS) * 1000


def _kubelet(cluster: Cluster, node: Node) -> None:
    """The node's kubelet, against its containerd, in a cgroup root of its own, with the
    node's zone label."""
    _make_cgroup_root(node.cgroup_root)
    root = node.files / "kubelet"
    (root / "pod-logs").mkdir(parents=True)
    resolv = node.files / "resolv.conf"
    resolv.write_text("# no cluster DNS: the tests use ClusterIPs\n")
    config = _write_json(
        root / "config.json",
        {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": node.address,
            "port": 10250,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": 10248,
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": True},
                "x509": {"clientCAFile": str(cluster.root / "pki" / "ca.crt")},
            },
            "authorization": {"mode": "Webhook"},
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": node.cgroup_root,
            "containerRuntimeEndpoint": f"unix://{node.containerd_socket}",
            "podLogsDir": str(root / "pod-logs"),
            "resolvConf": str(resolv),
            "failSwapOn": False,
            # Each call is a line of the server's log; the tests read lines back with
            # `kubectl logs`, which shows the current file alone: at the default 10Mi a
            # rotation a few seconds after a line (the suite's ghz runs log tens of MB) hides it.
            "containerLogMaxSize": "200Mi",
            "serializeImagePulls": False,
            # Images are imported, never pulled: never collect them.
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "evictionHard": {
                "memory.available": "100Mi",
                "nodefs.available": "1%",
                "imagefs.available": "1%",
            },
            "nodeStatusReportFrequency": "10s",
            "syncFrequency": "10s",
            "fileCheckFrequency": "0s",
            "volumeStatsAggPeriod": "10s",
            "shutdownGracePeriod": "0s",
            # The default, said: the kubelet writes the kernel settings it wants, into the
            # node's files bound over them in the node's mount namespace (_node_mounts).
            "protectKernelDefaults": False,
            # The node offers NODE_CPUS to pods whatever the machine has.
            "systemReserved": {"cpu": f"{_reserved_millicores()}m"},
        },
    )
    cluster.start(
        node.component("kubelet"),
        str(KUBE),
        "kubelet",
        f"--config={config}",
        f"--kubeconfig={cluster.kubeconfig}",
        f"--root-dir={root / 'root'}",
        f"--cert-dir={root / 'pki'}",
        f"--node-ip={node.address}",
        f"--hostname-override={node.name}",
        f"--node-labels={ZONE_LABEL}={node.zone}",
        "--v=1",
        node=node.index,
        mounts=True,
    )


def _kube_proxy(cluster: Cluster, node: Node) -> None:
    """The node's kube-proxy in iptables mode, on the node's own netfilter tables."""
    config = _write_json(
        node.files / "kube-proxy" / "config.json",
        {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": str(cluster.kubeconfig)},
            "mode": "iptables",
            "clusterCIDR": str(cluster.addresses.pods),
            "hostnameOverride": node.name,
            "bindAddress": node.address,
            "metricsBindAddress": "127.0.0.1:10249",
            "healthzBindAddress": "127.0.0.1:10256",
            # Calls from pods to a Service backed by a pod on the same bridge come back
            # through the node, so the replies are un-NATed.
            "iptables": {"masqueradeAll": True, "syncPeriod": "10s", "minSyncPeriod": "0s"},
            # conntrack's table size and timeouts are the host's, shared by every namespace:
            # leave them alone.
            "conntrack": {
                "maxPerCore": 0,
                "min": 0,
                "tcpEstablishedTimeout": "0s",
                "tcpCloseWaitTimeout": "0s",
            },
        },
    )
    cluster.start(
        node.component("kube-proxy"),
        *(str(KUBE), "kube-proxy", f"--config={config}", "--v=1"),
        node=node.index,
    )


def _metrics_server(cluster: Cluster) -> None:
    """metrics-server in node 0, registered as the metrics.k8s.io API (the autoscaler's
    source of pod CPU), behind a Service whose one endpoint is node 0's address; it reads
    every node's kubelet."""
    pki = cluster.root / "pki"
    kubeconfig = str(cluster.kubeconfig)
    port = 4443
    cluster.start(
        "metrics-server",
        str(METRICS_SERVER),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        f"--bind-address={cluster.addresses.node}",
        f"--secure-port={port}",
        f"--tls-cert-file={pki / 'metrics-server.crt'}",
        f"--tls-private-key-file={pki / 'metrics-server.key'}",
        # The kubelet's serving certificate is self-signed (no cluster CA signs it here).
        "--kubelet-insecure-tls",
        "--kubelet-preferred-address-types=InternalIP",
        "--metric-resolution=15s",
        "--v=1",
    )
    ca = base64.b64encode((pki / "ca.crt").read_bytes()).decode()
    objects = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "metrics-server", "namespace": "kube-system"},
                "spec": {"ports": [{"name": "https", "port": 443, "targetPort": port}]},
            },
            {
                "apiVersion": "v1",
                "kind": "Endpoints",
                "metadata": {"name": "metrics-server", "namespace": "kube-system"},
                "subsets": [
                    {
                        "addresses": [{"ip": cluster.addresses.node}],
                        "ports": [{"name": "https", "port": port}],
                    }
                ],
            },
            {
                "apiVersion": "apiregistration.k8s.io/v1",
                "kind": "APIService",
                "metadata": {"name": "v1beta1.metrics.k8s.io"},
                "spec": {
                    "group": "metrics.k8s.io",
                    "version": "v1beta1",
                    "groupPriorityMinimum": 100,
                    "versionPriority": 100,
                    "caBundle": ca,
                    "service": {"name": "metrics-server", "namespace": "kube-system", "port": 443},
                },
            },
        ],
    }
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(objects))


def _coredns(cluster: Cluster) -> None:
    """CoreDNS in node 0 on its address, answering for cluster.local from the API (its
    kubernetes plugin: a headless Service's name resolves to its ready pods' addresses), so
    that a client of the host can use a headless Service as in a cluster. Pods keep the
    node's resolv.conf (no cluster DNS for them: nothing in them looks a name up)."""
    corefile = cluster.root / "coredns" / "Corefile"
    corefile.parent.mkdir()
    corefile.write_text(
        f""".:53 {{
    bind {cluster.addresses.node}
    errors
    ready {cluster.addresses.node}:8181
    kubernetes cluster.local {{
        kubeconfig {cluster.kubeconfig}
    }}
}}
"""
    )
    cluster.start("coredns", str(COREDNS), "-conf", str(corefile))


def _dns_ready(cluster: Cluster) -> bool:
    """Whether CoreDNS's kubernetes plugin has synced with the API (its `ready` endpoint)."""
    url = f"http://{cluster.addresses.node}:8181/ready"
    # The node's address is reached directly, whatever proxy the environment names.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=5) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def nodes_ready(cluster: Cluster) -> bool:
    """Whether every node of the cluster is registered and Ready."""
    found = {n["metadata"]["name"]: n for n in cluster.get("nodes")["items"]}
    return all(
        node.name in found
        and any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in found[node.name]["status"]["conditions"]
        )
        for node in cluster.nodes
    )


def _default_account(cluster: Cluster) -> bool:
    found = cluster.kubectl("get", "serviceaccount", "default", check=False, timeout=10)
    return found.returncode == 0


# ---- start and stop -------------------------------------------------------------------------


def _take_slot(wanted: int | None = None, seconds: float = 60.0) -> tuple[int, IO[str]]:
    """The first free slot (or the `wanted` one, once free), held by an exclusive lock until
    the cluster is gone."""
    LOCKS.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + seconds
    while True:
        for slot in range(SLOTS) if wanted is None else (wanted,):
            handle = (LOCKS / f"slot-{slot}.lock").open("w")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                continue
            return slot, handle
        if wanted is None or time.monotonic() > deadline:
            raise RuntimeError(f"cluster slot {wanted if wanted is not None else 'free'} taken")
        time.sleep(0.2)


@contextlib.contextmanager
def started(
    images: Sequence[Path] = (), slot: int | None = None, nodes: int = NODES
) -> Iterator[Cluster]:
    """Start a cluster of `nodes` nodes (on `slot` once free, or the first free one), import
    the image archives into every node, wait for the nodes; remove it all after."""
    if not 1 <= nodes <= MAX_NODES:
        raise ValueError(f"a cluster has 1 to {MAX_NODES} nodes, not {nodes}")
    slot, lock = _take_slot(slot)
    cluster = Cluster(slot, Path(f"/var/tmp/basra-k8s-{slot}"), nodes)
    try:
        _remove(cluster)  # what a killed run left on this slot
        (cluster.root / "logs").mkdir(parents=True)
        began = time.monotonic()
        _make_pki(cluster)
        _make_network(cluster)
        for node in cluster.nodes:
            _node_mounts(cluster, node)
            _containerd(cluster, node)
        # Each node's containerd imports the images at once (the unpacking is each node's).

        def load(node: int) -> None:
            for archive in images:
                cluster.import_image(archive, node)

        with concurrent.futures.ThreadPoolExecutor(len(cluster.nodes)) as imports:
            for future in [imports.submit(load, node.index) for node in cluster.nodes]:
                future.result()
        _control_plane(cluster)
        for node in cluster.nodes:
            _kubelet(cluster, node)
            _kube_proxy(cluster, node)
        _metrics_server(cluster)
        _coredns(cluster)
        cluster.wait(
            "every node Ready",
            lambda: nodes_ready(cluster),
            START_SECONDS,
            [*(n.component("kubelet") for n in cluster.nodes), "kube-apiserver"],
        )
        cluster.wait("CoreDNS ready", lambda: _dns_ready(cluster), START_SECONDS, ["coredns"])
        # Pods need the namespace's default ServiceAccount, made by the controller-manager.
        cluster.wait(
            "the default ServiceAccount",
            lambda: _default_account(cluster),
            START_SECONDS,
            ["kube-controller-manager"],
        )
        print(f"cluster slot {slot} up in {time.monotonic() - began:.1f} s ({nodes} nodes)")
        yield cluster
    finally:
        try:
            _stop(cluster)
        finally:
            _remove(cluster)
            lock.close()


def _stop(cluster: Cluster) -> None:
    """Delete the workloads while the kubelets can still stop their sandboxes, then stop the
    components, newest first, each by its PID."""
    kubelets = [cluster.processes.get(n.component("kubelet")) for n in cluster.nodes]
    if any(k is not None and k.poll() is None for k in kubelets):
        with contextlib.suppress(subprocess.SubprocessError):
            # Controllers first, so that nothing makes the pods again.
            cluster.kubectl(
                "delete",
                "deployments,replicasets,daemonsets,statefulsets,jobs",
                "--all",
                "--all-namespaces",
                "--wait=false",
                check=False,
                timeout=30,
            )
            cluster.kubectl(
                "delete",
                "pods",
                "--all",
                "--all-namespaces",
                "--grace-period=1",
                f"--timeout={int(STOP_SECONDS)}s",
                check=False,
                timeout=STOP_SECONDS + 10,
            )
    for name in reversed(list(cluster.processes)):
        process = cluster.processes[name]
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)
    for log in cluster.logs:
        log.close()


def _every_node(cluster: Cluster) -> list[Node]:
    """Every node the slot can hold, whatever a killed run had started."""
    return [Node(cluster.slot, index, cluster.root) for index in range(MAX_NODES)]


def _pids_in_cgroups(relative: str) -> set[int]:
    """The processes in the cgroups below `relative`, in every hierarchy."""
    found: set[int] = set()
    for hierarchy in Path("/sys/fs/cgroup").iterdir():
        for procs in (hierarchy / relative.lstrip("/")).glob("**/cgroup.procs"):
            with contextlib.suppress(OSError, ValueError):
                found.update(int(line) for line in procs.read_text().split())
    return found


def _pids_in_netns(netns: str) -> set[int]:
    """The processes whose network namespace is `netns` (/run/netns/NAME)."""
    try:
        wanted = os.stat(f"/run/netns/{netns}")
    except OSError:
        return set()
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                held = os.stat(entry / "ns" / "net")
                if (held.st_dev, held.st_ino) == (wanted.st_dev, wanted.st_ino):
                    found.add(int(entry.name))
    return found


def leftovers(cluster: Cluster) -> set[int]:
    """The slot's processes still running: every component and shim (all in the nodes'
    network namespaces) and every container (in the kubelets' cgroups), zombies aside."""
    found = _pids_in_netns(cluster.switch_netns)
    for node in _every_node(cluster):
        found |= _pids_in_netns(node.netns) | _pids_in_cgroups(node.cgroup_root)
    return {pid for pid in found - {os.getpid()} if _running(pid)}


def _running(pid: int) -> bool:
    """Whether a process exists and is not a zombie waiting to be reaped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def _kill_leftovers(cluster: Cluster, seconds: float = STOP_SECONDS) -> None:
    """SIGKILL the slot's processes until none is left (a component killed by the run that
    started it, or left running by a run that was killed)."""
    deadline = time.monotonic() + seconds
    while found := leftovers(cluster):
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes of cluster slot {cluster.slot} survive SIGKILL: {found}")
        for pid in found:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)


def _sandbox_namespaces(cluster: Cluster) -> list[str]:
    """Network namespaces of the sandboxes the nodes' containerds made, from runc's state."""
    found = set()
    for state in cluster.root.glob("node-*/containerd/**/config.json"):
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            spec = json.loads(state.read_text())
            for namespace in spec["linux"]["namespaces"]:
                path = namespace.get("path", "")
                if namespace["type"] == "network" and path.startswith("/var/run/netns/cni-"):
                    found.add(Path(path).name)
    return sorted(found)


def _remove(cluster: Cluster) -> None:
    """Remove whatever this slot holds: processes first (components, shims, containers), then
    namespaces, mounts, cgroups, links, files."""
    _kill_leftovers(cluster)
    sandboxes = _sandbox_namespaces(cluster) if cluster.root.exists() else []
    for name in sandboxes:
        _ip("netns", "delete", name, check=False)
    mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
    for point in sorted(
        (m for m in mounts if Path(m).is_relative_to(cluster.root)), key=len, reverse=True
    ):
        subprocess.run(["umount", "--lazy", point], check=False, capture_output=True)
    for node in _every_node(cluster):
        _remove_cgroups(node.cgroup_root)
    # The host's link first (its routes go with it), then the namespaces with their links.
    _ip("link", "delete", cluster.host_link, check=False)
    for node in _every_node(cluster):
        _ip("netns", "delete", node.netns, check=False)
    _ip("netns", "delete", cluster.switch_netns, check=False)
    shutil.rmtree(cluster.root, ignore_errors=True)


def _remove_cgroups(relative: str) -> None:
    """A kubelet's cgroups below `relative` in every hierarchy, deepest first."""
    for hierarchy in Path("/sys/fs/cgroup").iterdir():
        top = hierarchy / relative.lstrip("/")
        if not top.is_dir():
            continue
        below = (p for p in top.glob("**/") if p.is_dir())
        for directory in sorted(below, key=lambda p: len(p.parts), reverse=True):
            with contextlib.suppress(OSError):
                directory.rmdir()


if __name__ == "__main__":
    # By hand: start a cluster with the image archives named and keep it until Ctrl-C
    # (KUBECONFIG is printed).
    import sys

    with started([Path(a) for a in sys.argv[1:]]) as running:
        print(
            f"KUBECONFIG={running.kubeconfig} nsenter --net=/run/netns/{running.netns}",
            flush=True,
        )
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()

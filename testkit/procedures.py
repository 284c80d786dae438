"""The documented changes to a running deployment, as the rollouts testkit.rollout makes.

Each procedure is named as its block in the docs (`<!-- procedure: NAME -->` in
docs/service.md and the Helm chart's README): the configuration it starts from, then one Step
per numbered step of the block, each one rollout, with `wait` where the step begins "Once"
(every match in progress must hold a state of the current configuration first). Some are
tried in more than one variant (the setting changed; a renewal by the same CA or another;
TLS, mutual TLS on and TLS off; the upgrade plain and signed).
"""

from __future__ import annotations

import base64
import random
import re
from dataclasses import dataclass
from pathlib import Path

import grpc

from testkit.pki import PKI, Issued
from testkit.releases import Release
from testkit.rollout import Spec

REPO = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"<!-- procedure: ([a-z-]+) -->\n(.*?)<!-- end of procedure -->", re.S)
STEP = re.compile(r"^(\d+)\. (\S+)", re.M)
"""A numbered step of a procedure, and its first word."""


def blocks(page: str) -> dict[str, str]:
    """The procedures of a page (relative to the repository), by name; a name given twice on
    one page is refused."""
    found: dict[str, str] = {}
    for name, text in BLOCK.findall((REPO / page).read_text(encoding="utf-8")):
        assert name not in found, f"{page} gives {name} twice"
        found[name] = text
    return found


KEYS = {kid: base64.b64encode(random.Random(kid).randbytes(32)).decode() for kid in ("k1", "k2")}

VARIANTS: dict[str, tuple[str, ...]] = {
    "turn-signing-on": ("",),
    "rotate-signing-key": ("",),
    "turn-signing-off": ("",),
    "change-a-setting": ("workers", "tracing", "limits", "connections"),
    "renew-tls-certificate": ("same-ca", "another-ca"),
    "switch-tls": ("tls-on", "mutual-tls-on", "tls-off"),
    "upgrade-release": ("plain", "signed"),
}
"""Every procedure of the docs, and the variants it is rolled out in."""


# A setting of limits or connections, before and after (the defaults, then a change).
# Connections: a pod closes each after half a second, so GOAWAYs come all through the rollout.
CHANGED: dict[str, tuple[tuple[str, dict[str, str]], tuple[str, dict[str, str]]]] = {
    "limits": (
        ("default limits", {}),
        ("other limits", {"BASRA_MAX_MESSAGE_BYTES": "262144", "BASRA_PLAN_WORK_LIMIT": "20000"}),
    ),
    "connections": (
        ("connections aged 300 s", {}),
        (
            "connections aged 0.5 s",
            {
                "BASRA_MAX_CONNECTION_AGE_SECONDS": "0.5",
                "BASRA_MAX_CONNECTION_AGE_GRACE_SECONDS": "5",
            },
        ),
    ),
}


def keys(*kids: str) -> str:
    """A BASRA_SIGNING_KEYS value: these keys, the first one signing."""
    return ",".join(f"{kid}:{KEYS[kid]}" for kid in kids)


def signing(name: str, *kids: str, window: bool = False, release: Release | None = None) -> Spec:
    """A configuration with signing keys (and the migration window open, or not)."""
    env = {"BASRA_SIGNING_KEYS": keys(*kids)}
    if window:
        env["BASRA_SIGNING_ACCEPT_UNSIGNED"] = "true"
    return Spec(name, env=env, release=release)


OFF = Spec("off")
WINDOW = signing("k1 + unsigned", "k1", window=True)
REQUIRED = signing("k1", "k1")


@dataclass(frozen=True)
class Step:
    """One numbered step of a procedure: the configuration rolled out."""

    spec: Spec
    wait: bool = False
    """Whether the step waits for every match to hold a state of the configuration before."""


@dataclass(frozen=True)
class Procedure:
    """Where a procedure starts, its steps, and whether it is rolled back afterwards."""

    first: Spec
    steps: tuple[Step, ...]
    back: bool = False
    """Roll back to `first` once done (the upgrade: "rolling back is the same step")."""


@dataclass(frozen=True)
class Setting:
    """What some procedures need: certificates, the last release, a trace collector."""

    pki: PKI
    renewed: Issued
    """A second server certificate of the PKI's CA."""
    other_ca: Issued
    """Another CA, for a renewal whose certificate comes from another CA."""
    elsewhere: Issued
    """A server certificate of `other_ca`."""
    release: Release
    collector: str
    """An OTLP/gRPC endpoint for traced pods."""


def tls(name: str, cert: Issued, credentials: grpc.ChannelCredentials, client_ca: str = "") -> Spec:
    """A configuration serving TLS with this certificate (mutual TLS with a client CA)."""
    env = {"BASRA_TLS_CERT": cert.cert_path, "BASRA_TLS_KEY": cert.key_path}
    if client_ca:
        env["BASRA_TLS_CLIENT_CA"] = client_ca
    return Spec(name, env=env, credentials=credentials)


def procedure(name: str, variant: str, setting: Setting) -> Procedure:
    """The rollouts of one variant of a documented procedure."""
    if name == "turn-signing-on":
        return Procedure(OFF, (Step(WINDOW), Step(REQUIRED, wait=True)))
    if name == "rotate-signing-key":
        return Procedure(
            REQUIRED,
            (
                Step(signing("k1,k2", "k1", "k2")),
                Step(signing("k2,k1", "k2", "k1")),
                Step(signing("k2", "k2"), wait=True),
            ),
        )
    if name == "turn-signing-off":
        return Procedure(REQUIRED, (Step(WINDOW), Step(OFF)))
    if name == "change-a-setting" and variant == "workers":
        return Procedure(Spec("1 worker"), (Step(Spec("2 workers", ("--workers", "2"))),))
    if name == "change-a-setting" and variant in CHANGED:
        (old, old_env), (new, new_env) = CHANGED[variant]
        return Procedure(Spec(old, env=old_env), (Step(Spec(new, env=new_env)),))
    if name == "change-a-setting" and variant == "tracing":
        traced = {"OTEL_EXPORTER_OTLP_ENDPOINT": setting.collector, "BASRA_TRACING": "true"}
        return Procedure(Spec("untraced"), (Step(Spec("traced", env=traced)),))
    if name == "renew-tls-certificate":
        # Another CA's certificate: the clients trust both CAs first, as the step says.
        cas = setting.pki.ca.cert + (setting.other_ca.cert if variant == "another-ca" else b"")
        trust = grpc.ssl_channel_credentials(cas)
        renewed = setting.elsewhere if variant == "another-ca" else setting.renewed
        first = tls("certificate 1", setting.pki.server, trust)
        return Procedure(first, (Step(tls("certificate 2", renewed, trust)),))
    if name == "switch-tls":
        # The clients move from the old release to the new one, lobby replica by lobby
        # replica: meanwhile a match's next call goes to either, each over its own channel.
        pki = setting.pki
        server_only = tls("TLS", pki.server, grpc.ssl_channel_credentials(pki.ca.cert))
        if variant == "tls-on":
            return Procedure(OFF, (Step(server_only),))
        if variant == "tls-off":
            return Procedure(server_only, (Step(OFF),))
        mutual = grpc.ssl_channel_credentials(pki.ca.cert, pki.client.key, pki.client.cert)
        both = tls("mutual TLS", pki.server, mutual, client_ca=pki.ca.cert_path)
        return Procedure(OFF, (Step(both),))
    if name == "upgrade-release":
        if variant == "signed":
            before = signing("last release", "k1", release=setting.release)
            return Procedure(before, (Step(signing("this checkout", "k1")),), back=True)
        before = Spec("last release", release=setting.release)
        return Procedure(before, (Step(Spec("this checkout")),), back=True)
    raise KeyError(f"no procedure {name!r} ({variant!r})")

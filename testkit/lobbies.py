"""Lobbies playing matches through a Service of the test cluster, as a game's lobby replicas do.

A lobby replica is one gRPC channel to the Service's ClusterIP. With the published service
config (deploy/grpc-service-config.json, loaded whole as the channel's one
`grpc.service_config`, as the chart README says) the channel balances round_robin, checks
health, retries UNAVAILABLE, CANCELLED and RESOURCE_EXHAUSTED and throttles its retries;
without it, it is a plain grpcio channel. Each replica has a connection of its own (no
subchannel shared between channels), which kube-proxy sends to one ready pod, so several
replicas spread over the pods; a replica moves to another pod when its connection ends (the
server's GOAWAY at a stop or at its maximum connection age).

The matches are testkit.matchplay's, every answer checked; a match's state is the lobby's,
not a replica's, so each call of a match goes through a replica drawn at random. `move()`
replaces the replicas one at a time (the clients rolling out to another release, as the TLS
switch does), so that meanwhile a match's next call reaches either. Every match pauses
`pause` seconds between its calls, so that the lobbies leave the pods' CPU (and with it the
autoscaler's count) alone.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from basra.v1 import rules_pb2_grpc

from clients import channels
from testkit.deployment import REPO
from testkit.matchplay import Matches, Tally

SERVICE_CONFIG = REPO / "deploy" / "grpc-service-config.json"
PAUSE_SECONDS = 0.05


@dataclass(frozen=True)
class Replica:
    """A lobby replica's channel, named by what it reaches (a release)."""

    name: str
    channel: grpc.Channel
    stub: Any


def replica(
    name: str,
    target: str,
    *,
    service_config: bool = True,
    credentials: grpc.ChannelCredentials | None = None,
    server_name: str | None = None,
) -> Replica:
    """A channel to `target` (host:port), with the published service config or without, in
    plaintext or over TLS (checking the server's certificate for `server_name`)."""
    options: list[tuple[str, str | int]] = [("grpc.use_local_subchannel_pool", 1)]
    if server_name is not None:
        options.append(("grpc.ssl_target_name_override", server_name))
    channel = channels.channel(
        target,
        options=options,
        credentials=credentials,
        service_config=SERVICE_CONFIG.read_text() if service_config else None,
    )
    stub = rules_pb2_grpc.RulesServiceStub(channel)  # type: ignore[no-untyped-call]
    return Replica(name, channel, stub)


class Lobbies:
    """Lobby replicas and the matches they play; a context manager."""

    def __init__(
        self,
        replicas: Sequence[Replica],
        *,
        matches: int = 16,
        seed: str = "lobbies",
        pause: float = PAUSE_SECONDS,
    ) -> None:
        self.replicas = list(replicas)
        self._opened = list(replicas)
        self.matches = Matches(matches, self._pick, seed=seed, pause=pause)

    @property
    def tally(self) -> Tally:
        """What the matches counted."""
        return self.matches.tally

    def __enter__(self) -> Lobbies:
        self.matches.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.matches.stop()
        for opened in self._opened:
            opened.channel.close()

    def _pick(self, rnd: random.Random) -> Replica:
        return rnd.choice(self.replicas)

    def move(self, replacements: Sequence[Replica], every: float = 1.0) -> None:
        """Replace the replicas one at a time, `every` seconds apart."""
        for index, new in enumerate(replacements):
            self._opened.append(new)
            if index:
                time.sleep(every)
            if index < len(self.replicas):
                self.replicas[index] = new
            else:
                self.replicas.append(new)
        del self.replicas[len(replacements) :]

    def wait_for_every_match_to_move(self, since: float, seconds: float = 60.0) -> None:
        """Wait until every match holds a state that came after `since` (time.monotonic())."""
        self.matches.wait(
            "a move of every match since the rollout finished",
            lambda: all(h is not None and h.at > since for h in self.matches.held),
            seconds,
        )

    def keys_held(self) -> set[str]:
        """The keys that signed the states the matches hold now ("" for a plain state)."""
        return {h.key_id for h in self.matches.held if h is not None}

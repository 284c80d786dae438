"""The engine's value of each value of basra.v1's enums (Status, BotLevel), and back.

Plain dicts typed read-only: they are looked up on every answer, where a mapping proxy costs
more than the lookup itself.
"""

from __future__ import annotations

from collections.abc import Mapping

from basra.v1 import rules_pb2 as pb

from engine import Status
from engine.bot import Level

PROTO_STATUS: Mapping[Status, int] = {
    Status.IN_PROGRESS: pb.STATUS_IN_PROGRESS,
    Status.OVER: pb.STATUS_OVER,
}
ENGINE_STATUS: Mapping[int, Status] = {v: k for k, v in PROTO_STATUS.items()}
"""STATUS_UNSPECIFIED (and any unknown number) has none: such a state is refused."""

PROTO_BOT_LEVEL: Mapping[Level, pb.BotLevel] = {
    Level.RANDOM: pb.BOT_LEVEL_RANDOM,
    Level.GREEDY: pb.BOT_LEVEL_GREEDY,
    Level.STRONG: pb.BOT_LEVEL_STRONG,
}
ENGINE_BOT_LEVEL: Mapping[int, Level] = {v: k for k, v in PROTO_BOT_LEVEL.items()}
"""BOT_LEVEL_UNSPECIFIED has none: it means the server's configured default."""

"""How a call ends when it is not answered: a Refusal, one exception type carrying a gRPC code
and exactly one google.rpc.ErrorInfo (and, when the server sheds load, a google.rpc.RetryInfo
saying when to try again); or a Failure, an exception nobody anticipated, which ends it INTERNAL."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import ClassVar

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2  # type: ignore[import-untyped]

from engine import Reason, RuleError
from service.grpc_surface import Status

DOMAIN = "basra.v1"
# The trailing metadata key of a call's google.rpc.Status (gRPC's rich error model).
DETAILS_KEY = "grpc-status-details-bin"
# gRFC A6 server pushback: grpc's own retry waits this many milliseconds before its next attempt
# (instead of its backoff), so clients retrying by the published service config honour the
# delay that RetryInfo states for clients that read the details.
PUSHBACK_KEY = "grpc-retry-pushback-ms"
NO_RETRY = "-1"


class ServiceReason(StrEnum):
    """Reasons that only the service gives (the engine's own are engine.Reason)."""

    SEQ_MISMATCH = "SEQ_MISMATCH"
    TOO_MANY_ACTIONS = "TOO_MANY_ACTIONS"
    TOO_MANY_LABELS = "TOO_MANY_LABELS"
    MALFORMED_REQUEST = "MALFORMED_REQUEST"
    BAD_SIGNATURE = "BAD_SIGNATURE"
    REQUEST_TOO_LARGE = "REQUEST_TOO_LARGE"
    RESPONSE_TOO_LARGE = "RESPONSE_TOO_LARGE"
    BUDGET_TOO_LARGE = "BUDGET_TOO_LARGE"
    INVALID_LEVEL = "INVALID_LEVEL"
    OVERLOADED = "OVERLOADED"
    DEADLINE_EXPIRED = "DEADLINE_EXPIRED"
    DEADLINE_TOO_SHORT = "DEADLINE_TOO_SHORT"
    TOO_MANY_ITEMS = "TOO_MANY_ITEMS"


# Reasons the server's load gives, not the request: the same request may be answered when sent
# again (docs/capacity.md). No request alone can bring them about.
LOAD_REASONS = frozenset(
    {ServiceReason.OVERLOADED, ServiceReason.DEADLINE_EXPIRED, ServiceReason.DEADLINE_TOO_SHORT}
)


_CODE_BY_REASON: Mapping[str, grpc.StatusCode] = MappingProxyType(
    {
        Reason.INVALID_STATE: grpc.StatusCode.INVALID_ARGUMENT,
        Reason.INVALID_CARD: grpc.StatusCode.INVALID_ARGUMENT,
        Reason.INVALID_ACTION: grpc.StatusCode.INVALID_ARGUMENT,
        Reason.INVALID_LABEL: grpc.StatusCode.INVALID_ARGUMENT,
        Reason.INVALID_SEED: grpc.StatusCode.INVALID_ARGUMENT,
        Reason.INVALID_SEAT: grpc.StatusCode.INVALID_ARGUMENT,
        Reason.NOT_YOUR_TURN: grpc.StatusCode.FAILED_PRECONDITION,
        Reason.CARD_NOT_IN_HAND: grpc.StatusCode.FAILED_PRECONDITION,
        Reason.PLAN_REQUIRED: grpc.StatusCode.FAILED_PRECONDITION,
        Reason.UNKNOWN_PLAN: grpc.StatusCode.FAILED_PRECONDITION,
        Reason.ILLEGAL_CAPTURE: grpc.StatusCode.FAILED_PRECONDITION,
        Reason.MUST_CAPTURE: grpc.StatusCode.FAILED_PRECONDITION,
        Reason.MATCH_OVER: grpc.StatusCode.FAILED_PRECONDITION,
        Reason.STATE_TOO_COMPLEX: grpc.StatusCode.RESOURCE_EXHAUSTED,
        ServiceReason.SEQ_MISMATCH: grpc.StatusCode.ABORTED,
        ServiceReason.TOO_MANY_ACTIONS: grpc.StatusCode.RESOURCE_EXHAUSTED,
        ServiceReason.TOO_MANY_LABELS: grpc.StatusCode.INVALID_ARGUMENT,
        ServiceReason.MALFORMED_REQUEST: grpc.StatusCode.INVALID_ARGUMENT,
        ServiceReason.BAD_SIGNATURE: grpc.StatusCode.UNAUTHENTICATED,
        ServiceReason.REQUEST_TOO_LARGE: grpc.StatusCode.RESOURCE_EXHAUSTED,
        ServiceReason.RESPONSE_TOO_LARGE: grpc.StatusCode.RESOURCE_EXHAUSTED,
        ServiceReason.BUDGET_TOO_LARGE: grpc.StatusCode.RESOURCE_EXHAUSTED,
        ServiceReason.INVALID_LEVEL: grpc.StatusCode.INVALID_ARGUMENT,
        ServiceReason.OVERLOADED: grpc.StatusCode.RESOURCE_EXHAUSTED,
        ServiceReason.DEADLINE_EXPIRED: grpc.StatusCode.DEADLINE_EXCEEDED,
        ServiceReason.DEADLINE_TOO_SHORT: grpc.StatusCode.DEADLINE_EXCEEDED,
        ServiceReason.TOO_MANY_ITEMS: grpc.StatusCode.RESOURCE_EXHAUSTED,
    }
)


def code_for(reason: str) -> grpc.StatusCode:
    """Return the gRPC status code of a reason (INVALID_ARGUMENT for a reason not listed)."""
    return _CODE_BY_REASON.get(reason, grpc.StatusCode.INVALID_ARGUMENT)


def known_reasons() -> tuple[str, ...]:
    """Return every reason the service can give, in a stable order."""
    return tuple(sorted(str(r) for r in _CODE_BY_REASON))


def camel(key: str) -> str:
    """Return a metadata key in lowerCamelCase, as AIP-193 asks ("work_limit" -> "workLimit")."""
    head, *rest = key.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


@dataclass(frozen=True, slots=True)
class Refusal(Exception):  # noqa: N818 (a refusal is not an error of the server)
    """A refused call: status code, stable reason, one English sentence, values involved."""

    code: grpc.StatusCode
    reason: str
    message: str
    metadata: Mapping[str, str] = field(default_factory=dict)
    retry_delay: float | None = None
    """Seconds after which the same call may succeed (RetryInfo and pushback); None: no hint."""

    def __str__(self) -> str:
        return f"{self.reason}: {self.message}"

    def error_info(self) -> error_details_pb2.ErrorInfo:
        """Return the google.rpc.ErrorInfo detail of this refusal."""
        return error_details_pb2.ErrorInfo(
            reason=self.reason, domain=DOMAIN, metadata=dict(self.metadata)
        )

    def rich_status(self) -> status_pb2.Status:
        """The google.rpc.Status of this refusal: its code, its sentence, its ErrorInfo and,
        with a retry delay, a RetryInfo (what a batch item's status is, and what the call's
        grpc-status-details-bin carries)."""
        detail = any_pb2.Any()
        detail.Pack(self.error_info())
        details = [detail]
        if self.retry_delay is not None:
            delay = duration_pb2.Duration()
            delay.FromNanoseconds(round(self.retry_delay * 1e9))
            retry = any_pb2.Any()
            retry.Pack(error_details_pb2.RetryInfo(retry_delay=delay))
            details.append(retry)
        return status_pb2.Status(
            code=getattr(code_pb2, self.code.name), message=self.message, details=details
        )

    def status(self) -> Status:
        """The status to end the call with: the rich status in its trailing metadata, and
        gRPC's retry pushback when the refusal says when (or that) to retry."""
        metadata: tuple[tuple[str, str | bytes], ...] = (
            (DETAILS_KEY, self.rich_status().SerializeToString()),
        )
        if self.retry_delay is not None:
            metadata += ((PUSHBACK_KEY, str(round(self.retry_delay * 1000))),)
        elif self.code is grpc.StatusCode.RESOURCE_EXHAUSTED:
            # The same request would be refused the same way: a negative pushback tells gRPC's
            # retry not to try again (the published policy retries RESOURCE_EXHAUSTED for the
            # load refusal OVERLOADED, not for a budget or a size past a configured bound).
            metadata += ((PUSHBACK_KEY, NO_RETRY),)
        return Status(self.code, self.message, metadata)


def refusal(reason: Reason | ServiceReason, message: str, **metadata: str | int) -> Refusal:
    """Build a refusal for a reason, with the code the reason maps to."""
    return Refusal(
        code_for(reason), reason.value, message, {camel(k): str(v) for k, v in metadata.items()}
    )


def from_rule_error(error: RuleError) -> Refusal:
    """Translate an engine refusal, keeping its reason, message and details."""
    return Refusal(
        code_for(error.reason.value),
        error.reason.value,
        error.message,
        {camel(k): v for k, v in error.details.items()},
    )


# What the caller of a failed call learns: that the server failed, not how (the log says how).
INTERNAL_MESSAGE = "The server failed on this call; nothing was changed."


@dataclass(frozen=True, slots=True)
class Failure:
    """A call ended by an exception nobody anticipated: a bug of the server, not the caller's."""

    error: BaseException
    code: ClassVar[grpc.StatusCode] = grpc.StatusCode.INTERNAL
    reason: ClassVar[None] = None

    def rich_status(self) -> status_pb2.Status:
        """The google.rpc.Status of the failed call: INTERNAL, naming nothing internal."""
        return status_pb2.Status(code=code_pb2.INTERNAL, message=INTERNAL_MESSAGE)

    def status(self) -> Status:
        """The status to end the call with: the rich status in its trailing metadata."""
        return Status(
            self.code,
            INTERNAL_MESSAGE,
            ((DETAILS_KEY, self.rich_status().SerializeToString()),),
        )

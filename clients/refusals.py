"""Reading a refusal as a client: the google.rpc.ErrorInfo details of a failed call.

Every refusal of the service carries exactly one ErrorInfo (domain "basra.v1", a stable
reason code, metadata in lowerCamelCase) in the call's rich status, which travels in the
trailing metadata under "grpc-status-details-bin"; a call refused because the server is
overloaded also carries a google.rpc.RetryInfo (when to try again). This is the one reader of
them for the clients, the tests and the test tools.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import grpc
from google.rpc import error_details_pb2, status_pb2  # type: ignore[import-untyped]

DETAILS_KEY = "grpc-status-details-bin"


def _details(trailing_metadata: Iterable[Any] | None) -> list[Any]:
    """The google.protobuf.Any details of a call's rich status."""
    found = []
    for key, value in trailing_metadata or ():  # (key, value) pairs
        if key == DETAILS_KEY:
            found.extend(status_pb2.Status.FromString(value).details)
    return found


def error_infos(
    trailing_metadata: Iterable[Any] | None,
) -> tuple[error_details_pb2.ErrorInfo, ...]:
    """Return the ErrorInfo details of a call's trailing metadata; refuse any detail the
    service does not send (anything but ErrorInfo and RetryInfo)."""
    found = []
    for detail in _details(trailing_metadata):
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            found.append(info)
        elif not detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            raise ValueError(f"a status detail the service does not send: {detail.type_url}")
    return tuple(found)


def retry_delay_of(error: grpc.RpcError) -> float | None:
    """Return the seconds a refused call's RetryInfo says to wait before trying again (None:
    the refusal carries none, and sending the same call again would be refused again)."""
    trailing: Any = error.trailing_metadata()  # a failed call is also a grpc.Call
    for detail in _details(trailing):
        retry = error_details_pb2.RetryInfo()
        if detail.Unpack(retry):
            return float(retry.retry_delay.ToNanoseconds()) / 1e9
    return None


def reason_of(error: grpc.RpcError) -> str | None:
    """Return the reason code of a failed call, None when it carries no ErrorInfo."""
    trailing: Any = error.trailing_metadata()  # a failed call is also a grpc.Call
    infos = error_infos(trailing)
    return str(infos[0].reason) if infos else None

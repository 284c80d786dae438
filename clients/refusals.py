"""Reading a refusal as a client: the google.rpc.ErrorInfo details of a failed call.

Every refusal of the service carries exactly one ErrorInfo (domain "basra.v1", a stable
reason code, metadata in lowerCamelCase) in the call's rich status, which travels in the
trailing metadata under "grpc-status-details-bin". This is the one reader of it for the
clients, the tests and the test tools.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import grpc
from google.rpc import error_details_pb2, status_pb2  # type: ignore[import-untyped]

DETAILS_KEY = "grpc-status-details-bin"


def error_infos(
    trailing_metadata: Iterable[Any] | None,
) -> tuple[error_details_pb2.ErrorInfo, ...]:
    """Return the ErrorInfo details of a call's trailing metadata; refuse any other detail."""
    found = []
    for key, value in trailing_metadata or ():  # (key, value) pairs
        if key != DETAILS_KEY:
            continue
        for detail in status_pb2.Status.FromString(value).details:
            info = error_details_pb2.ErrorInfo()
            if not detail.Unpack(info):
                raise ValueError(f"a status detail that is not an ErrorInfo: {detail.type_url}")
            found.append(info)
    return tuple(found)


def reason_of(error: grpc.RpcError) -> str | None:
    """Return the reason code of a failed call, None when it carries no ErrorInfo."""
    trailing: Any = error.trailing_metadata()  # a failed call is also a grpc.Call
    infos = error_infos(trailing)
    return str(infos[0].reason) if infos else None

"""What an operator reads when a controller or another broker refuses or fails this broker: Kafka's
error names with what happens next, and a peer's failure in words, never Python's exception text.

    registration_refused(DUPLICATE_BROKER_REGISTRATION)
      -> "DUPLICATE_BROKER_REGISTRATION: the controllers still hold this broker's previous session;
          retrying until it expires (broker.session.timeout.ms)"
    peer_failure("127.0.0.1", 9093, IncompleteReadError(...), 10.0)
      -> "127.0.0.1:9093 closed the connection"
"""

from __future__ import annotations

import asyncio
import os

from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.errors import DecodeError

# BrokerRegistration's refusals (the controllers' ClusterControlManager), each retried by the
# broker's lifecycle: what the operator may do meanwhile.
REGISTRATION_REFUSALS: dict[int, str] = {
    ErrorCode.DUPLICATE_BROKER_REGISTRATION: "the controllers still hold this broker's previous session; "
    "retrying until it expires (broker.session.timeout.ms)",
    ErrorCode.INCONSISTENT_CLUSTER_ID: "this broker's log dirs were formatted for another cluster than the "
    "controllers'; format them with the controllers' cluster id (kafka-storage format -t); retrying",
    ErrorCode.INVALID_REGISTRATION: "the controllers refused this broker's listeners, features or log dirs; "
    "retrying (the active controller's log says which)",
    ErrorCode.UNSUPPORTED_VERSION: "the cluster's finalized features are outside what this broker supports "
    "(kafka-features describe); retrying",
}


def error_name(code: int) -> str:
    known = ErrorCode.of(code)
    return known.name if known == code else f"error {code}"


def registration_refused(code: int) -> str:
    what = REGISTRATION_REFUSALS.get(code, "retrying (the active controller's log says why)")
    return f"{error_name(code)}: {what}"


def peer_failure(host: str, port: int, e: BaseException, timeout_s: float) -> str:
    """Why a request to host:port got no answer, as an operator would say it."""
    peer = f"{host}:{port}"
    if isinstance(e, (asyncio.IncompleteReadError, EOFError, ConnectionResetError, BrokenPipeError)):
        return f"{peer} closed the connection"
    if isinstance(e, ConnectionRefusedError):
        return f"{peer} refused the connection (nothing listening there)"
    if isinstance(e, TimeoutError):
        return f"{peer} did not answer within {timeout_s:g} s"
    if isinstance(e, DecodeError):
        return f"{peer} sent an answer that does not decode"
    if isinstance(e, OSError):
        reason = os.strerror(e.errno) if e.errno else "a network error"
        return f"{peer} cannot be reached: {reason}"
    return f"{peer} sent an answer that is not Kafka's: {e}"  # ValueError: this module's own words

"""ApiVersions through the proxy: the intersection of the upstream's ranges and the proxy's codec.

An API the proxy has no schema for is left out (the proxy could not tell whether its answers name
nodes); a version the proxy cannot decode is left out of every API whose answers it rewrites,
and of the others too, since the proxy only promises what it can read. A request newer than the
proxy's own ApiVersions is answered by the proxy, as Kafka answers it: UNSUPPORTED_VERSION in
v0, naming the versions it has.
"""

from __future__ import annotations

from typing import Any

from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages import APIS
from kcompat.wire.protocol import API_VERSIONS_KEY, decode_response, encode_response, response_codec


def intersect(body: Any) -> Any:
    """The upstream's ApiVersions answer, with its ranges cut to what the proxy speaks."""
    kept = []
    for entry in body.api_keys:
        spec = APIS.get(entry.api_key)
        if spec is None:
            continue
        low = max(entry.min_version, spec.versions.low)
        high = entry.max_version if spec.versions.high is None else min(entry.max_version, spec.versions.high)
        if low > high:
            continue
        entry.min_version, entry.max_version = low, high
        kept.append(entry)
    body.api_keys = kept
    return body


def proxy_range() -> tuple[int, int]:
    spec = APIS[API_VERSIONS_KEY].versions
    return spec.low, spec.high if spec.high is not None else spec.low


def too_new(api_version: int) -> bool:
    return api_version > proxy_range()[1]


def unsupported_answer(correlation_id: int) -> list[Any]:
    """UNSUPPORTED_VERSION in v0, listing the proxy's own ApiVersions range (KIP-511)."""
    codec = response_codec(API_VERSIONS_KEY)
    low, high = proxy_range()
    body = codec.build(
        {
            "error_code": ErrorCode.UNSUPPORTED_VERSION,
            "api_keys": [{"api_key": API_VERSIONS_KEY, "min_version": low, "max_version": high}],
        }
    )
    return encode_response(API_VERSIONS_KEY, 0, correlation_id, body)


def rewrite_api_versions(
    api_version: int,
    frame: bytes | bytearray | memoryview,
    upstream: dict[int, tuple[int, int]] | None = None,
) -> list[Any] | None:
    """The upstream's answer, intersected; None to relay it as received (an error answer, which
    Kafka writes in v0 whatever the request's version). `upstream` gets the upstream's own ranges."""
    if len(frame) < 6 or int.from_bytes(frame[4:6], "big", signed=True) != 0:
        return None
    correlation, body = decode_response(API_VERSIONS_KEY, api_version, frame)
    if upstream is not None:
        upstream.clear()
        upstream.update((k.api_key, (k.min_version, k.max_version)) for k in body.api_keys)
    return encode_response(API_VERSIONS_KEY, api_version, correlation, intersect(body))

"""One blocking connection to one broker.

On connect it sends ApiVersions (v3, falling back to the version the broker names when it answers
UNSUPPORTED_VERSION, as Kafka's clients do) and from then on every request goes out at the highest
version both sides declare: the broker's range from ApiVersions, ours from kcompat.wire.messages.
"""

from __future__ import annotations

import socket
import struct
from typing import Any

from kcompat.client.errors import CannotConnect, KafkaError
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages import APIS
from kcompat.wire.protocol import API_VERSIONS_KEY, decode_response, encode_request

_SIZE = struct.Struct(">i")
_MAX_FRAME = 256 * 1024 * 1024
CLIENT_SOFTWARE = "kcompat-cli"
# Versions past which a request or response names topics by id alone (Kafka 4.x): the tools name
# topics, so they stay below (every broker that offers v10 still offers v9).
CLIENT_MAX_VERSIONS = {8: 9, 9: 9}  # OffsetCommit, OffsetFetch


class Connection:
    """A socket to `host:port` that sends one request and reads its response at a time."""

    def __init__(
        self, host: str, port: int, *, timeout: float = 10.0, client_id: str = "kcompat-cli"
    ) -> None:
        self.host, self.port, self.client_id = host, port, client_id
        self.timeout = timeout
        try:
            self._sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as e:
            raise CannotConnect(f"cannot connect to {host}:{port}: {e.strerror or e}") from None
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._correlation = 0
        self.api_versions: dict[int, tuple[int, int]] = {}
        self.supported_features: list[Any] = []
        self.finalized_features: list[Any] = []
        self.finalized_features_epoch = -1
        self._negotiate()

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def _negotiate(self) -> None:
        version = 3  # v4 only adds answers for newer clients; v3 brings the features
        body = {"client_software_name": CLIENT_SOFTWARE, "client_software_version": "1"}
        answer = self._roundtrip(API_VERSIONS_KEY, version, body)
        if answer.error_code == ErrorCode.UNSUPPORTED_VERSION:
            # The broker answered in v0 and listed its own range for ApiVersions: retry within it.
            theirs = {k.api_key: k.max_version for k in answer.api_keys}
            version = min(version, theirs.get(API_VERSIONS_KEY, 0))
            answer = self._roundtrip(API_VERSIONS_KEY, version, body)
        if answer.error_code:
            raise KafkaError(answer.error_code, f"ApiVersions to {self.address}")
        self.api_versions = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
        self.supported_features = list(getattr(answer, "supported_features", None) or [])
        self.finalized_features = list(getattr(answer, "finalized_features", None) or [])
        self.finalized_features_epoch = getattr(answer, "finalized_features_epoch", -1)

    def version_for(self, api_key: int) -> int:
        """The highest version of `api_key` that both this client and the broker speak."""
        spec = APIS.get(api_key)
        theirs = self.api_versions.get(api_key)
        name = spec.name if spec else f"API {api_key}"
        if spec is None or theirs is None:
            raise KafkaError(
                ErrorCode.UNSUPPORTED_VERSION, f"{name} on {self.address}", "the broker does not offer it"
            )
        ours = spec.versions
        ours_high = theirs[1] if ours.high is None else ours.high
        ours_high = min(ours_high, CLIENT_MAX_VERSIONS.get(api_key, ours_high))
        low, high = max(ours.low, theirs[0]), min(ours_high, theirs[1])
        if low > high:
            raise KafkaError(
                ErrorCode.UNSUPPORTED_VERSION,
                f"{name} on {self.address}",
                f"broker speaks {theirs[0]}-{theirs[1]}, this client {ours.low}-{ours_high}",
            )
        return high

    def request(self, api_key: int, body: Any, version: int | None = None) -> tuple[int, Any]:
        """(version used, decoded response body)."""
        v = self.version_for(api_key) if version is None else version
        return v, self._roundtrip(api_key, v, body)

    def send_only(self, api_key: int, body: Any, version: int | None = None) -> int:
        """A request that gets no response (Produce with acks=0); the version used."""
        v = self.version_for(api_key) if version is None else version
        self._correlation += 1
        self._send(encode_request(api_key, v, self._correlation, body, self.client_id))
        return v

    def _send(self, frame: bytes) -> None:
        try:
            self._sock.sendall(frame)
        except OSError as e:
            raise CannotConnect(f"lost the connection to {self.address}: {e.strerror or e}") from None

    def _roundtrip(self, api_key: int, version: int, body: Any) -> Any:
        self._correlation += 1
        correlation = self._correlation
        self._send(encode_request(api_key, version, correlation, body, self.client_id))
        size = _SIZE.unpack(self._recv(4))[0]
        if size < 4 or size > _MAX_FRAME:
            raise CannotConnect(f"{self.address} sent a frame of {size} bytes")
        answered, decoded = decode_response(api_key, version, self._recv(size))
        if answered != correlation:
            raise CannotConnect(f"{self.address} answered correlation id {answered}, expected {correlation}")
        return decoded

    def _recv(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            try:
                chunk = self._sock.recv(min(n - len(buf), 1 << 20))
            except TimeoutError:
                raise CannotConnect(f"{self.address} did not answer within {self.timeout:g} s") from None
            except OSError as e:
                raise CannotConnect(f"lost the connection to {self.address}: {e.strerror or e}") from None
            if not chunk:
                raise CannotConnect(f"{self.address} closed the connection")
            buf += chunk
        return bytes(buf)

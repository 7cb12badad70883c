"""One blocking connection to one broker.

On connect it sends ApiVersions (v3, falling back to the version the broker names when it answers
UNSUPPORTED_VERSION, as Kafka's clients do) and from then on every request goes out at the highest
version both sides declare: the broker's range from ApiVersions, ours from kcompat.wire.messages.
"""

from __future__ import annotations

import socket
import ssl
import struct
from typing import Any

from kcompat.client.errors import CannotConnect, KafkaError
from kcompat.client.security import (
    ClientSecurity,
    ScramClient,
    oauthbearer_message,
    plain_message,
    unsecured_jwt,
    wrap,
)
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages import APIS
from kcompat.wire.protocol import API_VERSIONS_KEY, decode_response, encode_request

_SIZE = struct.Struct(">i")
_MAX_FRAME = 256 * 1024 * 1024
CLIENT_SOFTWARE = "kcompat-cli"
# Versions past which a request or response names topics by id alone (Kafka 4.x): the tools name
# topics, so they stay below (every broker that offers v10 still offers v9).
CLIENT_MAX_VERSIONS = {8: 9, 9: 9}  # OffsetCommit, OffsetFetch
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
PLAINTEXT = ClientSecurity()


class Connection:
    """A socket to `host:port` that sends one request and reads its response at a time."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        timeout: float = 10.0,
        client_id: str = "kcompat-cli",
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        self.host, self.port, self.client_id = host, port, client_id
        self.timeout = timeout
        self.security = security
        try:
            sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as e:
            raise CannotConnect(f"cannot connect to {host}:{port}: {e.strerror or e}") from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock = sock
        if security.tls:
            self._sock = self._tls(sock)
        self._correlation = 0
        self.api_versions: dict[int, tuple[int, int]] = {}
        self.supported_features: list[Any] = []
        self.finalized_features: list[Any] = []
        self.finalized_features_epoch = -1
        try:
            self._negotiate()
            if security.sasl_mechanism:
                self._authenticate()
        except BaseException:
            self._sock.close()
            raise

    def _tls(self, sock: socket.socket) -> socket.socket:
        try:
            return wrap(sock, self.host, self.security)
        except ssl.SSLCertVerificationError as e:
            sock.close()
            raise CannotConnect(
                f"TLS to {self.address}: the broker's certificate was not accepted ({e.verify_message}); "
                "give the CA that signed it with --cacert (-X tls.ca=PATH)"
            ) from None
        except (ssl.SSLError, OSError) as e:
            sock.close()
            reason = getattr(e, "reason", None) or e.strerror or "handshake failed"
            raise CannotConnect(
                f"TLS to {self.address} failed ({reason}); is it a PLAINTEXT or SASL_PLAINTEXT listener? "
                "then drop --tls"
            ) from None

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

    def _authenticate(self) -> None:
        """SaslHandshake v1, then SaslAuthenticate until the mechanism is done (Kafka's order)."""
        sec = self.security
        mechanism = (sec.sasl_mechanism or "").upper()
        _, answer = self.request(SASL_HANDSHAKE, {"mechanism": mechanism}, 1)
        if answer.error_code:
            raise KafkaError(
                answer.error_code,
                f"SASL to {self.address}",
                f"the listener offers {', '.join(answer.mechanisms) or 'no mechanism'}; "
                "pick one with --sasl-mechanism",
            )
        user, password = sec.user or "", sec.password or ""
        if mechanism == "PLAIN":
            self._sasl_round(plain_message(user, password))
        elif mechanism.startswith("SCRAM-"):
            scram = ScramClient(mechanism, user, password)
            challenge = self._sasl_round(scram.first())
            try:
                final = scram.final(challenge)
            except ValueError as e:
                raise CannotConnect(f"SASL to {self.address}: {e}") from None
            if not scram.verify(self._sasl_round(final)):
                raise CannotConnect(f"SASL to {self.address}: the broker's SCRAM signature is wrong")
        elif mechanism == "OAUTHBEARER":
            self._sasl_round(oauthbearer_message(sec.token or unsecured_jwt(user)))
        else:
            raise KafkaError(
                ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                f"SASL to {self.address}",
                f"this client does not know {mechanism}",
            )

    def _sasl_round(self, token: bytes) -> bytes:
        _, answer = self.request(SASL_AUTHENTICATE, {"auth_bytes": token})
        if answer.error_code:
            raise KafkaError(
                answer.error_code,
                f"SASL {self.security.sasl_mechanism} to {self.address}",
                (answer.error_message or "") + "; check --user/--password (-X user=, -X pass=)",
            )
        return bytes(answer.auth_bytes or b"")

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
            if not self.security.tls and (size >> 24) in (0x15, 0x16) and (size >> 16) & 0xFF == 0x03:
                # A TLS record (alert or handshake, version 3.x) where a Kafka frame size should be.
                raise CannotConnect(
                    f"{self.address} answered in TLS: it is an SSL or SASL_SSL listener; connect with --tls "
                    "(and --cacert PEM unless its certificate is signed by a CA this system trusts)"
                )
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
                raise CannotConnect(
                    f"{self.address} did not answer within {self.timeout:g} s{self._hint()}"
                ) from None
            except OSError as e:
                raise CannotConnect(f"lost the connection to {self.address}: {e.strerror or e}") from None
            if not chunk:
                raise CannotConnect(f"{self.address} closed the connection{self._hint()}")
            buf += chunk
        return bytes(buf)

    def _hint(self) -> str:
        """Why a listener may hang up on us: it wants security this connection does not offer."""
        sec = self.security
        if not sec.tls and not sec.sasl_mechanism:
            return (
                "; if the listener is SASL or TLS, connect with --sasl-mechanism/--user/--password "
                "and/or --tls (or a profile: kcompat profile create)"
            )
        if not sec.sasl_mechanism:
            return "; if the listener is SASL_SSL, add --sasl-mechanism, --user and --password"
        return ""

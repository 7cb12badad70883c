"""How the tools reach a secured listener: TLS (server verification, client certificates for mTLS)
and SASL PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER (an unsecured JWT, what Kafka's default
login callback makes), each run as Kafka's clients run it: ApiVersions, SaslHandshake v1, then
SaslAuthenticate rounds carrying the mechanism's bytes.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import socket
import ssl
import time
from dataclasses import dataclass

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    """What a connection needs to pass a listener's security; the default is PLAINTEXT."""

    tls: bool = False
    ca: str | None = None  # PEM file of the CAs to trust (default: the system's)
    cert: str | None = None  # PEM client certificate, for mTLS
    key: str | None = None  # its PEM private key (default: inside `cert`)
    insecure_skip_verify: bool = False
    sasl_mechanism: str | None = None
    user: str | None = None
    password: str | None = None
    token: str | None = None  # OAUTHBEARER: a ready token; else an unsecured JWT for `user`

    @property
    def protocol(self) -> str:
        """Kafka's security.protocol name for these settings."""
        if self.sasl_mechanism:
            return "SASL_SSL" if self.tls else "SASL_PLAINTEXT"
        return "SSL" if self.tls else "PLAINTEXT"


def tls_context(sec: ClientSecurity) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=sec.ca)
    if sec.insecure_skip_verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if sec.cert:
        ctx.load_cert_chain(sec.cert, sec.key)
    return ctx


def wrap(sock: socket.socket, host: str, sec: ClientSecurity) -> socket.socket:
    return tls_context(sec).wrap_socket(sock, server_hostname=host)


def _escape_user(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


class ScramClient:
    """RFC 5802's client side: first(), then final(server_first), then verify(server_final)."""

    def __init__(self, mechanism: str, user: str, password: str, nonce: str | None = None) -> None:
        self._hash = "sha256" if mechanism == "SCRAM-SHA-256" else "sha512"
        self._password = password.encode()
        self._nonce = nonce or base64.b64encode(os.urandom(24)).decode()
        self._first_bare = f"n={_escape_user(user)},r={self._nonce}"
        self._server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self._first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode()
        fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        nonce, salt, iterations = fields.get("r", ""), fields.get("s", ""), fields.get("i", "0")
        if not nonce.startswith(self._nonce) or not salt or not iterations.isdigit():
            raise ValueError("the broker's SCRAM challenge is malformed")
        salted = hashlib.pbkdf2_hmac(self._hash, self._password, base64.b64decode(salt), int(iterations))
        without_proof = f"c=biws,r={nonce}"
        auth = f"{self._first_bare},{text},{without_proof}".encode()
        client_key = hmac.digest(salted, b"Client Key", self._hash)
        signature = hmac.digest(hashlib.new(self._hash, client_key).digest(), auth, self._hash)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = hmac.digest(salted, b"Server Key", self._hash)
        self._server_signature = hmac.digest(server_key, auth, self._hash)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> bool:
        text = server_final.decode(errors="replace")
        if not text.startswith("v="):
            return False
        return hmac.compare_digest(base64.b64decode(text[2:].split(",")[0]), self._server_signature)


def unsecured_jwt(principal: str, lifetime_s: int = 3600, now: float | None = None) -> str:
    """An unsigned JWT ('alg': 'none') as Kafka's OAuthBearerUnsecuredLoginCallbackHandler makes."""

    def part(value: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    issued = int(time.time() if now is None else now)
    return f"{part({'alg': 'none'})}.{part({'sub': principal, 'iat': issued, 'exp': issued + lifetime_s})}."


def oauthbearer_message(token: str) -> bytes:
    """RFC 7628's client initial response."""
    return f"n,,\x01auth=Bearer {token}\x01\x01".encode()


def plain_message(user: str, password: str) -> bytes:
    return f"\x00{user}\x00{password}".encode()

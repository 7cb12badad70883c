"""TLS for a listener: the server SSLContext built from Kafka's ssl.* settings, and the principal
of a client certificate (ssl.principal.mapping.rules, KIP-371).

    server_context(settings) -> ssl.SSLContext   (ConfigError: one line naming the setting)
    PrincipalMapper(rules).name(dn) -> "alice"   (the principal is then User:alice)

Keystores: PEM (a file holding the private key and the certificate chain, or the inline
ssl.keystore.key / ssl.keystore.certificate.chain) and PKCS12 (read with `cryptography`; stdlib
ssl reads neither PKCS12 nor in-memory keys, so the key is handed to OpenSSL through a file
readable by this process only, removed at once). JKS is refused at config load.
"""

from __future__ import annotations

import contextlib
import os
import re
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from kcompat.config.errors import ConfigError
from kcompat.server.network.tls_socket import TlsSocket

if TYPE_CHECKING:  # a TLS listener's settings: kcompat.config.security is loaded only for one
    from kcompat.config.security import SslSettings

_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


def _read(path: str, key: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise ConfigError(f"{key}={path!r} cannot be read: {e.strerror or e}", key=key, value=path) from None


def _password(value: str | None) -> bytes | None:
    return value.encode() if value is not None else None


def _is_pem(data: bytes) -> bool:
    return b"-----BEGIN" in data[:4096]


@contextlib.contextmanager
def _private_file(data: bytes) -> Iterator[str]:
    import tempfile  # TLS with in-line PEM only: tempfile loads shutil, random

    fd, name = tempfile.mkstemp(prefix="kcompat-tls-", suffix=".pem")  # mode 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        yield name
    finally:
        os.unlink(name)


def _keystore_pem(s: SslSettings) -> tuple[bytes, bytes | None]:
    """(the certificate chain and key as PEM, the key's password)."""
    # cryptography (~13 MB resident) is loaded only by TLS listeners, never on a PLAINTEXT broker
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    if s.keystore_certificate_chain is not None:
        assert s.keystore_key is not None
        return (s.keystore_key + "\n" + s.keystore_certificate_chain + "\n").encode(), _password(
            s.key_password
        )
    assert s.keystore_location is not None
    data = _read(s.keystore_location, "ssl.keystore.location")
    kind = s.keystore_type or ("PEM" if _is_pem(data) else "PKCS12")
    if kind == "PEM":
        return data, _password(s.key_password)
    try:
        key, cert, extra = pkcs12.load_key_and_certificates(data, _password(s.keystore_password))
    except ValueError as e:
        raise ConfigError(
            f"ssl.keystore.location={s.keystore_location!r} is not a PKCS12 keystore this password opens: {e}",
            key="ssl.keystore.location",
        ) from None
    if key is None or cert is None:
        raise ConfigError(
            f"ssl.keystore.location={s.keystore_location!r} holds no private key and certificate",
            key="ssl.keystore.location",
        )
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    for c in (cert, *extra):
        pem += c.public_bytes(serialization.Encoding.PEM)
    return pem, None


def _truststore_pem(s: SslSettings) -> str | None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    if s.truststore_certificates is not None:
        return s.truststore_certificates
    if s.truststore_location is None:
        return None
    data = _read(s.truststore_location, "ssl.truststore.location")
    if (s.truststore_type or ("PEM" if _is_pem(data) else "PKCS12")) == "PEM":
        return data.decode("ascii", "replace")
    try:
        certs = pkcs12.load_pkcs12(data, _password(s.truststore_password))
    except ValueError as e:
        raise ConfigError(
            f"ssl.truststore.location={s.truststore_location!r} cannot be opened: {e}",
            key="ssl.truststore.location",
        ) from None
    found = [c.certificate for c in certs.additional_certs] + ([certs.cert.certificate] if certs.cert else [])
    return "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in found)


def _openssl_cipher(name: str) -> str:
    """Kafka's (IANA/JSSE) suite names to OpenSSL's; OpenSSL names pass through unchanged."""
    m = re.fullmatch(
        r"TLS_(ECDHE|DHE)_(RSA|ECDSA)_WITH_(AES_128|AES_256|CHACHA20)_(GCM|POLY1305)_(SHA256|SHA384)", name
    )
    if m is None:
        return name
    kx, auth, enc, _mode, mac = m.groups()
    prefix = ("ECDHE-" if kx == "ECDHE" else "DHE-") + ("ECDSA-" if auth == "ECDSA" else "RSA-")
    if enc == "CHACHA20":
        return prefix + "CHACHA20-POLY1305"
    return prefix + enc.replace("_", "") + "-GCM-" + mac


def server_context(s: SslSettings) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    versions = sorted(_VERSIONS[p] for p in s.enabled_protocols)
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    pem, key_password = _keystore_pem(s)
    with _private_file(pem) as path:
        try:
            ctx.load_cert_chain(path, password=key_password)
        except ssl.SSLError as e:
            raise ConfigError(
                f"the listener's keystore cannot be used: {e.reason or e} (check ssl.key.password)",
                key="ssl.keystore.location",
            ) from None
    ctx.verify_mode = _CLIENT_AUTH[s.client_auth]
    trusted = _truststore_pem(s)
    try:
        if trusted is not None:
            ctx.load_verify_locations(cadata=trusted)
        elif s.client_auth != "none":
            ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    except ssl.SSLError as e:
        raise ConfigError(
            f"the listener's truststore cannot be used: {e.reason or e}", key="ssl.truststore.location"
        ) from None
    if s.cipher_suites:
        try:
            ctx.set_ciphers(":".join(_openssl_cipher(c) for c in s.cipher_suites))
        except ssl.SSLError:
            raise ConfigError(
                f"ssl.cipher.suites names no suite OpenSSL offers: {', '.join(s.cipher_suites)}",
                key="ssl.cipher.suites",
            ) from None
    ctx.options |= ssl.OP_NO_RENEGOTIATION
    return ctx


def handshake_step(sock: TlsSocket) -> tuple[bool, bool]:
    """Advance a non-blocking handshake: (wants readable, wants writable); both False when done."""
    try:
        sock.do_handshake()
    except ssl.SSLWantReadError:
        return True, False
    except ssl.SSLWantWriteError:
        return False, True
    return False, False


def subject_dn(der: bytes) -> str:
    """The certificate's subject as Java's X500Principal.getName() gives it (RFC 2253)."""
    from cryptography import x509

    return x509.load_der_x509_certificate(der).subject.rfc4514_string()


# RULE:pattern/replacement/[LU], or DEFAULT (KIP-371's SslPrincipalMapper).
_RULE = re.compile(r"\s*(?:(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?))\s*(?:,|$)")


class PrincipalMapper:
    def __init__(self, rules: str) -> None:
        self._rules: list[tuple[re.Pattern[str], str, str] | None] = []  # None: DEFAULT
        pos, text = 0, rules.strip()
        while pos < len(text):
            m = _RULE.match(text, pos)
            if m is None or m.end() == pos:
                raise ConfigError(
                    f"ssl.principal.mapping.rules is invalid near {text[pos : pos + 30]!r}",
                    key="ssl.principal.mapping.rules",
                    value=rules,
                )
            if m.group(1):
                self._rules.append(None)
            else:
                try:
                    pattern = re.compile(m.group(2))
                except re.error as e:
                    raise ConfigError(
                        f"ssl.principal.mapping.rules: bad pattern {m.group(2)!r}: {e}",
                        key="ssl.principal.mapping.rules",
                    ) from None
                # Java's $1 becomes Python's \g<1>
                replacement = re.sub(r"\$(\d+)", r"\\g<\1>", m.group(3))
                self._rules.append((pattern, replacement, m.group(4)))
            pos = m.end()

    def name(self, dn: str) -> str:
        for rule in self._rules:
            if rule is None:
                return dn
            pattern, replacement, case = rule
            if pattern.fullmatch(dn):
                out = pattern.sub(replacement, dn, count=1)
                return out.lower() if case == "L" else out.upper() if case == "U" else out
        return dn  # no rule matched: Kafka keeps the DN too

"""TLS on the Reactor over real sockets (asyncio's loop and uvloop): handshakes stepped on
readiness, the mTLS principal, keystore forms, and hostile peers that must cost nobody else."""

from __future__ import annotations

import logging
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from kcompat.config import ConfigError
from kcompat.config.listeners import Listener
from kcompat.config.security import SslSettings
from kcompat.log.log_file import FetchSlice, FilePiece, LogFile
from kcompat.server.network.listeners import ListenerTransport, certificate_principal
from kcompat.server.network.sendfile import STATS
from kcompat.server.network.tls import PrincipalMapper, server_context
from kcompat.testing import closed_by_peer
from tests.server.harness import ServerThread, pattern, recv_response, request

pytestmark = pytest.mark.timeout(30)

LOOPS = ["asyncio", "uvloop"]


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def server_cert(ca: trustme.CA) -> trustme.LeafCert:
    return ca.issue_cert("localhost", "127.0.0.1")


@pytest.fixture(scope="module")
def pem_files(
    tmp_path_factory: pytest.TempPathFactory, ca: trustme.CA, server_cert: trustme.LeafCert
) -> Path:
    d = tmp_path_factory.mktemp("tls")
    ca.cert_pem.write_to_path(str(d / "ca.pem"))
    server_cert.private_key_and_cert_chain_pem.write_to_path(str(d / "server.pem"))
    return d


def settings(**kw: Any) -> SslSettings:
    base: dict[str, Any] = dict(
        keystore_type=None,
        keystore_location=None,
        keystore_password=None,
        key_password=None,
        keystore_certificate_chain=None,
        keystore_key=None,
        truststore_type=None,
        truststore_location=None,
        truststore_password=None,
        truststore_certificates=None,
        client_auth="none",
        enabled_protocols=("TLSv1.2", "TLSv1.3"),
        cipher_suites=(),
        principal_mapping_rules="DEFAULT",
    )
    base.update(kw)
    return SslSettings(**base)


@pytest.fixture(params=LOOPS)
def start(request: pytest.FixtureRequest, pem_files: Path) -> Iterator[Any]:
    servers: list[ServerThread] = []

    def factory(**ssl_kw: Any) -> ServerThread:
        s = settings(
            keystore_location=str(pem_files / "server.pem"),
            truststore_location=str(pem_files / "ca.pem"),
            **ssl_kw,
        )
        transport = ListenerTransport(
            server_context(s), certificate_principal(PrincipalMapper(s.principal_mapping_rules))
        )
        server = ServerThread(
            request.param, listener=Listener("SSL", "127.0.0.1", 0, "SSL"), transports={"SSL": transport}
        )
        servers.append(server)
        return server

    yield factory
    for server in servers:
        server.stop()


def client_context(ca: trustme.CA, cert: trustme.LeafCert | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ca.configure_trust(ctx)
    if cert is not None:
        cert.configure_cert(ctx)
    return ctx


def tls_connect(server: ServerThread, ctx: ssl.SSLContext) -> ssl.SSLSocket:
    raw = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    return ctx.wrap_socket(raw, server_hostname="127.0.0.1")


def test_requests_over_tls_in_order_large_and_pipelined(start: Any, ca: trustme.CA) -> None:
    server = start()
    with tls_connect(server, client_context(ca)) as s:
        s.sendall(request(1, "echo:hello"))
        assert recv_response(s) == (1, b"hello")
        # large answers (many TLS records, writes OpenSSL must retry) and pipelined small ones
        s.sendall(request(2, "big:3000000") + b"".join(request(3 + i, f"echo:{i}") for i in range(50)))
        assert recv_response(s) == (2, pattern(3_000_000))
        assert [recv_response(s) for _ in range(50)] == [(3 + i, str(i).encode()) for i in range(50)]
    assert server.broker.principals[0] == "User:ANONYMOUS"  # no client certificate


def test_file_slices_are_copied_under_tls(start: Any, ca: trustme.CA, tmp_path: Path) -> None:
    data = pattern(700_000)
    log_file = LogFile(tmp_path / "00000000000000000000.log")
    log_file.append(b"x" * 1000 + data)
    server = start()
    server.broker.slice = FetchSlice((FilePiece(log_file, 1000, 600_000),), 0)
    del log_file
    STATS.reset()
    with tls_connect(server, client_context(ca)) as s:
        s.sendall(request(7, "file") + request(8, "echo:after"))
        assert recv_response(s) == (7, b"<" + data[:600_000] + b">")
        assert recv_response(s) == (8, b"after")
    # never os.sendfile on a TLS socket: the kernel would send the file's bytes in the clear
    assert STATS.sendfile_bytes == 0 and STATS.fallback_bytes == 600_000


def test_client_certificate_gives_the_mapped_principal(start: Any, ca: trustme.CA) -> None:
    server = start(client_auth="required", principal_mapping_rules="RULE:^CN=([^,]+),.*$/$1/L,DEFAULT")
    client = ca.issue_cert(common_name="Alice Client", organization_name="kcompat")
    with tls_connect(server, client_context(ca, client)) as s:
        s.sendall(request(1, "echo:x"))
        assert recv_response(s) == (1, b"x")
    assert server.broker.principals == ["User:alice client"]


def test_required_client_auth_refuses_a_client_without_certificate(
    start: Any, ca: trustme.CA, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kcompat.server")
    server = start(client_auth="required")
    # TLS 1.3: the server's verdict comes after the client's handshake is done
    with tls_connect(server, client_context(ca)) as s, pytest.raises((ssl.SSLError, ConnectionError)):
        s.sendall(request(1, "echo:x"))
        recv_response(s)
    assert server.broker.principals == []
    server.wait_for(lambda: not server.reactor.connections)
    lines = [r.getMessage() for r in caplog.records if "TLS handshake failed" in r.getMessage()]
    assert len(lines) == 1 and "CERTIFICATE" in lines[0]


def test_stalled_handshake_and_garbage_cost_nobody_else(
    start: Any, ca: trustme.CA, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kcompat.server")
    server = start()
    # Half a ClientHello: a TLS record header announcing 512 bytes, then 20 of them, then silence.
    stalled = [socket.create_connection(("127.0.0.1", server.port), timeout=5) for _ in range(20)]
    for s in stalled:
        s.sendall(bytes([0x16, 0x03, 0x01, 0x02, 0x00]) + b"\x01" * 20)
    garbage = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    garbage.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    try:
        ctx = client_context(ca)
        took = []
        for i in range(5):
            t0 = time.monotonic()
            with tls_connect(server, ctx) as s:
                s.sendall(request(i, "echo:ok"))
                assert recv_response(s) == (i, b"ok")
            took.append(time.monotonic() - t0)
        print(f"TLS connect + round trip while 20 handshakes stall: median {sorted(took)[2] * 1000:.1f} ms")
        assert max(took) < 2.0
        assert closed_by_peer(garbage)
        assert all(not closed_by_peer(s, timeout=0.05) for s in stalled)  # still waiting, harming no one
    finally:
        garbage.close()
        for s in stalled:
            s.close()
    lines = [r.getMessage() for r in caplog.records if "TLS handshake failed" in r.getMessage()]
    assert len(lines) == 1, lines  # the garbage connection: one line


def test_keystore_forms(
    pem_files: Path, ca: trustme.CA, server_cert: trustme.LeafCert, tmp_path: Path
) -> None:
    key = serialization.load_pem_private_key(server_cert.private_key_pem.bytes(), None)
    cert = x509.load_pem_x509_certificate(server_cert.cert_chain_pems[0].bytes())
    p12 = tmp_path / "server.p12"
    p12.write_bytes(
        pkcs12.serialize_key_and_certificates(
            b"k", key, cert, None, serialization.BestAvailableEncryption(b"storepw")
        )
    )  # type: ignore[arg-type]
    server_context(settings(keystore_location=str(p12), keystore_password="storepw"))
    server_context(settings(keystore_location=str(p12), keystore_type="PKCS12", keystore_password="storepw"))
    with pytest.raises(ConfigError, match="not a PKCS12 keystore this password opens"):
        server_context(settings(keystore_location=str(p12), keystore_password="wrong"))
    inline = settings(
        keystore_certificate_chain=server_cert.cert_chain_pems[0].bytes().decode(),
        keystore_key=server_cert.private_key_pem.bytes().decode(),
        truststore_certificates=ca.cert_pem.bytes().decode(),
        client_auth="requested",
    )
    assert server_context(inline).verify_mode == ssl.CERT_OPTIONAL
    with pytest.raises(ConfigError, match=r"ssl\.keystore\.location='/nope\.pem' cannot be read"):
        server_context(settings(keystore_location="/nope.pem"))
    only13 = server_context(
        settings(keystore_location=str(pem_files / "server.pem"), enabled_protocols=("TLSv1.3",))
    )
    assert only13.minimum_version == ssl.TLSVersion.TLSv1_3
    suites = server_context(
        settings(
            keystore_location=str(pem_files / "server.pem"),
            cipher_suites=("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",),
        )
    )
    assert "ECDHE-ECDSA-AES256-GCM-SHA384" in {c["name"] for c in suites.get_ciphers()}
    with pytest.raises(ConfigError, match=r"ssl\.cipher\.suites names no suite"):
        server_context(settings(keystore_location=str(pem_files / "server.pem"), cipher_suites=("NO_SUCH",)))


@pytest.mark.parametrize(
    ("rules", "dn", "name"),
    [
        ("DEFAULT", "CN=alice,O=kcompat", "CN=alice,O=kcompat"),
        ("RULE:^CN=(.*?),O=(.*)$/$1@$2/", "CN=alice,O=kcompat", "alice@kcompat"),
        ("RULE:^CN=(.*?),.*$/$1/U, DEFAULT", "CN=alice,O=kcompat", "ALICE"),
        ("RULE:^CN=bob$/robert/,DEFAULT", "CN=alice,O=kcompat", "CN=alice,O=kcompat"),  # no match: DEFAULT
    ],
)
def test_principal_mapping_rules(rules: str, dn: str, name: str) -> None:
    assert PrincipalMapper(rules).name(dn) == name


def test_bad_principal_mapping_rule() -> None:
    with pytest.raises(ConfigError, match=r"ssl\.principal\.mapping\.rules is invalid"):
        PrincipalMapper("RULE:nope")

"""TlsSocket on a socket pair, its client side driven by hand (ssl.SSLObject over memory buffers),
so the test decides how TLS records and TCP segments line up."""

from __future__ import annotations

import select
import socket
import ssl
from collections.abc import Iterator

import pytest
import trustme

from kcompat.server.network.tls_socket import TlsSocket

pytestmark = pytest.mark.timeout(30)


@pytest.fixture(scope="module")
def contexts() -> tuple[ssl.SSLContext, ssl.SSLContext]:
    ca = trustme.CA()
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("127.0.0.1").configure_cert(server)
    client = ssl.create_default_context()
    ca.configure_trust(client)
    return server, client


class Client:
    """A TLS client whose ciphertext goes out only when `flush` says so, in one send."""

    def __init__(self, sock: socket.socket, ctx: ssl.SSLContext) -> None:
        self.sock = sock
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.obj = ctx.wrap_bio(self.incoming, self.outgoing, server_hostname="127.0.0.1")

    def flush(self) -> None:
        self.sock.sendall(self.outgoing.read())

    def feed(self) -> None:
        select.select([self.sock], [], [], 5)
        self.incoming.write(self.sock.recv(1 << 20))


@pytest.fixture
def pair(contexts: tuple[ssl.SSLContext, ssl.SSLContext]) -> Iterator[tuple[TlsSocket, Client]]:
    a, b = socket.socketpair()
    b.settimeout(5)
    server, client = TlsSocket(a, contexts[0]), Client(b, contexts[1])
    yield server, client
    server.close()
    b.close()


def server_step(server: TlsSocket) -> bool:
    """One handshake step of the server; True once done."""
    try:
        server.do_handshake()
    except ssl.SSLWantReadError:
        return False
    return True


def handshake(server: TlsSocket, client: Client, *, hold_last_flight: bool) -> None:
    """Both sides' handshake; with `hold_last_flight` the client's last flight is not sent yet."""
    while True:
        try:
            client.obj.do_handshake()
            break
        except ssl.SSLWantReadError:
            client.flush()
            while not server_step(server) and not select.select([client.sock], [], [], 0.05)[0]:
                pass
            client.feed()
    if not hold_last_flight:
        client.flush()
        while not server_step(server):
            select.select([server], [], [], 5)


def read_all(server: TlsSocket, size: int) -> tuple[bytes, int]:
    """`size` plaintext bytes and the count of recv_into calls that gave some."""
    buf, got, calls = bytearray(size), 0, 0
    view = memoryview(buf)
    while got < size:
        try:
            n = server.recv_into(view[got:])
        except ssl.SSLWantReadError:
            select.select([server], [], [], 5)
            continue
        assert n, "EOF before the data"
        got += n
        calls += 1
    return bytes(buf), calls


def test_many_small_records_are_read_in_one_call(pair: tuple[TlsSocket, Client]) -> None:
    server, client = pair
    handshake(server, client, hold_last_flight=False)
    chunks = [bytes([i]) * 1000 for i in range(60)]  # 60 TLS records, as a client's many small writes
    for c in chunks:
        client.obj.write(c)
    client.flush()  # all in one segment: one receive, then all records decrypted in the same call
    data, calls = read_all(server, 60_000)
    assert data == b"".join(chunks)
    assert calls == 1


def test_a_full_buffer_leaves_the_rest_pending(pair: tuple[TlsSocket, Client]) -> None:
    server, client = pair
    handshake(server, client, hold_last_flight=False)
    for i in range(10):
        client.obj.write(bytes([i]) * 1000)
    client.flush()
    select.select([server], [], [], 5)
    buf = memoryview(bytearray(2500))
    assert server.recv_into(buf) == 2500
    assert server.pending()  # the poller will not say so: the bytes are already out of the socket
    data, _ = read_all(server, 7500)
    assert bytes(buf) + data == b"".join(bytes([i]) * 1000 for i in range(10))
    assert not server.pending()


def test_a_request_that_came_with_the_last_handshake_flight(pair: tuple[TlsSocket, Client]) -> None:
    server, client = pair
    handshake(server, client, hold_last_flight=True)
    client.obj.write(b"first request")
    client.flush()  # the client's Finished and its first record in one segment
    select.select([server], [], [], 5)
    assert server_step(server)
    assert server.pending()  # so the connection reads it although the socket is drained
    assert read_all(server, 13)[0] == b"first request"


def test_close_notify_reads_as_eof_and_answers_are_sent(pair: tuple[TlsSocket, Client]) -> None:
    server, client = pair
    handshake(server, client, hold_last_flight=False)
    assert server.send(b"answer" * 10_000) == 60_000
    got = b""
    while len(got) < 60_000:
        try:
            got += client.obj.read(1 << 20)
        except ssl.SSLWantReadError:
            client.feed()
    assert got == b"answer" * 10_000
    with pytest.raises(ssl.SSLWantReadError):
        client.obj.unwrap()
    client.flush()
    select.select([server], [], [], 5)
    assert server.recv_into(memoryview(bytearray(100))) == 0


def test_garbage_handshake_sends_an_alert_and_raises(pair: tuple[TlsSocket, Client]) -> None:
    server, client = pair
    client.sock.sendall(b"\x16\x03\x01\x00\x05hello")  # a handshake record that is no ClientHello
    with pytest.raises(ssl.SSLError) as e:
        for _ in range(10):
            select.select([server], [], [], 5)
            server_step(server)
    assert not isinstance(e.value, ssl.SSLWantReadError | ssl.SSLWantWriteError)
    assert client.sock.recv(100)[:1] == b"\x15"  # a TLS alert record, as OpenSSL's socket path sends

"""A server-side TLS connection over a non-blocking socket, with OpenSSL working on memory buffers.

    TlsSocket(raw_socket, context)   # then do_handshake / recv_into / send, as an ssl.SSLSocket

Why not ssl.SSLSocket: its socket BIO reads a TLS record's 5-byte header and then its body with a
read() each, with no read-ahead (Python's ssl cannot turn it on), and it hands out one record per
call. Clients write records as small as their write calls: librdkafka's produce requests arrive
as records of ~3 KiB, so a 1 KiB-record produce cost ~700 read syscalls, ~350 poller wake-ups and
as many Python callbacks per MB, ~4x what the decryption itself costs. Here (as Kafka's
SslTransportLayer does with its network buffer) one recv takes up to `RECEIVE` bytes of
ciphertext, and recv_into decrypts as many records as the caller's buffer takes in one call.

The methods keep ssl.SSLSocket's non-blocking contract, so the connection and the ChunkWriter
treat both alike: SSLWantReadError / SSLWantWriteError when the socket is not ready, and a send
that could not finish is retried with the same bytes (it then reports them sent once the
ciphertext it made has gone out). 0 from recv_into: the peer closed (close_notify or a bare EOF).
"""

from __future__ import annotations

import contextlib
import socket
import ssl
from typing import cast

RECEIVE = 256 << 10  # ciphertext taken from the socket per receive, at most


class TlsSocket:
    __slots__ = ("_backlog", "_eof", "_in", "_more", "_out", "_owed", "_raw", "_ssl")

    def __init__(self, raw: socket.socket, context: ssl.SSLContext) -> None:
        raw.setblocking(False)
        self._raw = raw
        self._in = ssl.MemoryBIO()
        self._out = ssl.MemoryBIO()
        self._ssl = context.wrap_bio(self._in, self._out, server_side=True)
        # ciphertext made but not yet taken by the socket (a view: short sends copy nothing)
        self._backlog = memoryview(b"")
        self._owed = 0  # plaintext bytes of a send whose ciphertext is in the backlog
        self._eof = False  # the socket said EOF, or the peer's close_notify came
        self._more = False  # ciphertext may be decryptable that no socket readiness will announce

    def fileno(self) -> int:
        return self._raw.fileno()

    def setblocking(self, flag: bool) -> None:
        self._raw.setblocking(flag)

    def close(self) -> None:
        self._raw.close()

    def getpeercert(self, binary_form: bool = True) -> bytes | None:
        """The client's certificate, DER (the only form asked for)."""
        return self._ssl.getpeercert(True)

    def pending(self) -> bool:
        """Whether plaintext may be ready that the socket will not signal: the last read stopped
        because its buffer was full, or the client's first request came with its last handshake
        flight."""
        return self._more

    # -- handshake --------------------------------------------------------------------------------

    def do_handshake(self) -> None:
        """One step; SSLWantReadError / SSLWantWriteError until done, SSLError for a bad peer."""
        received = False  # at most one receive per step: a flood waits for the next readiness
        while True:
            try:
                self._ssl.do_handshake()
                break
            except ssl.SSLWantReadError:
                if not self._push():
                    raise ssl.SSLWantWriteError() from None
                if received or not self._receive():
                    raise
                received = True
            except ssl.SSLError:
                self._send_alert()
                raise
        self._more = self._in.pending > 0
        if not self._push():  # the last flight (and TLS 1.3 session tickets)
            raise ssl.SSLWantWriteError()

    # -- reading ----------------------------------------------------------------------------------

    def recv_into(self, buffer: memoryview) -> int:
        """Decrypt into `buffer` what OpenSSL holds, then what one receive brings, until full."""
        want = len(buffer)
        got = self._decrypt(buffer, 0)
        if got < want and not self._eof and self._receive():
            got = self._decrypt(buffer, got)
        self._more = got == want and (self._in.pending > 0 or self._ssl.pending() > 0)
        if self._out.pending and not self._owed:  # OpenSSL answered something (a key update)
            self._push()
        if got or self._eof:
            return got
        raise ssl.SSLWantReadError()

    def _decrypt(self, buffer: memoryview, got: int) -> int:
        want, read = len(buffer), self._ssl.read
        try:
            while got < want:
                n = cast(int, read(want - got, buffer[got:]))  # with a buffer: the count
                if not n:  # the peer's close_notify (Python answers 0 rather than raise)
                    self._eof = True
                    break
                got += n
        except ssl.SSLWantReadError:
            pass
        except (ssl.SSLZeroReturnError, ssl.SSLEOFError):  # close_notify, or EOF amid a record
            self._eof = True
        except ssl.SSLError:
            self._send_alert()
            raise
        return got

    def _receive(self) -> bool:
        """One receive into OpenSSL's input; False when the socket has nothing now."""
        try:
            data = self._raw.recv(RECEIVE)
        except (BlockingIOError, InterruptedError):
            return False
        if data:
            self._in.write(data)
        else:
            self._in.write_eof()
            self._eof = True
        return True

    # -- writing ----------------------------------------------------------------------------------

    def send(self, data: bytes | memoryview) -> int:
        """Encrypt and send all of `data`, or raise SSLWantWriteError: then call again with the same
        bytes (or more after them) once writable; the answer is the count encrypted the first time."""
        if self._owed:
            if not self._push():
                raise ssl.SSLWantWriteError()
            owed, self._owed = self._owed, 0
            return owed
        if not self._push():
            raise ssl.SSLWantWriteError()
        n: int = self._ssl.write(data)
        if not self._push():
            self._owed = n
            raise ssl.SSLWantWriteError()
        return n

    def _send_alert(self) -> None:
        """Best effort: the alert OpenSSL wrote before failing (a socket BIO would have sent it)."""
        with contextlib.suppress(OSError):
            self._push()

    def _push(self) -> bool:
        """Send the ciphertext waiting; True once the socket took all of it."""
        if self._out.pending:
            made = self._out.read()
            self._backlog = memoryview(bytes(self._backlog) + made if self._backlog else made)
        backlog = self._backlog
        if not backlog:
            return True
        try:
            sent = self._raw.send(backlog)
        except (BlockingIOError, InterruptedError):
            return False
        self._backlog = backlog[sent:]
        return not self._backlog

"""One client connection: the socket work around a FrameReader, in-order request handling,
backpressure, zero-copy writes.

    request frame = size int32 | size bytes (header and body, handed to the broker)

Framing (size checks, buffers, large frames) is kcompat.wire.framing.FrameReader, which does no
I/O: this module receives into its buffer and hands its frames to the broker. It works on the raw
non-blocking socket with loop.add_reader/add_writer, not an asyncio transport: a transport-owned
socket cannot take add_writer, and uvloop has no sendfile, so owning the socket is what lets
response bytes and file slices (os.sendfile) go out in order.

- The size prefix is checked against socket.request.max.bytes (by the reader) before any of the
  frame is buffered; a negative or larger size closes the connection.
- Requests are handled one at a time, in order (as Kafka does per connection), by one task per
  connection; other connections proceed concurrently. Only a Produce may go ahead while an earlier
  acks=all Produce waits for the ISR, its answer still sent in order (answer_queue.py).
  Pipelined requests are read ahead up to `Limits.max_queued_requests` and `max_queued_bytes`;
  reading pauses while that much waits, or while more than `write_high_water` response bytes are
  unsent, and resumes below `write_low_water`.
- Frames are handed over in buffers of their own (never views of the read buffer), so the broker
  may keep memoryviews of a frame (the reader guarantees it).
- TLS (SSL, SASL_SSL listeners): the socket is a kcompat.server.network.tls_socket.TlsSocket (OpenSSL on
  memory buffers, many TLS records per read); its handshake is driven by readiness callbacks like
  everything else, so a stalled handshake holds only its own connection. It may hold ciphertext the
  poller cannot see (a full read buffer, a request sent with the last handshake flight): that is read on
  the next loop turn (`_tls_pending`). The client's certificate gives the principal (`tls_principal`).
- SASL (SASL_PLAINTEXT, SASL_SSL): frames go through the SaslAuthenticator until it is complete
  (kcompat.server.auth.sasl); only then do they reach the broker, with `client.principal`.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kcompat.server.log_throttle import LogThrottle
from kcompat.server.network.answer_queue import Answer, AnswerQueue
from kcompat.server.network.connection_limits import Limits as Limits  # re-exported, as Client
from kcompat.server.network.connection_limits import waited_out
from kcompat.server.network.peer import Client as Client  # re-exported: where the handlers' peer is known
from kcompat.server.network.sendfile import ChunkWriter
from kcompat.server.network.tls import handshake_step
from kcompat.server.network.tls_socket import TlsSocket
from kcompat.wire.errors import DecodeError
from kcompat.wire.framing import FrameReader, FrameSizeError, size_hint
from kcompat.wire.protocol import describe_frame

if TYPE_CHECKING:
    from kcompat.server.auth.sasl import SaslAuthenticator

log = logging.getLogger("kcompat.server")
_closing = LogThrottle(log, pass_below=logging.INFO)  # a line per 10 s per listener, client host, reason

# A handler answers at once, or with a future of the answer (a Deferred acks=all Produce).
Handler = Callable[[memoryview, Client], Awaitable["Answer | asyncio.Future[Answer]"]]


class Connection:
    __slots__ = (
        "_auth",
        "_close_errors",
        "_deferred",
        "_drained",
        "_flush_soon",
        "_frames",
        "_handle",
        "_limits",
        "_loop",
        "_on_closed",
        "_queued_bytes",
        "_reading",
        "_requests",
        "_stopping",
        "_task",
        "_tls_principal",
        "_wakeup",
        "_write_blocked",
        "_writer",
        "_writing",
        "busy",
        "client",
        "closed",
        "fd",
        "last_active",
        "sock",
        "tls",
    )

    def __init__(
        self,
        sock: socket.socket | TlsSocket,
        client: Client,
        handle: Handler,
        *,
        limits: Limits,
        close_errors: tuple[type[BaseException], ...] = (),
        on_closed: Callable[[Connection], None] | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
        tls_principal: Callable[[TlsSocket], str] | None = None,
        authenticator: SaslAuthenticator | None = None,
    ) -> None:
        sock.setblocking(False)
        self.sock = sock
        self.fd = sock.fileno()
        self.client = client
        self._handle = handle
        self._limits = limits
        self._close_errors: tuple[type[BaseException], ...] = (DecodeError, *close_errors)
        self._on_closed = on_closed
        self._loop = loop or asyncio.get_running_loop()
        self._requests: deque[bytes | bytearray] = deque()
        self._deferred = AnswerQueue()
        self._queued_bytes = 0
        # The read buffer comes with the first bytes, goes after a quiet second (release_read_buffer).
        self._frames = FrameReader(limits.max_request_bytes, buffer_size=limits.read_buffer)
        if authenticator is not None:  # before login, frames are bounded by sasl.server.max.receive.size
            self._frames.max_size = min(limits.max_request_bytes, authenticator.max_token_bytes)
        self._writer = ChunkWriter(sock)
        self._reading = False
        self._writing = False
        self._write_blocked = False
        self._flush_soon = False  # a _flush is scheduled with call_soon
        self._stopping = False
        self._wakeup: asyncio.Future[None] | None = None  # the task waits for a request
        self._drained: asyncio.Future[None] | None = None  # the task waits for the writes to drain
        self._task: asyncio.Task[None] | None = None
        self.busy = False  # a request is with the broker
        self.closed = False
        self.last_active = self._loop.time()
        self.tls = isinstance(sock, TlsSocket)
        self._tls_principal = tls_principal
        self._auth = authenticator

    # -- life cycle -------------------------------------------------------------------------------

    def start(self) -> None:
        if self.tls:
            self._handshake()
        else:
            self._begin()

    def _begin(self) -> None:
        self._task = self._loop.create_task(self._run())
        self._update_reading()

    def _handshake(self) -> None:
        """One step of the TLS handshake, from start() and whenever the socket is ready."""
        sock = self.sock
        assert isinstance(sock, TlsSocket)
        try:
            want_read, want_write = handshake_step(sock)
        except OSError as e:  # ssl.SSLError included: garbage, an unknown CA, no certificate
            left = isinstance(e, ssl.SSLEOFError | ConnectionError)  # the peer went away: not worth INFO
            why = getattr(e, "reason", None) or e.strerror or e
            self.close(f"TLS handshake failed: {why}", level=logging.DEBUG if left else logging.INFO)
            return
        loop, fd = self._loop, self.fd
        if want_read != self._reading:
            (loop.add_reader(fd, self._handshake) if want_read else loop.remove_reader(fd))
            self._reading = want_read
        if want_write != self._writing:
            (loop.add_writer(fd, self._handshake) if want_write else loop.remove_writer(fd))
            self._writing = want_write
        if want_read or want_write:
            return
        self.last_active = loop.time()
        if self._tls_principal is not None:
            try:
                self.client = replace(self.client, principal=self._tls_principal(sock))
            except ValueError as e:  # a certificate whose subject cannot be read
                self.close(f"TLS client certificate refused: {e}", level=logging.INFO)
                return
        self._begin()

    @property
    def unsent_bytes(self) -> int:
        return self._writer.pending

    @property
    def queued_requests(self) -> int:
        return len(self._requests)

    @property
    def queued_bytes(self) -> int:
        return self._queued_bytes

    @property
    def reading(self) -> bool:
        return self._reading

    @property
    def buffered_bytes(self) -> int:
        """Bytes received that are not yet a queued request (a partial frame, prefixes included)."""
        return self._frames.buffered

    def idle_for(self, now: float) -> float:
        """Seconds without a complete request, response progress or a request with the broker."""
        return 0.0 if self.busy or self._deferred else now - self.last_active

    def close(self, reason: str | None = None, *, level: int = logging.WARNING, context: str = "") -> None:
        """Close now, dropping queued requests and unsent bytes; log `reason` as one line."""
        if self.closed:
            return
        self.closed = True
        if reason is not None:
            where = f"{self.client.address} ({context})" if context else self.client.address
            _closing.log(level, self.client.origin + reason, "closing connection from %s: %s", where, reason)
        if self._reading:
            self._loop.remove_reader(self.fd)
            self._reading = False
        if self._writing:
            self._loop.remove_writer(self.fd)
            self._writing = False
        self._writer.clear()
        self._requests.clear()
        self._deferred.cancel()
        self._queued_bytes = 0
        self._frames.clear()
        self._wake()
        self._wake_drained()
        try:
            self.sock.close()
        finally:
            if self._on_closed is not None:
                self._on_closed(self)

    async def shutdown(self) -> None:
        """Stop reading; finish the requests already received, send their responses, close."""
        self._stopping = True
        self._update_reading()
        self._wake()
        if self._task is not None:
            await asyncio.shield(self._task)

    def abort(self) -> None:
        """Cancel the request in progress (end of the shutdown grace period) and close."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
        self.close()

    # -- reading ----------------------------------------------------------------------------------

    def _update_reading(self) -> None:
        want = (
            not self.closed and not self._stopping and not self._write_blocked and self._room_for_requests()
        )
        if want != self._reading:
            if want:
                self._loop.add_reader(self.fd, self._on_readable)
                if self.tls:
                    self._loop.call_soon(self._tls_pending)
            else:
                self._loop.remove_reader(self.fd)
            self._reading = want

    def _tls_pending(self) -> None:
        """Read what OpenSSL decrypted but the socket no longer signals (a TLS record read whole)."""
        sock = self.sock
        if self._reading and not self.closed and isinstance(sock, TlsSocket) and sock.pending():
            self._on_readable()

    def _room_for_requests(self) -> bool:
        return (
            len(self._requests) < self._limits.max_queued_requests
            and self._queued_bytes < self._limits.max_queued_bytes
        )

    def _on_readable(self) -> None:
        frames = self._frames
        try:
            n = self.sock.recv_into(frames.get_buffer())
        except (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return
        except ssl.SSLZeroReturnError:
            n = 0
        except OSError as e:
            self.close(f"read failed: {e}", level=logging.DEBUG)
            return
        if n == 0:
            partial = frames.buffered
            if partial:  # a truncated request: worth a line, unlike a client that simply leaves
                expected = frames.expected
                self.close(
                    f"closed by the peer in the middle of a request ({partial}"
                    + (f" of {expected} bytes received)" if expected else " bytes received)"),
                    level=logging.INFO,
                )
            else:
                self.close("closed by the peer", level=logging.DEBUG)
            return
        frames.buffer_updated(n)
        self._parse()
        if self._requests:
            self._wake()
        self._update_reading()
        if self.tls and self._reading and self.sock.pending():  # type: ignore[union-attr]
            self._loop.call_soon(self._tls_pending)

    def _parse(self) -> None:
        """Move complete frames from the reader to the request queue, up to its bound."""
        if self.closed:
            return
        requests, limits = self._requests, self._limits
        before = len(requests)
        try:
            added = self._frames.take(
                requests, limits.max_queued_requests - before, limits.max_queued_bytes - self._queued_bytes
            )
        except FrameSizeError as e:
            self._reject_size(e)
            return
        self._queued_bytes += added
        if len(requests) != before:
            self.last_active = self._loop.time()

    def release_read_buffer(self) -> None:
        """Give back the read buffer if it holds nothing (the reactor calls this on quiet connections)."""
        self._frames.release()

    def _reject_size(self, e: FrameSizeError) -> None:
        if e.size < 0:
            why = f"invalid request size {e.size}"
        elif self._auth is not None and not self._auth.complete:
            why = f"SASL frame size {e.size} is larger than sasl.server.max.receive.size ({e.max_size})"
        else:
            why = f"request size {e.size} is larger than socket.request.max.bytes ({e.max_size})"
        self.close(why + size_hint(e.prefix))

    # -- handling ---------------------------------------------------------------------------------

    def _wake(self) -> None:
        w = self._wakeup
        if w is not None and not w.done():
            w.set_result(None)

    def _wake_drained(self) -> None:
        d = self._drained
        if d is not None and not d.done():
            d.set_result(None)

    async def _run(self) -> None:
        try:
            await self._serve_requests()
            if not self.closed and self._writer:
                await self._drain(0)  # shutting down: the last responses go out first
        except asyncio.CancelledError:
            pass
        finally:
            self.close()

    async def _serve_requests(self) -> None:
        requests, deferred = self._requests, self._deferred
        loop = self._loop
        while not self.closed:
            if self._limits.mutes and await waited_out(self._limits.mutes, self.client.connection_id):
                continue  # throttled by a quota: its answer is out, its next request waits
            if deferred:
                try:
                    if not await deferred.turn(requests, self._send, self._idle):
                        continue
                except self._close_errors as e:
                    self._close_for(b"", e)
                    return
            elif not requests:
                if self._stopping:
                    return
                await self._idle()
                continue
            frame = requests.popleft()
            self._queued_bytes -= len(frame)
            self._parse()
            self._update_reading()
            self.busy = True
            try:
                if self._auth is not None:
                    answer = await self._authenticate(memoryview(frame))
                else:
                    answer = await self._handle(memoryview(frame), self.client)
            except self._close_errors as e:
                self._close_for(frame, e)
                return
            except asyncio.CancelledError:
                raise
            except Exception:
                what = describe_frame(frame) or "a request"
                log.exception("error handling %s from %s; closing the connection", what, self.client.address)
                self.close()
                return
            finally:
                self.busy = False
                self.last_active = loop.time()
            if self.closed:  # while it was handled: an answer still to come goes with the connection
                if isinstance(answer, asyncio.Future):
                    deferred.push(answer)
                    deferred.cancel()
                return
            if isinstance(answer, asyncio.Future) or deferred:  # its turn comes after those before it
                deferred.push(answer)
            else:  # `answer` not kept while draining: each file piece sent lets go of its descriptor
                sending = self._send(answer)
                del answer
                await sending

    async def _idle(self, also: asyncio.Future[Any] | None = None) -> None:
        """Until a request arrives (or `also` is done); alone, not through asyncio.wait's machinery."""
        wakeup = self._wakeup = self._loop.create_future()
        await (wakeup if also is None else asyncio.wait([wakeup, also], return_when=asyncio.FIRST_COMPLETED))
        self._wakeup = None

    async def _send(self, chunks: Answer) -> None:
        if chunks:
            self._writer.add(chunks)
            del chunks  # the writer holds what is left (see the caller)
            if self._writing:  # the socket is full already: _flush runs when it is writable
                self._check_write_bound()
            elif self._requests and self._writer.pending < self._limits.write_high_water:
                # More requests are waiting (a pipelining client): their answers go out together,
                # in one send, once this task yields: after them, or as soon as one of them waits
                # (a parked Fetch), so no answer is held behind a slow one.
                if not self._flush_soon:
                    self._flush_soon = True
                    self._loop.call_soon(self._flush)
            else:
                self._flush()
            if self._write_blocked:
                await self._drain(self._limits.write_low_water)

    async def _authenticate(self, frame: memoryview) -> Answer | asyncio.Future[Answer]:
        """The SASL gate: the authenticator's answer, or the broker's once it lets the frame pass."""
        auth = self._auth
        assert auth is not None
        step = auth.step(frame, self._loop.time())
        if step.to_broker:
            return await self._handle(frame, self.client)
        if auth.principal is not None and auth.principal != self.client.principal:
            self.client = replace(self.client, principal=auth.principal, token_authenticated=auth.by_token)
            self._frames.max_size = self._limits.max_request_bytes
        if step.delay_s > 0:  # connection.failed.authentication.delay.ms: slow down password guessing
            await asyncio.sleep(step.delay_s)
        if step.close is None:
            return step.chunks
        if step.chunks:
            self._writer.add(step.chunks)
            self._flush()
            await self._drain(0)
        self.close(step.close, level=logging.INFO)
        return None

    def _close_for(self, frame: bytes | bytearray, e: BaseException) -> None:
        reason = f"invalid request: {e}" if isinstance(e, DecodeError) else str(e) or type(e).__name__
        self.close(reason, context=describe_frame(frame))

    # -- writing ----------------------------------------------------------------------------------

    async def _drain(self, threshold: int) -> None:
        while not self.closed and self._writer.pending > threshold:
            self._drained = self._loop.create_future()
            await self._drained
            self._drained = None

    def _flush(self) -> None:
        self._flush_soon = False
        if self.closed:
            return
        writer = self._writer
        before = writer.pending
        try:
            done = writer.flush()
        except OSError as e:
            gone = isinstance(e, BrokenPipeError | ConnectionResetError | ConnectionAbortedError)
            self.close(f"write failed: {e}", level=logging.DEBUG if gone else logging.WARNING)
            return
        if writer.pending != before:
            self.last_active = self._loop.time()
        if done != (not self._writing):
            if done:
                self._loop.remove_writer(self.fd)
            else:
                self._loop.add_writer(self.fd, self._flush)
            self._writing = not done
        self._check_write_bound()
        if self._drained is not None and (done or not self._write_blocked):
            self._wake_drained()

    def _check_write_bound(self) -> None:
        """Pause reading above the high water mark of unsent bytes; resume below the low one."""
        pending = self._writer.pending
        if self._write_blocked:
            if pending <= self._limits.write_low_water:
                self._write_blocked = False
                self._update_reading()
        elif pending > self._limits.write_high_water:
            self._write_blocked = True
            self._update_reading()

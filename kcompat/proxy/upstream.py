"""The proxy's connection to one upstream broker, on behalf of one client connection.

With SASL upstream (sasl.py) the connection logs in with the proxy's credentials before the
client's first request goes on, and re-authenticates (KIP-368) before the session the broker
granted ends: from then on the client's requests are held here, in order, until the answers
already owed have come back, then the login runs again on the same connection, its answers taken
here, and the held requests follow. A broker whose session lapsed would close the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Protocol, cast

from kcompat.proxy.answer_stream import AnswerStream
from kcompat.proxy.relay_reader import RelayReader, send
from kcompat.proxy.sasl import LoginFailed, UpstreamLogin, reauth_delay
from kcompat.wire.errors import DecodeError
from kcompat.wire.framing import FrameSizeError

log = logging.getLogger("kcompat.proxy")


class Client(Protocol):
    """What the upstream side needs of its client connection (connection.py)."""

    id: int

    def answer(self, frame: bytes | bytearray) -> None: ...
    def open_stream(self, size: int) -> AnswerStream | None: ...  # the next answer, relayed as it comes
    def fail(self, kind: str, message: str) -> None: ...
    def upstream_full(self, full: bool) -> None: ...
    def close(self) -> None: ...
    def owed(self) -> int: ...  # answers owed for requests relayed (or held here)


class Settings(Protocol):
    """What the upstream side reads of the proxy's shared state (connection.Shared)."""

    buffer_bytes: int
    upstream_sides: set[UpstreamSide]  # every open upstream connection
    upstream_login: Callable[[], UpstreamLogin] | None
    connect_timeout: float
    sasl_counts: Counter[str]


class UpstreamSide(asyncio.BufferedProtocol):
    def __init__(self, client: Client, settings: Settings) -> None:
        self.client = client
        self.transport: asyncio.Transport | None = None
        self._reader = RelayReader(self._open_stream, self._frame)
        self._buffer_bytes = settings.buffer_bytes
        self._sides = settings.upstream_sides
        self._login = settings.upstream_login
        self._timeout = settings.connect_timeout
        self.counts = settings.sasl_counts
        self._answers: asyncio.Queue[bytes | None] | None = None  # answers to the proxy's own login
        self._reauth_due = False  # client requests are held until the re-authentication is done
        self._held: list[bytes] = []
        self._held_owed = 0  # of the held requests, those that will be answered
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport = cast(asyncio.Transport, transport)
        transport.set_write_buffer_limits(high=self._buffer_bytes)
        self._sides.add(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._reader.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        try:
            self._reader.buffer_updated(nbytes)
        except FrameSizeError as e:
            self.client.fail(
                "upstream-frame", f"the upstream sent an invalid frame ({e}): closing the connection"
            )
            return
        except DecodeError as e:
            self.client.fail("bad-answer", f"the upstream's Fetch answer does not decode ({e}): closing it")
            return
        self.maybe_reauthenticate()

    def _frame(self, frame: bytes | bytearray) -> None:
        if self._answers is not None:
            self._answers.put_nowait(bytes(frame))
        else:
            self.client.answer(frame)

    def _open_stream(self, size: int) -> AnswerStream | None:
        return None if self._answers is not None else self.client.open_stream(size)

    # -- SASL -------------------------------------------------------------------------------------

    async def login(self) -> None:
        """Log in with the proxy's credentials; LoginFailed (or ConnectionError) when refused."""
        if self._login is None:
            return
        login = self._login()
        queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._answers = queue
        try:
            frame: bytes | None = login.first()
            while frame is not None:
                assert self.transport is not None
                self.transport.write(frame)
                answer = await queue.get()
                if answer is None:
                    raise ConnectionError("the upstream closed the connection during SASL")
                frame = login.answer(answer)
        except BaseException:
            self.close()
            raise
        finally:
            self._answers = None
        self.counts["logins"] += 1
        if login.lifetime_ms > 0:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(reauth_delay(login.lifetime_ms), self._session_ending)

    def _session_ending(self) -> None:
        self._reauth_due = True
        self.maybe_reauthenticate()

    def maybe_reauthenticate(self) -> None:
        """Once due and every answer owed is in: log in again, then send the held requests."""
        if self._reauth_due and self._task is None and self.client.owed() == self._held_owed:
            self._task = asyncio.get_running_loop().create_task(self._reauthenticate())

    async def _reauthenticate(self) -> None:
        try:
            await asyncio.wait_for(self.login(), self._timeout)
        except LoginFailed as e:
            self.client.fail(
                "upstream-reauth",
                f"the upstream refused the proxy's re-authentication ({e}): closing the client's "
                "connection; check proxy.upstream.sasl.jaas.config",
            )
            return
        except (OSError, TimeoutError, ConnectionError) as e:
            self.client.fail("upstream-reauth", f"the upstream's re-authentication failed ({e}): closing")
            return
        finally:
            self._task = None
        self.counts["reauthentications"] += 1
        self._reauth_due = False
        held, self._held, self._held_owed = self._held, [], 0
        if self.transport is not None and not self.transport.is_closing():
            self.transport.writelines(held)

    # -- relaying ---------------------------------------------------------------------------------

    def write(self, chunks: Sequence[Any], answered: bool = True) -> None:
        if self._reauth_due:  # after the re-authentication, in order
            self._held.append(b"".join(bytes(c) for c in chunks))
            self._held_owed += answered
            self.maybe_reauthenticate()
        elif self.transport is not None and not self.transport.is_closing():
            send(self.transport, chunks)

    def pause_writing(self) -> None:  # the upstream reads slower than the client sends
        self.client.upstream_full(True)

    def resume_writing(self) -> None:
        self.client.upstream_full(False)

    def pause_reading(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        log.debug("upstream connection of client connection %d closed (%s)", self.client.id, exc)
        self._sides.discard(self)
        if self._timer is not None:
            self._timer.cancel()
        if self._answers is not None:
            self._answers.put_nowait(None)
        if self._task is not None:
            with contextlib.suppress(RuntimeError):
                self._task.cancel()
        self.client.close()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

"""`kcompat serve`: the event loop, the broker and the listeners, from start-up to a clean exit.

serve(config) -> exit code
  1. event loop: uvloop when importable, else asyncio's own (said once in the log)
  2. lock every log dir (<dir>/.lock, held until exit): another process's lock stops start-up
     here, before anything reads or writes the dir
  3. bind every listener (a port in use fails here, before any log is recovered); a client may
     connect from now on, but is answered only from step 5
  4. await broker.start()        recovery of the logs, topics, producer state, group replay;
     then what it made is collected once and frozen out of the cyclic GC's sight (_freeze_start_up)
  5. accept; log "kcompat <version> listening on ... (data in ..., started in N ms)"
  6. SIGTERM or SIGINT: stop accepting, let received requests finish (SHUTDOWN_GRACE_S at
     most; a second signal cuts it short), close connections, await broker.close(), return 0
SIGTERM or SIGINT during step 4 (recovery of thousands of partitions, group replay) stops it
within a second: the log loading stops between two partitions, nothing is marked cleanly shut
down (the next start recovers from the checkpointed recovery points), and the process exits 0
without waiting for worker threads still reading.
A filesystem error in steps 2-4 (a read-only dir, a file where a dir should be) is one line
naming the path and the OS's reason, and exit code 1.
"""

from __future__ import annotations

import asyncio
import errno
import gc
import logging
import os
import resource
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kcompat.config.broker_config import BrokerConfig
from kcompat.config.connection_limits import address, ip_overrides
from kcompat.config.definition import INT_MAX
from kcompat.config.errors import ConfigError
from kcompat.config.listeners import Listener
from kcompat.log.dir_lock import LogDirInUse, lock_log_dirs
from kcompat.log.errors import InconsistentClusterId, KafkaStorageError
from kcompat.server.network.connection import Client, Limits
from kcompat.server.network.listeners import ListenerTransport, transports
from kcompat.server.network.reactor import Reactor
from kcompat.storage.scram_credentials import ScramCredential

log = logging.getLogger("kcompat.server")

SHUTDOWN_GRACE_S = 5.0
ABORT_START_WAIT_S = 0.5  # how long an interrupted start-up may take to wind down before the exit


class _Halt(int):
    """Exit code of a start-up cut short: exit at once, without joining worker threads."""


_LOG_FORMAT = "[%(asctime)s] %(levelname)s %(message)s (%(name)s)"


def _explicit_int(config: BrokerConfig, key: str) -> int:
    """A socket buffer size only when the user set one; else -1 (the OS default).

    Used for socket.receive.buffer.bytes: Kafka applies its default of 102400 bytes, but Linux's
    autotuned receive buffer took large produce requests a little faster on loopback
    (python -m benchmarks). socket.send.buffer.bytes keeps Kafka's default: a pinned send
    buffer halved the broker's CPU per fetched GB and steadied fetch throughput.
    """
    return int(config.get(key)) if config.is_set(key) else -1


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    try:
        import uvloop
    except ImportError:
        log.info("uvloop is not installed; using asyncio's event loop")
        return asyncio.new_event_loop
    return uvloop.new_event_loop


def _process_age_ms(fallback_start: float) -> float:
    """Milliseconds since this process started (interpreter start-up included) where Linux says."""
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        started_ticks = int(fields[19])  # field 22 of proc(5), counted after "pid (comm)"
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - started_ticks / os.sysconf("SC_CLK_TCK")
        return age * 1000
    except (OSError, ValueError, IndexError, AttributeError):
        return (time.monotonic() - fallback_start) * 1000


def raise_open_file_limit() -> None:
    """Soft RLIMIT_NOFILE up to the hard limit: one descriptor per partition adds up (Kafka's
    start script leaves this to the service manager; kcompat does it for the user)."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY or soft < hard:
            resource.setrlimit(
                resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY else 1 << 20, hard)
            )
    except (ValueError, OSError) as e:
        log.info("open file limit left as it is: %s", e)


def _ensure_logging() -> None:
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format=_LOG_FORMAT, stream=sys.stderr)


def serve(config: BrokerConfig, scram_users: Sequence[tuple[str, str, ScramCredential]] = ()) -> int:
    """Run the broker until SIGTERM/SIGINT; the process exit code (0 after a clean shutdown).

    `scram_users` (user, mechanism, credential) are stored before the listeners accept (--add-scram).
    """
    entered = time.monotonic()
    _ensure_logging()
    raise_open_file_limit()
    try:
        with asyncio.Runner(loop_factory=_loop_factory()) as runner:
            code = runner.run(_serve(config, entered, scram_users))
            if isinstance(code, _Halt):
                # Closing the runner would join a worker thread still replaying a big log; the
                # files are as a crash leaves them, which every start recovers from.
                logging.shutdown()
                os._exit(int(code))
            return code
    except ConfigError as e:
        log.error("%s", e)
        return 1


def reactor_for(
    config: BrokerConfig,
    handle: Any,
    close_errors: tuple[type[BaseException], ...] = (),
    on_disconnect: Callable[[Client], None] | None = None,
    current: Callable[[], BrokerConfig] | None = None,
    transports: Mapping[str, ListenerTransport] | None = None,
    mutes: dict[str, float] | None = None,
    admit_rate: Callable[[str], int] | None = None,
    connection_rate: Callable[[float], int] | None = None,
) -> Reactor:
    """A Reactor with the connection settings of `config` (typed values, parsed at load).

    `current()` gives the config in force now, for the limits AlterConfigs may change at run time.
    """
    now = current or (lambda: config)
    return Reactor(
        handle,
        limits=Limits(
            max_request_bytes=config.socket_request_max_bytes, mutes={} if mutes is None else mutes
        ),
        close_errors=close_errors,
        idle_ms=config.connections_max_idle_ms,
        max_connections=lambda: now().max_connections,
        max_connections_per_ip=lambda host: _max_connections_from(now(), host),
        send_buffer=config.socket_send_buffer_bytes,
        receive_buffer=_explicit_int(config, "socket.receive.buffer.bytes"),
        on_disconnect=on_disconnect,
        transports=transports,
        admit_rate=admit_rate,
        accept_delay=None if connection_rate is None else _accept_delay(config, now, connection_rate),
    )


def _max_connections_from(config: BrokerConfig, host: str) -> int:
    """max.connections.per.ip, or this address's own limit in max.connections.per.ip.overrides."""
    overrides = ip_overrides(config.max_connections_per_ip_overrides)
    if overrides:
        return overrides.get(address(host), config.max_connections_per_ip)
    return int(config.max_connections_per_ip)


def _accept_delay(
    config: BrokerConfig, current: Callable[[], BrokerConfig], record: Callable[[float], int]
) -> Callable[[str], int]:
    """max.connection.creation.rate: the ms a new connection on `listener` waits (`record` counts
    it). The inter-broker listener is exempt, as Kafka protects it."""
    protected = config.get("inter.broker.listener.name") or config.get("security.inter.broker.protocol")

    def delay(listener: str) -> int:
        bound = current().max_connection_creation_rate
        if bound >= INT_MAX or listener == protected:
            return 0
        return record(float(bound))

    return delay


def log_dirs_of(config: BrokerConfig) -> list[Path]:
    """The log dirs as absolute paths, as Kafka's LogManager holds them."""
    return [Path(d).absolute() for d in config.log_dirs]


def os_error_line(e: OSError) -> str:
    """One line naming the path and the OS's reason, for a start-up that cannot go on."""
    where = " -> ".join(str(f) for f in (e.filename, e.filename2) if f is not None)
    reason = e.strerror or str(e)
    return f"cannot use {where}: {reason}" if where else reason


async def _serve(
    config: BrokerConfig, entered: float, scram_users: Sequence[tuple[str, str, ScramCredential]]
) -> int:
    for listener in config.controller_listeners:
        log.info("not opening controller listener %s (kcompat runs no KRaft quorum)", listener.url())

    # Before anything reads or writes a log dir: a second broker on a live dir must not "recover"
    # it or mark it cleanly shut down (Kafka's LogManager locks each dir the same way).
    try:
        dir_lock = lock_log_dirs(log_dirs_of(config))
    except LogDirInUse as e:
        log.error("%s", e)
        return 1
    except OSError as e:
        log.error("%s", os_error_line(e))
        return 1
    try:
        return await _serve_locked(config, entered, config.listeners, scram_users)
    except InconsistentClusterId as e:
        # A log dir formatted for another cluster or node: one line, exit 1, and the dirs left as
        # they were (Kafka checks meta.properties before its LogManager creates any .lock).
        log.error("%s", e)
        dir_lock.discard()
        return 1
    finally:
        dir_lock.release()


class _NoAdmin:
    """The admin listener when it is off (or its default port was taken)."""

    url = None

    async def start(self, broker: Any, reactor: Reactor) -> None:
        pass

    async def close(self) -> None:
        pass


def _log_started(config: BrokerConfig, bound: list[tuple[Listener, int]], admin: Any, entered: float) -> None:
    from kcompat import __version__

    log.info(
        "kcompat %s listening on %s (data in %s%s, started in %.0f ms)",
        __version__,
        ", ".join(listener.url(port) for listener, port in bound),
        ", ".join(str(d) for d in log_dirs_of(config)),
        f"; console at {admin.url}/, metrics at {admin.url}/metrics" if admin.url else "",
        _process_age_ms(entered),
    )


def _bind(
    config: BrokerConfig, reactor: Reactor, listeners: list[Listener]
) -> tuple[list[tuple[Listener, int]], Any] | None:
    """Bind the Kafka listeners, then the admin listener (None, once said why, when either fails)."""
    try:
        bound = reactor.bind(listeners, config.socket_listen_backlog_size)
    except OSError as e:
        hint = ""
        if e.errno == errno.EADDRINUSE:
            hint = " (another process has it; choose a free port with --override listeners=PLAINTEXT://127.0.0.1:PORT)"
        log.error("cannot listen on %s: %s%s", ", ".join(x.url() for x in listeners), e.strerror or e, hint)
        return None
    if not config.get("admin.listener"):
        return bound, _NoAdmin()
    # Imported only now: with the admin listener off, no HTTP or Prometheus code is loaded.
    from kcompat.server.admin.listener import AdminUnavailable, open_admin

    try:
        return bound, open_admin(config) or _NoAdmin()
    except AdminUnavailable as e:
        log.error("%s", e)
        reactor._close_listeners()
        return None


async def _serve_locked(
    config: BrokerConfig,
    entered: float,
    listeners: list[Listener],
    scram_users: Sequence[tuple[str, str, ScramCredential]],
) -> int:
    from kcompat.server.broker import Broker
    from kcompat.server.dispatcher import CloseConnection
    from kcompat.wire.protocol import UnsupportedRequest

    _modules_loaded()

    broker = Broker(config)
    broker.initial_scram_users = list(scram_users)
    # As in Kafka, fetch sessions outlive a connection (a client may reconnect and go on with its
    # session); share sessions do not: the close hook ends them and releases their records.
    reactor = reactor_for(
        config,
        broker.handle,
        (CloseConnection, UnsupportedRequest),
        on_disconnect=broker.client_disconnected,
        current=lambda: getattr(broker, "config", config),  # the broker swaps it on AlterConfigs
        # TLS contexts (ConfigError here), SASL with SCRAM credentials and delegation tokens
        transports=transports(config.listener_security, broker.scram.get, broker.tokens.credential),
        mutes=broker.quotas.mutes,  # a throttled client's connection waits out its throttle time
        admit_rate=broker.quotas.admit_connection,  # connection_creation_rate of each ip
        connection_rate=broker.quotas.record_connection,  # max.connection.creation.rate
    )
    opened = _bind(config, reactor, listeners)
    if opened is None:
        return 1
    bound, admin = opened
    for listener, port in bound:  # listeners=...:0 binds a free port; Metadata must name it
        broker.bound(listener.name, port)

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    force = asyncio.Event()
    received: list[str] = []

    def on_signal(signum: int) -> None:
        received.append(signal.Signals(signum).name)
        (force if stop.is_set() else stop).set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal, signum)

    started = False
    try:
        failed = await _start(broker, stop, received)
        if failed is not None:
            return failed
        started = True
        _freeze_start_up()
        cluster = broker.cluster  # cluster mode: registration, heartbeats, the metadata follower
        cluster.start(broker)
        if not cluster.serving.is_set():
            # As Kafka's BrokerServer, the listeners are served once the controller has unfenced
            # this broker (bound already: connections wait in the backlog); a stop signal ends the wait.
            log.info("waiting to be unfenced before serving the listeners")
            await _first_set(cluster.serving, stop)
        reactor.start()
        _log_started(config, bound, admin, entered)
        await admin.start(broker, reactor)  # its HTTP server is loaded by its first connection
        await stop.wait()
        log.info("shutting down (%s)", received[0] if received else "stop")
        await cluster.shutdown(SHUTDOWN_GRACE_S)  # cluster mode: controlled shutdown through heartbeats
        await broker.begin_shutdown()  # parked Fetches and group joins answer now, not after the grace period
        await reactor.shutdown(SHUTDOWN_GRACE_S, force)
        return 0
    finally:
        await admin.close()
        reactor._close_listeners()
        for conn in list(reactor.connections):
            conn.close()
        try:
            if started or not stop.is_set():  # an interrupted start-up leaves the logs as they are
                await broker.close()
        except Exception:
            log.exception("closing the broker failed")
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
        log.info("kcompat stopped")


def _modules_loaded() -> None:
    """`python -m kcompat serve` loads its modules with the cyclic GC off (kcompat/__main__.py):
    what they made lives as long as the process, so it is frozen as it is and the GC turned back on."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


def _freeze_start_up() -> None:
    """Take what start-up made (the partition logs with their segments and indexes, the group and
    transaction state: ~127,000 objects for 5,000 partitions) out of the cyclic garbage collector's
    full collections, which the requests' allocations trigger now and then and which walked them
    all, holding the event loop ~110 ms (a shared 2-core VM); after gc.freeze() ~0 ms. Collected
    first, so no garbage is frozen in; frozen objects are still freed when no longer referenced."""
    gc.collect()
    gc.freeze()


async def _first_set(*events: asyncio.Event) -> None:
    waits = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()


async def _start(broker: Any, stop: asyncio.Event, received: list[str]) -> int | None:
    """Start the broker: None once it has, else the exit code (start-up failed, or was stopped)."""
    try:
        if not await _start_unless_stopped(broker, stop):
            log.info(
                "stopped during start-up (%s): the logs are left for the next start to recover", received[0]
            )
            return _Halt(0)
    except (ConfigError, InconsistentClusterId):
        raise  # _serve refuses InconsistentClusterId, once the dir locks can be undone
    except OSError as e:  # a data dir that cannot be written, a file where a dir should be, ...
        log.error("start-up failed: %s", os_error_line(e))
        return 1
    except (
        KafkaStorageError
    ) as e:  # a log that cannot be opened (too many open files for the partitions, ...)
        log.error("start-up failed: %s", e)
        return 1
    except Exception:
        log.exception("start-up failed")
        return 1
    return None


async def _start_unless_stopped(broker: Any, stop: asyncio.Event) -> bool:
    """`broker.start()`, or False when a stop signal comes first: the start is cancelled and given
    ABORT_START_WAIT_S to wind down. Start-up errors are raised as they come."""
    start = asyncio.ensure_future(broker.start())
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({start, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
    if start.done():
        start.result()
        return True
    start.cancel()
    await asyncio.wait({start}, timeout=ABORT_START_WAIT_S)
    return False


__all__ = ["SHUTDOWN_GRACE_S", "Client", "reactor_for", "serve"]

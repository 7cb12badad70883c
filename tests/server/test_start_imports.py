"""What a default `kcompat serve` loads before it serves: no module of a feature that is off.

A real `python -X importtime -m kcompat serve` (single node, PLAINTEXT, the admin listener on as
by default) is started; every module imported before its "listening on" line is read from the
importtime lines on stderr, then the broker is stopped. Each module here was once part of every
cold start (issue 31: about a third of a start was imports of what the start never used)."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
IMPORT_LINE = re.compile(r"import time:\s+\d+ \|\s+\d+ \|\s*(\S+)")

# Features that are off by default, and heavy standard modules only their paths need.
NOT_AT_START = (
    "kcompat.server.cluster",  # cluster mode (KRaft controllers)
    "kcompat.metadata.image",  # the KRaft metadata image: cluster mode
    "kcompat.proxy",  # `kcompat proxy`
    "kcompat.server.auth.sasl",  # SASL listeners
    "kcompat.server.auth.oauth_jwks",
    "kcompat.server.admin.console",  # the admin listener's console: loaded once serving
    "kcompat.admin_http",
    "kcompat.client",  # the CLI's client commands
    "kcompat.cmd",
    # the group coordinator: built on the first group request, or to replay __consumer_offsets
    "kcompat.coordinator.coordinator",
    "kcompat.coordinator.group_metadata_manager",
    "kcompat.coordinator.offset_metadata_manager",
    "kcompat.coordinator.streams_group_heartbeat",
    "kcompat.coordinator.assignors",
    # the group coordinator's 26 record classes: with the coordinator (record_pair.py is the start's)
    "kcompat.coordinator.records",
    "kcompat.coordinator.result",
    "kcompat.coordinator.streams_records",  # streams groups: with the coordinator, or a first heartbeat
    "kcompat.coordinator.streams_topology",
    # share groups: built by the first share request, or at start to load __share_group_state
    "kcompat.coordinator.share",
    "kcompat.coordinator.share_coordinator",
    "kcompat.server.share.share_group_service",
    "kcompat.server.share.share_partition_manager",
    "kcompat.server.share.share_coordinator",
    "kcompat.server.share.local_persister",
    "kcompat.server.share.memory_persister",
    "kcompat.server.share.persister",
    "kcompat.server.share.share_sessions",
    "kcompat.coordinator.transaction",  # a single node's: built by the first transactional request
    "kcompat.telemetry",  # client telemetry: the first GetTelemetrySubscriptions or PushTelemetry
    "cramjam",  # the snappy, lz4 and zstd codecs: the first batch compressed with one
    "lz4",
    "zstandard",
    # fault injection and traffic capture: built by the first use of /faults or /captures
    "kcompat.faults",
    "kcompat.capture",
    "kcompat.server.fault_hook",
    "kcompat.server.capture_hook",
    "kcompat.config.security",  # the TLS, SASL and OAuth settings of listeners that use them
    "ctypes",  # syncfs: a log dir with partitions to recover, or a clean stop
    "tempfile",  # TLS with in-line PEM only (and ctypes.util's library lookup)
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def modules_before_serving(tmp_path: Path) -> list[str]:
    return modules_loaded(tmp_path, lambda line, module: "listening on" in line)


def modules_loaded(
    tmp_path: Path, done: Callable[[str, str | None], bool], admin_port: int | None = None
) -> list[str]:
    """The modules a default start imports until `done(line, module)` says so (the line excluded)."""
    cmd = [sys.executable, "-X", "importtime", "-m", "kcompat", "serve",
           "--override", "listeners=PLAINTEXT://127.0.0.1:0", "--override", f"log.dirs={tmp_path / 'data'}",
           "--override", f"admin.listener=127.0.0.1:{admin_port or _free_port()}"]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stderr is not None
    watchdog = threading.Timer(60, proc.kill)  # a line that never comes ends the read, not the run
    watchdog.start()
    modules: list[str] = []
    seen: list[str] = []
    deadline = time.monotonic() + 60
    try:
        for line in proc.stderr:
            m = IMPORT_LINE.match(line)
            if done(line, None if m is None else m.group(1)):
                return modules
            if m is not None:
                modules.append(m.group(1))
            else:
                seen.append(line)
            if time.monotonic() > deadline:
                break
        pytest.fail("the broker did not start:\n" + "".join(seen[-20:]))
    finally:
        watchdog.cancel()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


def test_default_serve_loads_no_module_of_a_feature_that_is_off(tmp_path):
    modules = modules_before_serving(tmp_path)
    assert "kcompat.server.broker" in modules  # the lines were read: the broker's own modules are there
    loaded = [m for m in modules if any(m == x or m.startswith(x + ".") for x in NOT_AT_START)]
    assert loaded == []


def test_the_admin_listener_loads_its_http_server_on_its_first_connection(tmp_path):
    # Once the Kafka listeners serve, the admin listener starts the lag chart's sampling; its HTTP
    # server (h11) and console session are imported by its first connection, so they never compete
    # with the first Kafka answers. The lag chart needs the console's views only once a group exists.
    port = _free_port()
    session = "kcompat.server.admin.console.session"
    before_connecting: list[str] = []
    seen: list[str] = []
    clients: list[socket.socket] = []

    def done(line: str, module: str | None) -> bool:
        if module is None:
            return False
        if module == "kcompat.server.admin.console.lag_history":
            before_connecting.extend(seen)
            clients.append(socket.create_connection(("127.0.0.1", port), timeout=10))
        seen.append(module)
        return module == session

    try:
        modules = modules_loaded(tmp_path, done, admin_port=port)
    finally:
        for c in clients:
            c.close()
    assert "kcompat.server.admin.listener" in before_connecting  # the admin listener did start
    assert [m for m in before_connecting if m == "h11" or m.startswith(("h11.", "kcompat.admin_http"))] == []
    assert "h11" in modules and "kcompat.admin_http.http_server" in modules  # the connection loaded them
    loaded = [m for m in modules if m in ("kcompat.server.admin.console.views", "kcompat.metadata.image")]
    assert loaded == []

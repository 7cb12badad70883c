"""/faults on the admin HTTP server: behind the login when there is one, bodies read, and the
console's routes still GET/HEAD only. A real AdminServer on a loop in a thread, urllib as client."""

from __future__ import annotations

import asyncio
import base64
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from kcompat.admin_http.faults import faults_route
from kcompat.admin_http.http_server import AdminServer, Page
from kcompat.fault_client import FaultApiError, Faults
from kcompat.faults import FaultEngine

GOOD = "Basic " + base64.b64encode(b"bob:secret").decode()


def serve(login: bool) -> Iterator[tuple[str, FaultEngine]]:
    engine = FaultEngine()
    server = AdminServer(
        {"/metrics": lambda query: Page(b"ok\n")},
        (lambda header: "bob" if header == GOOD else None) if login else None,
        api={"/faults": faults_route(engine)},
    )
    sock = socket.create_server(("127.0.0.1", 0))
    sock.setblocking(False)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(server.start(sock), loop).result(5)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}", engine
    asyncio.run_coroutine_threadsafe(server.close(), loop).result(5)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    loop.close()
    sock.close()


@pytest.fixture
def open_admin() -> Iterator[tuple[str, FaultEngine]]:
    yield from serve(login=False)


@pytest.fixture
def guarded_admin() -> Iterator[tuple[str, FaultEngine]]:
    yield from serve(login=True)


def test_faults_need_the_login(guarded_admin: tuple[str, FaultEngine]) -> None:
    url, engine = guarded_admin
    with pytest.raises(FaultApiError) as e:
        Faults(url).add("drop")
    assert e.value.status == 401 and not engine.rules
    with pytest.raises(FaultApiError):
        Faults(url, "bob", "wrong").list()
    faults = Faults(url, "bob", "secret")
    rule = faults.add("drop", api="Fetch", trigger="once")
    assert [r["id"] for r in faults.list()] == [rule] and engine.armed


def test_round_trip_and_keep_alive(open_admin: tuple[str, FaultEngine]) -> None:
    url, engine = open_admin
    faults = Faults(url)
    ids = [faults.add("delay", api="Produce", delay_ms=10), faults.add("error", error=6, trigger={"nth": 2})]
    assert [r["action"]["kind"] for r in faults.list()] == ["delay", "error"]
    faults.replace(ids[0], "blackhole", client_id="x")
    assert faults.get(ids[0])["match"] == {"client_id": ["x"]}
    faults.remove(ids[1])
    assert faults.clear() == 1 and not engine.rules


def test_console_routes_stay_read_only(open_admin: tuple[str, FaultEngine]) -> None:
    url, _ = open_admin
    req = urllib.request.Request(f"{url}/metrics", data=b"{}", method="POST")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=5)
    e.value.close()
    assert e.value.code == 405
    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as page:
        assert page.read() == b"ok\n"

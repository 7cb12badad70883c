"""The `kcompat_capture` fixture of the kcompat pytest plugin (kcompat.testing): traffic captures on
a running broker started with an admin listener, removed when the test ends.

    def test_billing_writes(kcompat_broker_factory, kcompat_capture):
        broker = kcompat_broker_factory({"admin.listener": f"127.0.0.1:{free_port()}"})
        captures = kcompat_capture(broker)            # or kcompat_capture("http://host:port")
        cid = captures.start(topic="orders", client_id="billing")
        ...                                           # the code under test produces
        assert [r["value"] for r in captures.produced(cid)] == ["a", "b"]
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kcompat.capture_client import Captures


@pytest.fixture
def kcompat_capture() -> Iterator[Callable[..., Captures]]:
    """`kcompat_capture(broker_or_admin_url, user=None, password=None)`: a Captures client; every
    capture started through it is removed at the test's end."""
    made: list[tuple[Captures, list[int]]] = []

    def captures(target: Any, user: str | None = None, password: str | None = None) -> Captures:
        url = target if isinstance(target, str) else target.admin_url
        if url is None:
            raise ValueError("the broker has no admin listener: start it with admin.listener=127.0.0.1:PORT")
        client = _Tracked(url, user, password)
        made.append((client, client.started))
        return client

    yield captures
    for client, started in made:
        for cid in started:
            with contextlib.suppress(Exception):  # the broker may be gone (a test stopped it)
                client.remove(cid)


class _Tracked(Captures):
    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.started: list[int] = []

    def start(self, spec: Any = None, /, **kw: Any) -> int:
        cid = super().start(spec, **kw)
        self.started.append(cid)
        return cid

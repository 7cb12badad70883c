"""The `kcompat_faults` fixture of the kcompat pytest plugin (kcompat.testing): fault rules on a
running broker started with an admin listener, cleared when the test ends.

    def test_retry(kcompat_broker_factory, kcompat_faults):
        broker = kcompat_broker_factory({"admin.listener": f"127.0.0.1:{free_port()}"})
        faults = kcompat_faults(broker)           # or kcompat_faults("http://host:port")
        rule = faults.add("error", api="Produce", error="NOT_LEADER_OR_FOLLOWER", trigger="once")
        ...                                       # produce; the client retries
        assert faults.fired(rule) == 1
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kcompat.fault_client import Faults


@pytest.fixture
def kcompat_faults() -> Iterator[Callable[..., Faults]]:
    """`kcompat_faults(broker_or_admin_url, user=None, password=None)`: a Faults client; every broker's
    rules made through it are cleared at the test's end (a module's shared broker starts clean)."""
    made: list[Faults] = []

    def faults(target: Any, user: str | None = None, password: str | None = None) -> Faults:
        url = target if isinstance(target, str) else target.admin_url
        if url is None:
            raise ValueError("the broker has no admin listener: start it with admin.listener=127.0.0.1:PORT")
        client = Faults(url, user, password)
        made.append(client)
        return client

    yield faults
    for client in made:
        client.clear()

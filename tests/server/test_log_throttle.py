import logging

import pytest

from kcompat.server.log_throttle import LogThrottle


def test_one_line_per_key_per_interval_with_a_count(caplog: pytest.LogCaptureFixture) -> None:
    now = [100.0]
    t = LogThrottle(logging.getLogger("t"), interval_s=10, clock=lambda: now[0])
    with caplog.at_level(logging.ERROR, "t"):
        assert t.log(logging.ERROR, "disk", "append failed: %s", "ENOSPC")
        for _ in range(379):
            assert not t.log(logging.ERROR, "disk", "append failed: %s", "ENOSPC")
        assert t.log(logging.ERROR, "other", "another key is not held back")
        now[0] += 10
        assert t.log(logging.ERROR, "disk", "append failed: %s", "ENOSPC")
    assert [r.getMessage() for r in caplog.records] == [
        "append failed: ENOSPC",
        "another key is not held back",
        "append failed: ENOSPC (379 more like it in the last 10 s)",
    ]


def test_quiet_keys_are_forgotten_once_max_keys_are_held() -> None:
    now = [0.0]
    t = LogThrottle(logging.getLogger("t"), interval_s=10, clock=lambda: now[0], max_keys=3)
    for key in ("a", "b", "c"):
        assert t.log(logging.DEBUG, key, "x")
    assert not t.log(logging.DEBUG, "a", "x")
    now[0] = 11.0
    assert t.log(logging.DEBUG, "d", "x")  # a, b and c were quiet for an interval: forgotten
    assert set(t._last) == {"d"} and t._held == {}
    for key in ("e", "f"):
        assert t.log(logging.DEBUG, key, "x")
    assert t.log(logging.DEBUG, "g", "x")  # all recent: started again, never more than max_keys
    assert set(t._last) == {"g"}


def test_lines_below_pass_below_are_never_held(caplog: pytest.LogCaptureFixture) -> None:
    t = LogThrottle(logging.getLogger("t"), interval_s=10, clock=lambda: 0.0, pass_below=logging.INFO)
    with caplog.at_level(logging.DEBUG, "t"):
        assert t.log(logging.DEBUG, "k", "closed by the peer")
        assert t.log(logging.DEBUG, "k", "closed by the peer")  # every connection's DEBUG detail
        assert t.log(logging.WARNING, "k", "refused")
        assert not t.log(logging.WARNING, "k", "refused")
    assert [r.getMessage() for r in caplog.records] == ["closed by the peer"] * 2 + ["refused"]

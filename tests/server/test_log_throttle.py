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

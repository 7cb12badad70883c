"""The error-code table against protocol.html (when the reference folder has the table); against
the tables the installed clients carry in compat_tests/test_wire_client_codecs.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kcompat.wire.error_codes import ErrorCode

PROTOCOL_HTML = Path(__file__).resolve().parents[3] / "shared" / "kafka-protocol" / "docs" / "protocol.html"


def test_known_codes() -> None:
    assert ErrorCode.CORRUPT_MESSAGE == 2 and ErrorCode.CORRUPT_MESSAGE.retriable
    assert ErrorCode.INVALID_RECORD == 87 and not ErrorCode.INVALID_RECORD.retriable
    assert ErrorCode.NONE == 0 and not ErrorCode.NONE.retriable
    assert ErrorCode.UNKNOWN_SERVER_ERROR == -1
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER == 6 and ErrorCode.NOT_LEADER_OR_FOLLOWER.retriable
    assert ErrorCode.UNSUPPORTED_COMPRESSION_TYPE == 76
    assert ErrorCode(35) is ErrorCode.UNSUPPORTED_VERSION
    assert ErrorCode.of(32000) is ErrorCode.UNKNOWN_SERVER_ERROR
    assert ErrorCode.of(16) is ErrorCode.NOT_COORDINATOR


def test_codes_are_contiguous() -> None:
    assert sorted(ErrorCode) == list(range(-1, max(ErrorCode) + 1))


def _html_rows(html: str) -> list[tuple[str, int, bool]]:
    rows = re.findall(r"<tr><td>([A-Z_]+)</td><td>(-?\d+)</td><td>(True|False)</td>", html)
    return [(name, int(code), flag == "True") for name, code, flag in rows]


def test_every_code_in_protocol_html() -> None:
    if not PROTOCOL_HTML.exists():
        pytest.skip(f"Kafka's protocol.html is not at {PROTOCOL_HTML} (reference data beside the repository)")
    html = PROTOCOL_HTML.read_text()
    rows = _html_rows(html)
    if not rows:
        # Kafka's docs pull the table in at build time; this copy carries only the include.
        assert "generated/protocol_errors.html" in html
        return
    for name, code, retriable in rows:
        assert ErrorCode[name] == code
        assert ErrorCode[name].retriable is retriable

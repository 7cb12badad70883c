"""`kcompat fault`: the rule its options make, and its exit codes without a broker."""

from __future__ import annotations

import pytest

from kcompat.cli import build_parser, main
from kcompat.cmd.fault import _rule
from kcompat.faults import rule_from_json


def rule_of(*argv: str) -> object:
    return _rule(build_parser().parse_args(["fault", "add", *argv]))


def test_options_make_a_rule_the_engine_reads() -> None:
    rule = rule_of(
        "error", "--error", "48", "--api", "EndTxn", "--transactional-id", "tx", "--trigger", "once"
    )
    assert rule == {
        "match": {"api": "EndTxn", "transactional_id": "tx"},
        "action": {"kind": "error", "error": 48},
        "trigger": "once",
    }
    rule_from_json(rule)
    rule = rule_of(
        "delay",
        "--delay-ms",
        "5",
        "--partition",
        "0",
        "--partition",
        "2",
        "--trigger",
        "p=0.5",
        "--seed",
        "9",
    )
    assert rule == {
        "match": {"partition": [0, 2]},
        "action": {"kind": "delay", "delay_ms": 5},
        "trigger": {"probability": 0.5, "seed": 9},
    }
    assert rule_of("--json", '{"action": "drop"}') == {"action": "drop"}


def test_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fault", "add", "drop", "--trigger", "nth=x", "--admin", "127.0.0.1:1"]) == 2
    assert "--trigger 'nth=x'" in capsys.readouterr().err
    assert main(["fault", "add"]) == 2
    assert main(["fault", "list", "--admin", "127.0.0.1:1"]) == 3
    assert "cannot reach the admin listener at 127.0.0.1:1 (Connection refused)" in capsys.readouterr().err

"""`kcompat capture`: the capture its options make, and its exit codes and lines without a broker."""

from __future__ import annotations

from pathlib import Path

import pytest

from kcompat.capture import spec_from_json
from kcompat.cli import build_parser, main
from kcompat.cmd.capture import _spec


def spec_of(*argv: str) -> dict[str, object]:
    return _spec(build_parser().parse_args(["capture", "start", *argv]))


def test_options_make_a_capture_the_engine_reads() -> None:
    spec = spec_of("--topic", "orders", "--client-id", "a", "--client-id", "b", "--partition", "1")
    assert spec == {"match": {"topic": "orders", "client_id": ["a", "b"], "partition": 1}}
    spec_from_json(spec)
    spec = spec_of("--log", "t.jsonl", "--full", "--api", "Produce", "--max-bytes", "4096", "--files", "1")
    assert spec == {"match": {"api": "Produce"}, "kind": "log", "file": "t.jsonl", "full": True,
                    "max_bytes": 4096, "files": 1}  # fmt: skip
    spec_from_json(spec)


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (None, "cannot read"),
        ("nope", "is not JSON"),
        ('{"records": [{"direction": "produce", "topic": "t", "partition": "x"}]}', "is not a capture"),
        ('{"records": []}', "holds no produced record"),
    ],
)
def test_replay_of_a_bad_file_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, said: str
) -> None:
    path = tmp_path / "c.json"
    if content is not None:
        path.write_text(content)
    assert main(["capture", "replay", str(path), "--bootstrap", "127.0.0.1:1"]) == 2
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1 and "Traceback" not in err and "Errno" not in err


def test_no_admin_listener_is_exit_3(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["capture", "list", "--admin", "127.0.0.1:1"]) == 3
    assert "cannot reach the admin listener" in capsys.readouterr().err

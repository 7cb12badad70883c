"""Shell completion made from the parser (run through a real bash), and binary-safe encodings."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from kcompat import cli
from kcompat.cmd import completion
from kcompat.cmd.formats import FormatError, RecordView, decode_text, encode_bytes, line_parser, record_json


def script(shell: str) -> str:
    tree = completion.command_tree(cli.build_parser())
    return {"bash": completion.bash, "zsh": completion.zsh, "fish": completion.fish}[shell](tree)


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("kcompat gr", "group"),
        ("kcompat group s", "seek"),
        ("kcompat group delete-o", "delete-offsets"),
        ("kcompat user create bob --mech", "--mechanism"),
        ("kcompat user create bob --mechanism ", "SCRAM-SHA-256 SCRAM-SHA-512"),
        ("kcompat consume t --value-encoding b", "base64"),
        ("kcompat completion ", "-h --help bash zsh fish"),
        ("kcompat profile ", "create use list show delete -h --help"),
    ],
)
def test_bash_completes_nouns_verbs_options_and_choices(line: str, expected: str) -> None:
    extend = 'COMP_WORDS+=("");' if line.endswith(" ") else ""
    code = (
        f"source /dev/stdin; read -ra COMP_WORDS <<< {line!r}; {extend} "
        'COMP_CWORD=$((${#COMP_WORDS[@]}-1)); _kcompat; echo "${COMPREPLY[*]}"'
    )
    out = subprocess.run(
        ["bash", "-c", code], input=script("bash"), capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == expected


def test_zsh_and_fish_scripts_cover_the_same_commands() -> None:
    zsh, fish = script("zsh"), script("fish")
    assert "bashcompinit" in zsh and "complete -o default -F _kcompat kcompat" in zsh
    assert (
        "complete -c kcompat -n __fish_use_subcommand -a 'serve proxy config-docs topic produce consume group cluster config acl user profile completion"
        in fish
    )
    assert "__fish_seen_subcommand_from group; and __fish_seen_subcommand_from seek' -l to" in fish
    assert "-l value-encoding -x -a 'text hex base64'" in fish


def test_completion_command_prints_the_script() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "kcompat", "completion", "bash"], capture_output=True, text=True, check=True
    )
    assert out.stdout == script("bash")


def test_encodings_round_trip_every_byte() -> None:
    data = bytes(range(256))
    for enc in ("hex", "base64"):
        assert decode_text(encode_bytes(data, enc), enc) == data
    assert encode_bytes(b"caf\xc3\xa9 \xff") == "café \\xff"
    with pytest.raises(FormatError, match="not valid base64"):
        decode_text("!!", "base64")
    parse = line_parser("%k %v", "hex", "base64")
    assert parse("6b31 AAEC").key == b"k1" and parse("6b31 AAEC").value == b"\x00\x01\x02"


def test_record_json_flags_binary_as_base64() -> None:
    view = RecordView("t", 0, 5, 1, b"k", b"\xff\x00", (("h", b"v"),))
    assert record_json(view) == {
        "topic": "t", "partition": 0, "offset": 5, "timestamp": 1, "key": "k",
        "value": "/wA=", "value_encoding": "base64", "headers": [{"key": "h", "value": "v"}],
    }  # fmt: skip
    assert record_json(view, value_enc="hex")["value"] == "ff00"

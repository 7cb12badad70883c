"""Every `kcompat ...` command in docs/cli.md and the README's CLI section parses as written, so
the reference cannot drift from the command line."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from kcompat import cli

ROOT = Path(__file__).resolve().parents[2]


def commands(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    out = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.DOTALL):
        for line in block.replace("\\\n", " ").splitlines():
            start = line.find("kcompat ")
            if start < 0 or line[:start].strip() not in ("", "seq 1 100 |", "seq 1 100000 |", "source <("):
                continue
            words = shlex.split(line[start:], comments=True)
            cut = next((i for i, w in enumerate(words) if w in ("<", "<<<", ">", "|", ")")), len(words))
            out.append(" ".join(shlex.quote(w.rstrip(")")) for w in words[1:cut]))
    return out


DOCS = commands(ROOT / "docs" / "cli.md")


def test_the_reference_has_examples() -> None:
    assert len(DOCS) > 25


@pytest.mark.parametrize("line", DOCS)
def test_documented_command_parses(line: str) -> None:
    args = cli.build_parser().parse_args(shlex.split(line))
    assert getattr(args, "handler", None) is not None or args.command in cli.SERVER_COMMANDS

"""The README's links lead somewhere: every relative link names a file or folder of the
repository, and every `#anchor` a heading of the page it points into (GitHub's slugs). The
pages under docs/ are checked by the strict MkDocs build in `make check`."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    lines = page.read_text(encoding="utf-8").splitlines()
    return {_slug(line.lstrip("#")) for line in lines if line.startswith("#")}


def _relative_links(page: Path) -> list[str]:
    text = page.read_text(encoding="utf-8")
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t)]


def test_every_relative_link_of_the_readme_resolves() -> None:
    readme = ROOT / "README.md"
    broken = []
    for target in _relative_links(readme):
        path, _, anchor = target.partition("#")
        page = (readme.parent / path) if path else readme
        if not page.exists() or (anchor and (page.suffix != ".md" or anchor not in _anchors(page))):
            broken.append(target)
    assert broken == []


def test_the_check_finds_a_missing_page_and_anchor(tmp_path: Path) -> None:
    page = tmp_path / "README.md"
    page.write_text("# Top\n## Set-up: two commands\n[a](#set-up-two-commands) [b](#nope) [c](gone.md)\n")
    links = _relative_links(page)
    assert links == ["#set-up-two-commands", "#nope", "gone.md"]
    assert "set-up-two-commands" in _anchors(page)
    assert "nope" not in _anchors(page)

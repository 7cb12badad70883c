#!/usr/bin/env python3
"""Fail if the pure layers import anything that does I/O or reads a clock.

kcompat/wire, kcompat/metadata and kcompat/coordinator are functions over bytes and values: the server owns
sockets, files, tasks and time, and passes time in. Checked from the source, so a lazy
import inside a function is caught too.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PURE = {
    "kcompat/wire": {"asyncio", "socket", "os", "mmap", "time", "select", "selectors", "subprocess",
                     "threading", "pathlib", "shutil", "signal", "uvloop", "kcompat.server", "kcompat.log"},
    "kcompat/metadata": {"asyncio", "socket", "os", "mmap", "time", "select", "selectors", "subprocess",
                         "threading", "pathlib", "shutil", "signal", "uvloop", "kcompat.server", "kcompat.log"},
    "kcompat/coordinator": {"asyncio", "socket", "os", "mmap", "time", "select", "selectors", "subprocess",
                            "threading", "pathlib", "shutil", "signal", "uvloop", "kcompat.server", "kcompat.log"},
}


def imported(tree: ast.AST) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
    return out


def violations() -> list[str]:
    found = []
    for folder, banned in PURE.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            for line, name in imported(ast.parse(path.read_text(), str(path))):
                if any(name == b or name.startswith(b + ".") for b in banned):
                    found.append(f"{path.relative_to(ROOT)}:{line}: imports {name}")
    return found


def main() -> int:
    bad = violations()
    for v in bad:
        print(v)
    print(f"import rule: {len(bad)} violation(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Check the architecture rules that imports and sizes can prove, from the source:

1. kcompat/wire, kcompat/metadata, kcompat/coordinator and kcompat/security are functions over bytes and values: they import nothing
   that does I/O or reads a clock (the server owns sockets, files, tasks and time, and passes
   time in). A lazy import inside a function is caught too.
2. kcompat/log and kcompat/storage import nothing of kcompat.server (the log returns file slices;
   only the server touches sockets; metadata files are storage-side).
3. No import cycle anywhere in kcompat, counting imports under TYPE_CHECKING and inside functions:
   a cycle hidden by a lazy import is still two modules that cannot be understood one at a time.
4. No module over 500 lines, except the generated schemas (kcompat/wire/messages) and their typed
   classes (kcompat/wire/types, tools/gen_messages.py).

    python tools/check_imports.py [--strict]

Cycles listed in KNOWN_CYCLES and modules in KNOWN_LONG are being fixed elsewhere: they are
reported but do not fail the check unless --strict is given (or the lists are emptied).
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "kcompat"
MAX_LINES = 500
GENERATED = ("kcompat/wire/messages", "kcompat/wire/types")
_IO = {"asyncio", "socket", "os", "mmap", "time", "select", "selectors", "subprocess", "threading",
       "pathlib", "shutil", "signal", "uvloop", "kcompat.server", "kcompat.log"}  # fmt: skip
PURE = {
    "kcompat/wire": _IO,
    "kcompat/metadata": _IO,
    "kcompat/coordinator": _IO,
    "kcompat/security": _IO,
    "kcompat/log": {"kcompat.server"},
    "kcompat/storage": {"kcompat.server"},
}

# Being fixed by other changes: reported, not failing, unless --strict. Empty them when fixed.
KNOWN_CYCLES: list[frozenset[str]] = []
KNOWN_LONG: frozenset[str] = frozenset()


def imported(tree: ast.AST, module: str = "", is_package: bool = False) -> list[tuple[int, str]]:
    """(line, dotted name) of every import in `tree`; relative ones are resolved against `module`."""
    return [(line, name) for line, name, _ in _imports(tree, module, is_package)]


def _imports(tree: ast.AST, module: str, is_package: bool) -> list[tuple[int, str, list[str]]]:
    """(line, module, names taken from it) of every import statement, anywhere in `tree`."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if not module:
                    continue
                parts = module.split(".")
                base = parts[: len(parts) - node.level + (1 if is_package else 0)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            out.append((node.lineno, name, [a.name for a in node.names]))
    return out


def modules(root: Path, package: str = PACKAGE) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file of `package` under `root`."""
    found = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _banned(name: str, banned: Iterable[str]) -> bool:
    return any(name == b or name.startswith(b + ".") for b in banned)


def violations(root: Path = ROOT) -> list[str]:
    """Rules 1 and 2: imports a layer must not make."""
    found = []
    for folder, banned in PURE.items():
        for path in sorted((root / folder).rglob("*.py")):
            for line, name in imported(ast.parse(path.read_text(), str(path))):
                if _banned(name, banned):
                    found.append(f"{path.relative_to(root)}:{line}: imports {name}")
    return found


def import_graph(root: Path = ROOT, package: str = PACKAGE) -> dict[str, set[str]]:
    """Module -> the modules of `package` it imports (anywhere in its source)."""
    mods = modules(root, package)
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        tree = ast.parse(path.read_text(), str(path))
        targets = set()
        for _, target, names in _imports(tree, name, path.name == "__init__.py"):
            # "from pkg import mod" imports the submodule; "from mod import f" the module itself
            for n in names or ["*"]:
                if f"{target}.{n}" in mods:
                    targets.add(f"{target}.{n}")
                elif target in mods:
                    targets.add(target)
        targets.discard(name)
        graph[name] = targets
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph) + 100))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def long_modules(root: Path = ROOT, package: str = PACKAGE, limit: int = MAX_LINES,
                 generated: Iterable[str] = GENERATED) -> list[str]:  # fmt: skip
    """Rule 4: modules over `limit` lines, outside the generated folders."""
    skip = tuple(root / g for g in generated)
    found = []
    for path in modules(root, package).values():
        if any(path.is_relative_to(g) for g in skip):
            continue
        n = len(path.read_text().splitlines())
        if n > limit:
            found.append(f"{path.relative_to(root)}: {n} lines (at most {limit})")
    return found


def check(root: Path = ROOT, *, known_cycles: Iterable[frozenset[str]] = (),
          known_long: Iterable[str] = (), strict: bool = False) -> tuple[list[str], list[str]]:  # fmt: skip
    """(failures, known problems only reported): every rule over root/kcompat."""
    known = [frozenset(k) for k in known_cycles]
    long_ok = () if strict else tuple(known_long)
    failures = violations(root)
    reported = []
    for line in long_modules(root):
        (reported if line.startswith(tuple(f"{m}:" for m in long_ok)) else failures).append(line)
    for component in cycles(import_graph(root)):
        line = "import cycle: " + " <-> ".join(component)
        if not strict and any(set(component) <= k for k in known):
            reported.append(line)
        else:
            failures.append(line)
    return failures, reported


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--strict", action="store_true", help="fail on KNOWN_CYCLES and KNOWN_LONG too")
    args = parser.parse_args(argv)
    failures, reported = check(known_cycles=KNOWN_CYCLES, known_long=KNOWN_LONG, strict=args.strict)
    for line in failures:
        print(line)
    for line in reported:
        print(f"{line} (known; fails with --strict)")
    print(f"import rules: {len(failures)} violation(s), {len(reported)} known problem(s) reported")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

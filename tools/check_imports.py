#!/usr/bin/env python3
"""Check the architecture rules that imports, names and sizes can prove, from the source:

1. kcompat/wire, kcompat/metadata, kcompat/coordinator, kcompat/security and kcompat/faults
   are functions over bytes and values: they import nothing that does I/O or reads a clock (the
   server owns sockets, files, tasks and time, and passes time in). A lazy import inside a
   function is caught too. kcompat/faults imports no kcompat.proxy either: it serves both.
2. kcompat/log and kcompat/storage import nothing of kcompat.server (the log returns file slices;
   only the server touches sockets; metadata files are storage-side); kcompat/capture imports
   neither kcompat.server nor kcompat.proxy (its engine serves both), nor does kcompat/admin_http
   (the HTTP server and the /faults and /captures APIs both fronts share).
3. The wings of kcompat/server (WINGS): nothing outside server/cluster/ imports it, except the
   assembly point (ASSEMBLY_IMPORTERS may import CLUSTER_ASSEMBLY, which builds cluster mode);
   network/ imports no request handling (handlers, groups, transactions, cluster, broker,
   dispatcher); admin/ only reads (no handlers, dispatcher, registry or cluster); no handler
   imports broker.py; kcompat/proxy uses wire, config, client and server/network only, never
   the broker's request handling, log or coordinators. Imports under TYPE_CHECKING and inside functions count.
4. admin/ reaches no `_`-name of another object or module: no `x._name` unless x is self or cls,
   no `from m import _name` (it reads through the read model, not private state).
5. No import cycle anywhere in kcompat, counting imports under TYPE_CHECKING and inside functions:
   a cycle hidden by a lazy import is still two modules that cannot be understood one at a time.
6. No module over 500 lines as formatted (`ruff format --check` holds kcompat to its format), and
   so no `# fmt: skip` or `# fmt: off` in kcompat outside the genuine tables of FMT_SKIP_ALLOWED;
   the generated schemas (kcompat/wire/messages) and their typed classes (kcompat/wire/types,
   tools/gen_messages.py) are not counted.

    python tools/check_imports.py [--strict]

The KNOWN_* lists name what today's tree still breaks while other changes fix it: those
problems are reported and do not fail. With --strict an entry that no longer matches anything
fails too ("stale"), so the lists only shrink: empty an entry once its fix has landed.
"""

from __future__ import annotations

import argparse
import ast
import functools
import io
import re
import sys
import tokenize
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "kcompat"
MAX_LINES = 500
GENERATED = ("kcompat/wire/messages", "kcompat/wire/types")
_IO = {
    "asyncio",
    "socket",
    "os",
    "mmap",
    "time",
    "select",
    "selectors",
    "subprocess",
    "threading",
    "pathlib",
    "shutil",
    "signal",
    "uvloop",
    "kcompat.server",
    "kcompat.log",
}
PURE = {
    "kcompat/wire": _IO,
    "kcompat/metadata": _IO,
    "kcompat/coordinator": _IO,
    "kcompat/security": _IO,
    "kcompat/quotas": _IO,  # client quotas' entities, precedence and windowed rate
    "kcompat/telemetry": _IO,  # KIP-714 subscriptions, client instances and OTLP decoding
    "kcompat/faults": _IO | {"kcompat.proxy"},  # the rule engine serves the broker and the proxy alike
    "kcompat/log": {"kcompat.server"},
    "kcompat/storage": {"kcompat.server"},
    # capture writes its files (a thread), but serves the broker and the proxy alike
    "kcompat/capture": {"kcompat.server", "kcompat.proxy"},
    # the admin HTTP server and the /faults and /captures APIs serve the broker and the proxy alike
    "kcompat/admin_http": {"kcompat.server", "kcompat.proxy"},
}


@dataclass(frozen=True)
class WingRule:
    """Modules under `folder` (or, with `outside`, every kcompat module not under it) may not
    import `banned`; `why` is printed with each violation."""

    name: str
    folder: str
    banned: tuple[str, ...]
    why: str
    outside: bool = False


_S = "kcompat.server"
CLUSTER_ASSEMBLY = f"{_S}.cluster.assembly"  # the one module that builds cluster mode
ASSEMBLY_IMPORTERS = frozenset({f"{_S}.broker"})  # may import CLUSTER_ASSEMBLY, lazily, in cluster mode
_PROXY_BANNED_SERVER = (
    "handlers", "groups", "transactions", "cluster", "broker", "dispatcher", "registry", "context",
    "replica_manager", "delayed_fetch", "delayed_produce", "fetch_session", "local_metadata",
    "metadata_view", "admin", "auth.access", "auth.consumer_group_acl", "auth.offset_acl", "auth.oauth_jwks",
    "serve", "share",
)  # fmt: skip  # auth.sasl is allowed: SASL terminated at the proxy runs the broker's mechanisms
# scram_credentials is allowed: the proxy derives its SCRAM users' credentials with it
_PROXY_BANNED_STORAGE = (
    "acl_store", "feature_store", "producer_id_store", "quota_store", "resource_configs", "topic_store",
)  # fmt: skip
PROXY_BANNED = (
    *(f"{_S}.{m}" for m in _PROXY_BANNED_SERVER),
    "kcompat.log",
    *(f"kcompat.storage.{m}" for m in _PROXY_BANNED_STORAGE),
    "kcompat.coordinator",
    "kcompat.metadata",
)
WINGS = (
    WingRule(
        "cluster-is-a-wing",
        "kcompat/server/cluster",
        (f"{_S}.cluster",),
        "cluster mode is built by its assembly, behind the core's Protocols",
        outside=True,
    ),
    WingRule(
        "network-handles-no-requests",
        "kcompat/server/network",
        tuple(
            f"{_S}.{m}"
            for m in ("handlers", "groups", "transactions", "share", "cluster", "broker", "dispatcher")
        ),
        "the network wing moves frames; requests are the core's",
    ),
    WingRule(
        "admin-only-reads",
        "kcompat/server/admin",
        tuple(f"{_S}.{m}" for m in ("handlers", "dispatcher", "registry", "cluster")),
        "the admin listener reads through the read model",
    ),
    WingRule(
        "share-serves-handlers",
        "kcompat/server/share",
        tuple(f"{_S}.{m}" for m in ("handlers", "dispatcher", "broker", "network", "cluster")),
        "share groups are services the handlers call, never the other way round",
    ),
    WingRule(
        "proxy-handles-no-requests",
        "kcompat/proxy",
        PROXY_BANNED,
        "the proxy relays and rewrites frames (wire, config, client, the network wing); it never "
        "answers requests as the broker does",
    ),
    WingRule(
        "handlers-see-no-broker",
        "kcompat/server/handlers",
        (f"{_S}.broker",),
        "a handler sees the narrow services of its RequestContext",
    ),
)
PRIVATE_READS_FOLDER = "kcompat/server/admin"
FMT_SKIP_ALLOWED: frozenset[str] = frozenset()  # files whose genuine tables may keep `# fmt: skip`

# Being fixed by other changes: reported, not failing. Empty each entry when its fix lands
# (--strict fails on an entry that no longer matches).
KNOWN_CYCLES: list[frozenset[str]] = []
KNOWN_LONG: frozenset[str] = frozenset()
# (rule name, file, imported module)
KNOWN_WING_IMPORTS: frozenset[tuple[str, str, str]] = frozenset()
# (file, `_`-name reached)
KNOWN_PRIVATE_READS: frozenset[tuple[str, str]] = frozenset()


def imported(tree: ast.AST, module: str = "", is_package: bool = False) -> list[tuple[int, str]]:
    """(line, dotted name) of every import in `tree`; relative ones are resolved against `module`."""
    return [(line, name) for line, name, _ in _imports(tree, module, is_package)]


def _imports(tree: ast.AST, module: str, is_package: bool) -> list[tuple[int, str, list[str]]]:
    """(line, module, names taken from it) of every import statement, anywhere in `tree`."""
    out = []
    for node in _statements(tree):
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
    return sorted(out)


def _statements(tree: ast.AST) -> Iterator[ast.AST]:
    """Every statement of `tree`, nested ones too, without walking into expressions."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        stack += (
            c
            for c in ast.iter_child_nodes(node)
            if isinstance(c, ast.stmt | ast.excepthandler | ast.match_case)
        )


def modules(root: Path, package: str = PACKAGE) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file of `package` under `root`."""
    found = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _parse(path: Path) -> ast.Module:
    return _parse_text(path.read_text(), str(path))


@functools.cache  # each rule walks the same files; keyed on the text, so an edited file is parsed again
def _parse_text(text: str, filename: str) -> ast.Module:
    return ast.parse(text, filename)


def _banned(name: str, banned: Iterable[str]) -> bool:
    return any(name == b or name.startswith(b + ".") for b in banned)


def violations(root: Path = ROOT) -> list[str]:
    """Rules 1 and 2: imports a layer must not make (relative ones resolved)."""
    found = []
    mods = modules(root)
    for folder, banned in PURE.items():
        inside = root / folder
        for module, path in mods.items():
            if not path.is_relative_to(inside):
                continue
            tree = _parse(path)
            for line, name in imported(tree, module, path.name == "__init__.py"):
                if _banned(name, banned):
                    found.append(f"{path.relative_to(root)}:{line}: imports {name}")
    return found


def wing_imports(root: Path = ROOT, rules: Iterable[WingRule] = WINGS) -> list[tuple[str, str, str, str]]:
    """Rule 3: (rule name, file, imported module, message) of every import a wing must not make.
    `from pkg import mod` counts as importing pkg.mod."""
    found = []
    mods = modules(root)
    imports = {m: _imports(_parse(p), m, p.name == "__init__.py") for m, p in mods.items()}
    for rule in rules:
        inside = root / rule.folder
        for module, path in mods.items():
            if path.is_relative_to(inside) == rule.outside:
                continue
            for line, target, names in imports[module]:
                # "from pkg import mod" imports pkg.mod; "from mod import f" imports mod
                for name in {f"{target}.{n}" if f"{target}.{n}" in mods else target for n in names or [""]}:
                    if not _banned(name, rule.banned):
                        continue
                    if rule.outside and module in ASSEMBLY_IMPORTERS and name == CLUSTER_ASSEMBLY:
                        continue
                    file = str(path.relative_to(root))
                    found.append((rule.name, file, name, f"{file}:{line}: imports {name} ({rule.why})"))
    return sorted(set(found))


def private_reads(root: Path = ROOT, folder: str = PRIVATE_READS_FOLDER) -> list[tuple[str, str, str]]:
    """Rule 4: (file, name, message) of every `_`-name reached from `folder` on another object
    (`x._name`, x not self or cls) or module (`from m import _name`). Dunders are not private."""
    found: list[tuple[str, int, str, str]] = []
    for path in sorted((root / folder).rglob("*.py")):
        file = str(path.relative_to(root))
        for node in ast.walk(_parse(path)):
            if isinstance(node, ast.Attribute):
                own = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
                if _private(node.attr) and not own:
                    found.append((file, node.lineno, node.attr, "reads {} of another object"))
            elif isinstance(node, ast.ImportFrom):
                found += [
                    (file, node.lineno, a.name, "imports private {}") for a in node.names if _private(a.name)
                ]
    return [(file, name, f"{file}:{line}: " + what.format(name)) for file, line, name, what in sorted(found)]


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


_FMT_SKIP = re.compile(r"#.*\bfmt:\s*(skip|off)\b")


def fmt_skips(root: Path = ROOT, allowed: Iterable[str] = FMT_SKIP_ALLOWED) -> list[str]:
    """Rule 6: `# fmt: skip`/`# fmt: off` comments in kcompat, outside the generated folders and
    `allowed` (they hold lines back from the formatter, and so from the line count)."""
    skip = tuple(root / g for g in GENERATED)
    allowed = set(allowed)
    found = []
    for path in modules(root).values():
        file = str(path.relative_to(root))
        if file in allowed or any(path.is_relative_to(g) for g in skip):
            continue
        text = path.read_text()
        if "fmt:" not in text:
            continue
        tokens = tokenize.generate_tokens(io.StringIO(text).readline)
        found += [
            f"{file}:{t.start[0]}: {t.string.strip()} outside a genuine table"
            for t in tokens
            if t.type == tokenize.COMMENT and _FMT_SKIP.match(t.string)
        ]
    return found


def import_graph(root: Path = ROOT, package: str = PACKAGE) -> dict[str, set[str]]:
    """Module -> the modules of `package` it imports (anywhere in its source)."""
    mods = modules(root, package)
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        tree = _parse(path)
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


def long_modules(
    root: Path = ROOT, package: str = PACKAGE, limit: int = MAX_LINES, generated: Iterable[str] = GENERATED
) -> list[tuple[str, str]]:
    """Rule 6: (file, message) of every module over `limit` lines, outside the generated folders."""
    skip = tuple(root / g for g in generated)
    found = []
    for path in modules(root, package).values():
        if any(path.is_relative_to(g) for g in skip):
            continue
        n = len(path.read_text().splitlines())
        if n > limit:
            file = str(path.relative_to(root))
            found.append((file, f"{file}: {n} lines (at most {limit})"))
    return found


@dataclass(frozen=True)
class Known:
    """What today's tree is allowed to break while other changes fix it (see the KNOWN_* lists)."""

    cycles: Iterable[frozenset[str]] = ()
    long: Iterable[str] = ()
    wing_imports: Iterable[tuple[str, str, str]] = ()
    private_reads: Iterable[tuple[str, str]] = ()


KNOWN = Known(KNOWN_CYCLES, KNOWN_LONG, KNOWN_WING_IMPORTS, KNOWN_PRIVATE_READS)


def check(
    root: Path = ROOT,
    known: Known | None = None,
    *,
    strict: bool = False,
    fmt_allowed: Iterable[str] = FMT_SKIP_ALLOWED,
) -> tuple[list[str], list[str]]:
    """(failures, known problems only reported): every rule over root/kcompat. With `strict`, a
    known entry that matches no problem is a failure: the fix landed, empty the entry."""
    known = known or Known()
    allowed: dict[str, set[object]] = {
        "KNOWN_CYCLES": {frozenset(k) for k in known.cycles},
        "KNOWN_LONG": set(known.long),
        "KNOWN_WING_IMPORTS": set(known.wing_imports),
        "KNOWN_PRIVATE_READS": set(known.private_reads),
    }
    failures = violations(root) + fmt_skips(root, fmt_allowed)
    reported: list[str] = []
    used: set[object] = set()

    def sort(key: object, entries: str, line: str) -> None:
        if key in allowed[entries]:
            used.add(key)
            reported.append(line)
        else:
            failures.append(line)

    for rule, file, name, line in wing_imports(root):
        sort((rule, file, name), "KNOWN_WING_IMPORTS", line)
    for file, name, line in private_reads(root):
        sort((file, name), "KNOWN_PRIVATE_READS", line)
    for file, line in long_modules(root):
        sort(file, "KNOWN_LONG", line)
    for component in cycles(import_graph(root)):
        within = [k for k in allowed["KNOWN_CYCLES"] if isinstance(k, frozenset) and set(component) <= k]
        sort(within[0] if within else None, "KNOWN_CYCLES", "import cycle: " + " <-> ".join(component))
    if strict:
        for entries, keys in allowed.items():
            for key in sorted(keys - used, key=str):
                shown = sorted(key) if isinstance(key, frozenset) else key
                failures.append(f"stale {entries} entry {shown}: the problem is gone, remove the entry")
    return failures, reported


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--strict", action="store_true", help="fail on KNOWN_* entries that match nothing")
    args = parser.parse_args(argv)
    failures, reported = check(known=KNOWN, strict=args.strict)
    for line in failures:
        print(line)
    for line in reported:
        print(f"{line} (known)")
    print(f"import rules: {len(failures)} violation(s), {len(reported)} known problem(s) reported")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

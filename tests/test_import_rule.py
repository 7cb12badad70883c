"""The architecture rules of tools/check_imports.py hold on kcompat, and each check can fail
(shown on small synthetic kcompat trees in tmp_path)."""

from __future__ import annotations

import ast
from pathlib import Path

from tools.check_imports import KNOWN_CYCLES, KNOWN_LONG, check, cycles, import_graph, imported, main


def test_kcompat_passes() -> None:
    failures, _ = check(known_cycles=KNOWN_CYCLES, known_long=KNOWN_LONG)
    assert failures == []
    assert main([]) == 0


def test_checker_sees_nested_and_from_imports() -> None:
    tree = ast.parse("def f():\n    import os.path\nfrom asyncio import sleep\n")
    assert sorted(n for _, n in imported(tree)) == ["asyncio", "os.path"]


def tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for folder in {p.parent for p in root.rglob("*.py")}:
        (folder / "__init__.py").touch()
    return root


def test_clean_tree_passes(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            "kcompat/wire/a.py": "import struct\n",
            "kcompat/server/b.py": "import os\nfrom kcompat.wire import a\n",
        },
    )
    assert check(root) == ([], [])


def test_io_in_a_pure_layer_fails(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            "kcompat/wire/a.py": "def f():\n    import time\n",
            "kcompat/coordinator/c.py": "from socket import socket\n",
        },
    )
    failures, _ = check(root)
    assert sorted(failures) == [
        "kcompat/coordinator/c.py:1: imports socket",
        "kcompat/wire/a.py:2: imports time",
    ]


def test_log_importing_the_server_fails(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {"kcompat/log/a.py": "import os\nfrom kcompat.server.b import X\n", "kcompat/server/b.py": "X = 1\n"},
    )
    failures, _ = check(root)
    assert failures == ["kcompat/log/a.py:2: imports kcompat.server.b"]


def test_a_cycle_fails_even_under_type_checking_and_relative(tmp_path: Path) -> None:
    root = tree(tmp_path, {
        "kcompat/server/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from kcompat.server.b import B\n",
        "kcompat/server/b.py": "from . import c\n",
        "kcompat/server/c.py": "def f():\n    from .a import A\n",
        "kcompat/server/d.py": "from kcompat.server import a\n",  # into the cycle, not part of it
    })  # fmt: skip
    failures, _ = check(root)
    assert failures == ["import cycle: kcompat.server.a <-> kcompat.server.b <-> kcompat.server.c"]


def test_a_known_cycle_is_reported_unless_strict(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            "kcompat/server/a.py": "from kcompat.server import b\n",
            "kcompat/server/b.py": "import kcompat.server.a\n",
        },
    )
    known = [frozenset({"kcompat.server.a", "kcompat.server.b"})]
    assert check(root, known_cycles=known) == ([], ["import cycle: kcompat.server.a <-> kcompat.server.b"])
    assert check(root, known_cycles=known, strict=True) == (
        ["import cycle: kcompat.server.a <-> kcompat.server.b"],
        [],
    )


def test_a_long_module_fails_but_not_generated_schemas(tmp_path: Path) -> None:
    long = "x = 1\n" * 501
    root = tree(
        tmp_path,
        {
            "kcompat/server/big.py": long,
            "kcompat/wire/messages/gen.py": long,
            "kcompat/server/ok.py": "x = 1\n" * 500,
        },
    )
    failures, _ = check(root)
    assert failures == ["kcompat/server/big.py: 501 lines (at most 500)"]
    assert check(root, known_long=["kcompat/server/big.py"]) == ([], failures)
    assert check(root, known_long=["kcompat/server/big.py"], strict=True) == (failures, [])


def test_from_package_import_name_is_an_edge_to_the_package(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            "kcompat/server/__init__.py": "X = 1\n",
            "kcompat/server/a.py": "from kcompat.server import X, b\n",
            "kcompat/server/b.py": "",
        },
    )
    assert import_graph(root)["kcompat.server.a"] == {"kcompat.server", "kcompat.server.b"}


def test_cycles_of_a_graph() -> None:
    graph = {"a": {"b"}, "b": {"a", "c"}, "c": {"d"}, "d": {"c"}, "e": {"a"}}
    assert cycles(graph) == [["a", "b"], ["c", "d"]]


def test_unit_tests_import_no_third_party_kafka_client() -> None:
    """tests/ is the unit layer: real kcompat parts only; the client libraries belong in compat_tests/."""
    root = Path(__file__).resolve().parent
    clients = {"kafka", "confluent_kafka", "aiokafka"}
    found = [
        f"{path.relative_to(root)}:{line}: {name}"
        for path in sorted(root.rglob("test_*.py"))
        for line, name in imported(ast.parse(path.read_text()))
        if name.split(".")[0] in clients
    ]
    assert found == []

"""The import rule holds, and the checker really catches a violation."""

import ast

from tools.check_imports import imported, violations


def test_pure_layers_import_no_io() -> None:
    assert violations() == []


def test_checker_sees_nested_and_from_imports() -> None:
    tree = ast.parse("def f():\n    import os.path\nfrom asyncio import sleep\n")
    assert sorted(n for _, n in imported(tree)) == ["asyncio", "os.path"]

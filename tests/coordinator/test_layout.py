"""The coordinator's shape (issue 13): parts composed, not mixed in, and no way back to the broker.

No coordinator module imports its own package (only its sibling modules) or re-declares another
module's methods under TYPE_CHECKING; the group service and the offsets topic never import the
broker (not even for type checking), so broker -> group service is not a cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
    return out


def test_coordinator_modules_import_siblings_not_their_package() -> None:
    for path in sorted((ROOT / "kcompat/coordinator").glob("*.py")):
        if path.name == "__init__.py":
            continue
        assert "kcompat.coordinator" not in imports(path), path.name
        assert "TYPE_CHECKING" not in path.read_text(), path.name


def test_no_coordinator_class_is_a_mixin_of_another() -> None:
    for path in sorted((ROOT / "kcompat/coordinator").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                bases = {b.id for b in node.bases if isinstance(b, ast.Name)}
                assert not bases & {"ClassicRebalance", "GroupMetadataManager", "OffsetMetadataManager",
                                    "ConsumerGroupProtocol", "ClassicGroupProtocol"}, (path.name, node.name)  # fmt: skip


def test_group_service_does_not_import_the_broker() -> None:
    for name in ("group_service.py", "offsets_topic.py"):
        assert "kcompat.server.broker" not in imports(ROOT / "kcompat/server/groups" / name), name


def test_modules_stay_small() -> None:
    for path in sorted((ROOT / "kcompat/coordinator").rglob("*.py")):
        assert len(path.read_text().splitlines()) < 500, path.name

"""The architecture rules of tools/check_imports.py hold on kcompat, and each check can fail
(shown on small synthetic kcompat trees in tmp_path)."""

from __future__ import annotations

import ast
from pathlib import Path

from tools.check_imports import KNOWN, Known, check, cycles, import_graph, imported, main


def test_kcompat_passes() -> None:
    failures, _ = check(known=KNOWN, strict=True)
    assert failures == []  # a "stale" failure: a KNOWN_* entry whose fix landed; remove it
    assert main([]) == 0
    assert main(["--strict"]) == 0


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
        {
            "kcompat/log/a.py": "import os\nfrom kcompat.server.b import X\n",
            "kcompat/log/c.py": "from ..server import b\n",
            "kcompat/server/b.py": "X = 1\n",
        },
    )
    failures, _ = check(root)
    assert failures == [
        "kcompat/log/a.py:2: imports kcompat.server.b",
        "kcompat/log/c.py:1: imports kcompat.server",
    ]


def test_a_cycle_fails_even_under_type_checking_and_relative(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            "kcompat/server/a.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from kcompat.server.b import B\n"
            ),
            "kcompat/server/b.py": "from . import c\n",
            "kcompat/server/c.py": "def f():\n    from .a import A\n",
            "kcompat/server/d.py": "from kcompat.server import a\n",  # into the cycle, not part of it
        },
    )
    failures, _ = check(root)
    assert failures == ["import cycle: kcompat.server.a <-> kcompat.server.b <-> kcompat.server.c"]


def test_a_known_cycle_is_reported_and_a_stale_entry_fails_strict(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            "kcompat/server/a.py": "from kcompat.server import b\n",
            "kcompat/server/b.py": "import kcompat.server.a\n",
        },
    )
    line = "import cycle: kcompat.server.a <-> kcompat.server.b"
    assert check(root) == ([line], [])
    known = Known(cycles=[frozenset({"kcompat.server.a", "kcompat.server.b", "kcompat.server.c"})])
    assert check(root, known) == ([], [line])
    assert check(root, known, strict=True) == ([], [line])
    (root / "kcompat/server/b.py").write_text("")  # the cycle is broken: the entry must go
    assert check(root, known) == ([], [])
    assert check(root, known, strict=True) == (
        [
            "stale KNOWN_CYCLES entry ['kcompat.server.a', 'kcompat.server.b', 'kcompat.server.c']:"
            " the problem is gone, remove the entry"
        ],
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
    known = Known(long=["kcompat/server/big.py", "kcompat/server/ok.py"])
    assert check(root, known) == ([], failures)
    assert check(root, known, strict=True) == (
        ["stale KNOWN_LONG entry kcompat/server/ok.py: the problem is gone, remove the entry"],
        failures,
    )


def test_fmt_skip_outside_an_allowed_table_fails(tmp_path: Path) -> None:
    """A `# fmt: skip` holds lines back from the formatter, and so from the 500-line count."""
    root = tree(
        tmp_path,
        {
            "kcompat/server/a.py": "X = [1,\n     2]  # fmt: skip\nS = '# fmt: skip in a string'\n",
            "kcompat/server/b.py": "# fmt: off\nY = 1\n# fmt: on\n",
            "kcompat/wire/table.py": "Z = (1,  2)  # fmt: skip\n",
            "kcompat/wire/messages/gen.py": "Z = (1,  2)  # fmt: skip\n",
            "tools/t.py": "Z = (1,  2)  # fmt: skip\n",  # outside kcompat
        },
    )
    assert check(root, fmt_allowed=["kcompat/wire/table.py"]) == (
        [
            "kcompat/server/a.py:2: # fmt: skip outside a genuine table",
            "kcompat/server/b.py:1: # fmt: off outside a genuine table",
        ],
        [],
    )


WING_TREE = {
    "kcompat/server/broker.py": "",
    "kcompat/server/dispatcher.py": "",
    "kcompat/server/registry.py": "",
    "kcompat/server/serve.py": "",
    "kcompat/server/replica_manager.py": "",
    "kcompat/server/handlers/produce.py": "",
    "kcompat/server/groups/group_service.py": "",
    "kcompat/server/cluster/assembly.py": "from kcompat.server import replica_manager\n",
    "kcompat/server/cluster/kraft_broker.py": "from . import assembly\n",
    "kcompat/server/cluster/replication/partition.py": "from ..kraft_broker import X\n",
    "kcompat/server/cluster/replication/isr.py": "",
    "kcompat/server/network/connection.py": "from kcompat.server.auth import sasl\n",
    "kcompat/server/auth/sasl.py": "",
    "kcompat/server/admin/metrics.py": "from kcompat.server import broker\n",
}


def test_the_wings_as_drawn_pass(tmp_path: Path) -> None:
    assert check(tree(tmp_path, WING_TREE)) == ([], [])


def test_only_the_assembly_point_imports_the_cluster_wing_and_only_its_assembly(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            **WING_TREE,
            "kcompat/server/broker.py": (
                "def f():\n    from kcompat.server.cluster.assembly import build\nfrom .cluster import kraft_broker\n"
            ),
            "kcompat/server/serve.py": "from kcompat.server.cluster import assembly\n",
            "kcompat/server/replica_manager.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                "    from .cluster.replication.isr import high_watermark\n"
            ),
            "kcompat/server/groups/group_service.py": "from kcompat.server import cluster\n",
        },
    )
    why = "(cluster mode is built by its assembly, behind the core's Protocols)"
    failures, _ = check(root)
    assert sorted(failures) == [
        f"kcompat/server/broker.py:3: imports kcompat.server.cluster.kraft_broker {why}",  # only the assembly
        f"kcompat/server/groups/group_service.py:1: imports kcompat.server.cluster {why}",
        f"kcompat/server/replica_manager.py:3: imports kcompat.server.cluster.replication.isr {why}",
        f"kcompat/server/serve.py:1: imports kcompat.server.cluster.assembly {why}",  # not the assembly point
    ]
    known = Known(
        wing_imports=[
            ("cluster-is-a-wing", "kcompat/server/serve.py", "kcompat.server.cluster.assembly"),
            ("cluster-is-a-wing", "kcompat/server/groups/group_service.py", "kcompat.server.cluster"),
        ]
    )
    assert check(root, known)[0] == [
        f"kcompat/server/broker.py:3: imports kcompat.server.cluster.kraft_broker {why}",
        f"kcompat/server/replica_manager.py:3: imports kcompat.server.cluster.replication.isr {why}",
    ]


def test_the_network_wing_imports_no_request_handling(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            **WING_TREE,
            "kcompat/server/network/reactor.py": (
                "from kcompat.server import dispatcher\nfrom ..handlers import produce\n"
                "from kcompat.server.groups.group_service import G\nimport kcompat.server.broker\n"
                "from kcompat.server import registry\n"  # the registry is not request handling
            ),
        },
    )
    why = "(the network wing moves frames; requests are the core's)"
    assert sorted(check(root)[0]) == [
        f"kcompat/server/network/reactor.py:1: imports kcompat.server.dispatcher {why}",
        f"kcompat/server/network/reactor.py:2: imports kcompat.server.handlers.produce {why}",
        f"kcompat/server/network/reactor.py:3: imports kcompat.server.groups.group_service {why}",
        f"kcompat/server/network/reactor.py:4: imports kcompat.server.broker {why}",
    ]


def test_the_admin_wing_only_reads(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            **WING_TREE,
            "kcompat/server/admin/console/views.py": (
                "from kcompat.server.registry import HANDLERS\nfrom ...dispatcher import D\n"
            ),
        },
    )
    why = "(the admin listener reads through the read model)"
    assert sorted(check(root)[0]) == [
        f"kcompat/server/admin/console/views.py:1: imports kcompat.server.registry {why}",
        f"kcompat/server/admin/console/views.py:2: imports kcompat.server.dispatcher {why}",
    ]


def test_the_admin_wing_reaches_no_private_name(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            **WING_TREE,
            "kcompat/server/admin/metrics.py": (
                "from kcompat.server.broker import _helper, Broker\n"
                "class M:\n"
                "    def f(self, broker):\n"
                "        self._own = type(self).__name__, self.__class__, cls_._x\n"
                "        return broker.group_service._coordinator\n"
            ),
            "kcompat/server/replica_manager.py": "def f(x):\n    return x._private\n",  # not admin
        },
    )
    failures, _ = check(root)
    assert failures == [
        "kcompat/server/admin/metrics.py:1: imports private _helper",
        "kcompat/server/admin/metrics.py:4: reads _x of another object",
        "kcompat/server/admin/metrics.py:5: reads _coordinator of another object",
    ]
    known = Known(private_reads=[("kcompat/server/admin/metrics.py", "_coordinator")])
    assert len(check(root, known)[0]) == 2


def test_no_handler_imports_the_broker(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            **WING_TREE,
            "kcompat/server/handlers/fetch.py": "from ..broker import RequestContext\n",
            "kcompat/server/handlers/metadata.py": "from kcompat.server.broker_stats import S\n",
        },
    )
    assert check(root)[0] == [
        "kcompat/server/handlers/fetch.py:1: imports kcompat.server.broker"
        " (a handler sees the narrow services of its RequestContext)"
    ]


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

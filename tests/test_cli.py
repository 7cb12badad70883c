"""The `kcompat` command as a user runs it: errors, help and version, without starting a server."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import types
from collections.abc import Iterator
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
    assert error.startswith("kcompat: invalid configuration: listener SSL uses TLS and needs a certificate")


def test_unusable_keystore_and_bad_add_scram_are_one_line(tmp_path: Path) -> None:
    result = run(
        "serve",
        "--override",
        "listeners=SSL://127.0.0.1:0",
        "--override",
        f"ssl.keystore.location={tmp_path / 'nope.p12'}",
        "--override",
        f"log.dirs={tmp_path / 'data'}",
        *NO_ADMIN,
    )
    assert result.returncode == 1
    (line,) = [x for x in result.stderr.splitlines() if " ERROR " in x]
    assert "ssl.keystore.location=" in line and "cannot be read: No such file or directory" in line
    assert "Traceback" not in result.stderr
    bad = run("serve", "--add-scram", "SCRAM-SHA-512=[name=alice]")
    assert bad.returncode == 1 and bad.stderr.strip() == (
        "kcompat: --add-scram 'SCRAM-SHA-512=[name=alice]' needs name= and password="
    )


def test_serve_help_documents_options_precedence_and_properties() -> None:
    result = run("serve", "--help")
    assert result.returncode == 0
    text = result.stdout
    for phrase in (
        "--override",
        "server.properties",
        "KAFKA_",
        "'__' -> '_'",
        "'___' -> '-'",
        "lowest precedence first",
    ):
        assert phrase in text, phrase
    order = [
        text.index(s)
        for s in ("1. built-in defaults", "2. the server.properties", "3. KAFKA_*", "4. --override")
    ]
    assert order == sorted(order)
    for name in BROKER_CONFIGS:
        assert f"  {name}=" in text, name
    for listed in (
        "listeners=PLAINTEXT://127.0.0.1:9092",
        "message.max.bytes=1048588",
        "num.partitions=1",
        "auto.create.topics.enable=true",
        "group.initial.rebalance.delay.ms=3000",
    ):
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
    """The lazily imported kcompat.server.serve.serve gets the loaded config and its exit code is ours."""
    received: list[BrokerConfig] = []
    fake = types.ModuleType("kcompat.server.serve")

    def serve(config: BrokerConfig) -> int:
        received.append(config)
        return 7

    fake.serve = serve  # type: ignore[attr-defined]
    import kcompat.server

    monkeypatch.setitem(sys.modules, "kcompat.server.serve", fake)
    monkeypatch.setattr(kcompat.server, "serve", fake, raising=False)
    monkeypatch.setattr(cli, "configure_logging", lambda level="INFO": None)
    for key in [k for k in os.environ if k.startswith("KAFKA_")]:
        monkeypatch.delenv(key)
    assert cli.main(["serve", "--override", "num.partitions=4", "--override", "log.dirs=/tmp/x"]) == 7
    (config,) = received
    assert config.num_partitions == 4 and config.data_dir == "/tmp/x"


# --- start-up errors from the filesystem and the network: one line, exit 1 ------------------------


# A broker these tests start opens no port of a fixed number: the admin listener (127.0.0.1:9644 by
# default, a developer's `make run` may hold it) is switched off.
NO_ADMIN = ("--override", "admin.listener=")


def serve_on(log_dirs: Path | str, *extra: str) -> subprocess.CompletedProcess[str]:
    return run(
        "serve",
        "--override",
        "listeners=PLAINTEXT://127.0.0.1:0",
        "--override",
        f"log.dirs={log_dirs}",
        *NO_ADMIN,
        *extra,
    )


def the_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1, result.stderr
    return errors[0]


def test_a_file_where_the_log_dir_should_be(tmp_path: Path) -> None:
    path = tmp_path / "data"
    path.write_text("not a dir")
    line = the_error_line(serve_on(path))
    assert line.endswith(f"cannot use {path}: exists and is not a directory")
    assert path.read_text() == "not a dir"


def test_a_log_dir_whose_parent_cannot_be_created(tmp_path: Path) -> None:
    # The parent would have to be created under a regular file: the OS refuses even root.
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    path = blocker / "sub" / "data"
    line = the_error_line(serve_on(path))
    assert line.endswith(f"cannot use {path}: Not a directory")


def _immutable(path: Path) -> bool:
    """chattr +i: not even root may create, delete or rename entries in the dir (False where the
    filesystem or the capabilities do not allow it)."""
    return subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode == 0


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    """A log dir nobody can write in, root included (tests run as root, so permission bits would
    not stop it): an immutable dir where chattr works, else /sys, which refuses new files."""
    path = tmp_path / "read-only"
    path.mkdir()
    if shutil.which("chattr") and _immutable(path):
        yield path
        subprocess.run(["chattr", "-i", str(path)], check=True)
    else:
        yield Path("/sys")


def test_a_read_only_log_dir(read_only_dir: Path) -> None:
    line = the_error_line(serve_on(read_only_dir))
    assert f"cannot use {read_only_dir / '.lock'}: " in line
    assert line.endswith(("Operation not permitted", "Permission denied", "Read-only file system"))
    assert not (read_only_dir / ".lock").exists()


def test_a_used_log_dir_made_read_only(tmp_path: Path) -> None:
    # A dir a broker has used (its .lock exists) that can no longer be written: the failure is later,
    # when the clean-shutdown marker is removed, and is still one line.
    path = tmp_path / "used"
    process = subprocess.Popen(
        [sys.executable, "-m", "kcompat", "serve", "--override", "listeners=PLAINTEXT://127.0.0.1:0",
         "--override", f"log.dirs={path}", *NO_ADMIN],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stderr is not None
    for line in process.stderr:
        if "listening on" in line:
            break
    process.terminate()
    assert process.wait(30) == 0
    process.stderr.close()
    assert (path / ".kafka_cleanshutdown").exists()
    if not _immutable(path):
        pytest.skip("chattr +i is not available here")
    try:
        line = the_error_line(serve_on(path))
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)
    assert line.endswith(f"cannot use {path / '.kafka_cleanshutdown'}: Operation not permitted")
    assert (path / ".kafka_cleanshutdown").exists()  # nothing changed


def test_a_port_in_use_hints_at_the_listeners_override(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run(
            "serve",
            "--override",
            f"listeners=PLAINTEXT://127.0.0.1:{port}",
            "--override",
            f"log.dirs={tmp_path}",
            *NO_ADMIN,
        )
    line = the_error_line(result)
    assert f"cannot listen on PLAINTEXT://127.0.0.1:{port}: Address already in use" in line
    assert "--override listeners=PLAINTEXT://127.0.0.1:PORT" in line


def test_start_up_objects_are_collected_then_frozen() -> None:
    """What start-up made leaves the cyclic GC's full collections (a 5,000-partition broker held
    the loop ~110 ms each), and no garbage is frozen in with it."""
    import gc
    import weakref

    from kcompat.server import serve

    class Node:
        other: object = None

    garbage, kept = Node(), Node()
    garbage.other = garbage  # a cycle only the cyclic collector frees
    gone = weakref.ref(garbage)
    del garbage
    try:
        serve._freeze_start_up()
        assert gone() is None
        assert gc.get_freeze_count() > 0
        assert gc.is_tracked(kept) and not any(
            o is kept for o in gc.get_objects()
        )  # in no generation: frozen
    finally:
        gc.unfreeze()

"""The client commands' pure pieces: format strings, offsets, partition lists, murmur2, lag, and
the option plumbing (brokers from flags, -X and the environment; exit codes for each failure)."""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import pytest

from kcompat import cli
from kcompat.client.cluster import parse_brokers
from kcompat.client.errors import CannotConnect, KafkaError
from kcompat.cmd import common
from kcompat.cmd.consume import start_positions
from kcompat.cmd.formats import (
    FormatError,
    OffsetSpec,
    RecordView,
    human_bytes,
    lag,
    line_parser,
    parse_format,
    parse_key_values,
    parse_offset,
    parse_partitions,
    record_json,
    render,
    unescape,
)
from kcompat.cmd.partitioner import murmur2, partition_for_key

RECORD = RecordView("orders", 2, 41, 1700000000123, b"k1", b"hello", (("h1", b"x"), ("h2", None)))


def test_render_every_placeholder() -> None:
    pieces = parse_format("%t|%p|%o|%d|%k|%v|%h|%K|%V|%%\\n")
    assert render(pieces, RECORD) == "orders|2|41|1700000000123|k1|hello|h1=x,h2=|2|5|%\n"


def test_render_null_key_and_value() -> None:
    r = RecordView("t", 0, 0, 5, None, None)
    assert render(parse_format("[%k][%v] %K %V"), r) == "[][] -1 -1"


def test_unknown_placeholder_and_lone_percent_are_usage_errors() -> None:
    with pytest.raises(FormatError, match="unknown placeholder %x"):
        parse_format("%x")
    with pytest.raises(FormatError, match="lone %"):
        parse_format("abc%")


def test_unescape() -> None:
    assert unescape("a\\tb\\nc\\\\d\\q") == "a\tb\nc\\d\\q"


def test_record_json() -> None:
    assert record_json(RECORD) == {
        "topic": "orders", "partition": 2, "offset": 41, "timestamp": 1700000000123, "key": "k1",
        "value": "hello", "headers": [{"key": "h1", "value": "x"}, {"key": "h2", "value": None}],
    }  # fmt: skip


def test_line_parser_value_only_keeps_the_whole_line() -> None:
    parse = line_parser("%v")
    rec = parse("a b\tc")
    assert (rec.key, rec.value, rec.headers, rec.partition) == (None, b"a b\tc", (), None)


def test_line_parser_splits_at_the_first_separator() -> None:
    rec = line_parser("%k %v\\n")("user-1 likes spaces too")
    assert (rec.key, rec.value) == (b"user-1", b"likes spaces too")


def test_line_parser_partition_and_headers() -> None:
    rec = line_parser("%p;%h;%k=%v")("3;a=1,b=2;key=value=with=equals")
    assert rec.partition == 3
    assert rec.headers == (("a", b"1"), ("b", b"2"))
    assert (rec.key, rec.value) == (b"key", b"value=with=equals")


def test_line_parser_rejects() -> None:
    with pytest.raises(FormatError, match="does not match"):
        line_parser("%k\\t%v")("no tab here")
    with pytest.raises(FormatError, match="not a number"):
        line_parser("%p %v")("x hello")
    with pytest.raises(FormatError, match="no placeholder"):
        line_parser("static")
    with pytest.raises(FormatError, match="twice"):
        line_parser("%v %v")
    with pytest.raises(FormatError, match="unknown placeholder %o"):
        line_parser("%o %v")


@pytest.mark.parametrize(
    ("text", "spec"),
    [
        ("start", OffsetSpec("start")),
        ("oldest", OffsetSpec("start")),
        ("END", OffsetSpec("end")),
        ("17", OffsetSpec("offset", 17)),
        ("-3", OffsetSpec("offset", 3, relative=True)),
        ("@1700000000000", OffsetSpec("timestamp", 1700000000000)),
    ],
)
def test_parse_offset(text: str, spec: OffsetSpec) -> None:
    assert parse_offset(text) == spec


@pytest.mark.parametrize("text", ["soon", "@yesterday", "@-5", "1.5"])
def test_parse_offset_rejects(text: str) -> None:
    with pytest.raises(FormatError):
        parse_offset(text)


def test_parse_partitions() -> None:
    assert parse_partitions(None) is None
    assert parse_partitions("5-7,0,2,6") == [0, 2, 5, 6, 7]
    for bad in ("a", "3-1", "", "-1"):
        with pytest.raises(FormatError):
            parse_partitions(bad)


def test_parse_key_values() -> None:
    assert parse_key_values(["retention.ms=100", "x=a=b", "empty="]) == [
        ("retention.ms", "100"),
        ("x", "a=b"),
        ("empty", ""),
    ]
    with pytest.raises(FormatError, match="key=value"):
        parse_key_values(["novalue"])


def test_murmur2_matches_kafkas_utils() -> None:
    # The values Kafka's own UtilsTest pins for Utils.murmur2.
    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"a-little-bit-long-string") == -985981536
    assert murmur2(b"a-little-bit-longer-string") == -1486304829
    assert murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") == -58897971
    assert murmur2(b"abc") == 479470107
    assert partition_for_key(b"21", 7) == (-973932308 & 0x7FFFFFFF) % 7


def test_lag_and_sizes() -> None:
    assert lag(None, 10) is None
    assert lag(4, 10) == 6
    assert lag(12, 10) == 0  # a commit past a trimmed end is not a negative lag
    assert human_bytes(None) == "-"
    assert human_bytes(512) == "512 B"
    assert human_bytes(3 * 1024 * 1024) == "3.0 MiB"


def test_start_positions() -> None:
    marks = {0: (5, 20), 1: (0, 0), 2: (0, 10)}
    assert start_positions("start", marks, None) == {0: 5, 1: 0, 2: 0}
    assert start_positions("end", marks, None) == {0: 20, 1: 0, 2: 10}
    assert start_positions("-3", marks, None) == {0: 17, 1: 0, 2: 7}
    assert start_positions("7", marks, None) == {0: 7, 1: 0, 2: 7}
    assert start_positions("@1", marks, {0: 9, 1: -1, 2: -1}) == {0: 9, 1: 0, 2: 10}


def test_parse_brokers() -> None:
    assert parse_brokers("a:1, b:2") == [("a", 1), ("b", 2)]
    assert parse_brokers("PLAINTEXT://h:9093,host") == [("h", 9093), ("host", 9092)]
    assert parse_brokers("[::1]:19092") == [("::1", 19092)]
    for bad in ("h:port", "h:0", " , "):
        with pytest.raises(ValueError):
            parse_brokers(bad)


def _conn_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    common.add_connection_options(parser)
    return parser.parse_args(list(argv))


def test_brokers_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KCOMPAT_PROFILES", str(tmp_path / "none.toml"))
    monkeypatch.delenv("KCOMPAT_BROKERS", raising=False)
    monkeypatch.delenv(common.BROKERS_ENV, raising=False)
    assert common.connection_settings(_conn_args()) == ("127.0.0.1:9092", 10.0)
    monkeypatch.setenv(common.BROKERS_ENV, "env:1")
    assert common.connection_settings(_conn_args())[0] == "env:1"
    assert common.connection_settings(_conn_args("-X", "brokers=x:2", "-X", "timeout=2.5")) == ("x:2", 2.5)
    assert common.connection_settings(_conn_args("--brokers", "flag:3", "-X", "brokers=x:2"))[0] == "flag:3"
    with pytest.raises(FormatError, match="known settings"):
        common.connection_settings(_conn_args("-X", "sasl=1"))


@pytest.mark.parametrize(
    ("error", "code", "line"),
    [
        (KafkaError(3, "topic t"), common.EXIT_KAFKA_ERROR,
         "kcompat: topic t: UNKNOWN_TOPIC_OR_PARTITION; hint: kcompat topic list shows the topics"),
        (KafkaError(36, "topic t: CreateTopics", "Topic 't' already exists."), common.EXIT_KAFKA_ERROR,
         "kcompat: topic t: CreateTopics: TOPIC_ALREADY_EXISTS (Topic 't' already exists.)"),
        (CannotConnect("cannot connect to h:1: Connection refused"), common.EXIT_CANNOT_CONNECT,
         "kcompat: cannot connect to h:1: Connection refused"),
        (FormatError("bad"), common.EXIT_USAGE, "kcompat: bad"),
    ],
)  # fmt: skip
def test_run_maps_failures_to_exit_codes(
    error: Exception, code: int, line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    def handler(args: argparse.Namespace) -> int:
        raise error

    assert common.run(handler, argparse.Namespace()) == code
    assert capsys.readouterr().err.splitlines() == [line]


def test_progress_only_on_a_terminal() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert common.show_progress(Tty()) is True
    assert common.show_progress(io.StringIO()) is False


def test_print_table_aligns_without_trailing_blanks(capsys: pytest.CaptureFixture[str]) -> None:
    common.print_table(("TOPIC", "PARTITIONS"), [("a", 1), ("longer-name", None)])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["TOPIC", "PARTITIONS"]
    assert lines[2].split() == ["a", "1"] and lines[3].split() == ["longer-name", "-"]
    assert lines[2].rindex("1") == lines[3].rindex("-") == lines[0].index("PARTITIONS")
    assert all(line == line.rstrip() for line in lines)


def test_nouns_parse_and_serve_parser_leaves_them_out() -> None:
    args = cli.build_parser().parse_args(
        ["consume", "t", "-o", "-5", "-n", "3", "--record-format", "%k %v\\n"]
    )
    assert (args.topic, args.offset, args.num, args.record_format) == ("t", "-5", 3, "%k %v\\n")
    args = cli.build_parser().parse_args(["group", "seek", "g", "--to", "start", "-t", "a", "-t", "b"])
    assert (args.group, args.to, args.topic) == ("g", "start", ["a", "b"])
    with pytest.raises(SystemExit) as exit_info:
        cli.build_parser(with_clients=False).parse_args(["topic", "list"])
    assert exit_info.value.code == common.EXIT_USAGE


def test_unreachable_broker_exits_3(capsys: pytest.CaptureFixture[str]) -> None:
    from kcompat.testing import free_port

    port = free_port()
    assert (
        cli.main(["topic", "list", "--brokers", f"127.0.0.1:{port}", "--timeout", "2"])
        == common.EXIT_CANNOT_CONNECT
    )
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"kcompat: cannot connect to 127.0.0.1:{port}")


def test_serve_loads_neither_the_client_nor_rich() -> None:
    """`kcompat serve`'s cold start must not pay for the client commands (their modules load lazily)."""
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "kcompat", "serve", "--help"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0
    imported = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines() if "|" in line}
    assert "kcompat.cli" in imported  # the measurement itself works
    assert not {m for m in imported if m.startswith(("kcompat.cmd", "kcompat.client", "rich"))}


def test_version_negotiation_takes_the_highest_common_version() -> None:
    from kcompat.client.connection import CLIENT_MAX_VERSIONS, Connection
    from kcompat.wire.error_codes import ErrorCode
    from kcompat.wire.messages import APIS

    conn = Connection.__new__(Connection)  # no socket: only the negotiation table is exercised
    conn.host, conn.port = "h", 1
    ours = APIS[3].versions
    conn.api_versions = {3: (0, 99), 18: (0, 2), 9: (0, 99)}
    assert conn.version_for(3) == ours.high
    assert conn.version_for(18) == 2
    assert conn.version_for(9) == min(CLIENT_MAX_VERSIONS[9], APIS[9].versions.high or 99)
    conn.api_versions = {3: (ours.high + 1, ours.high + 5)}
    with pytest.raises(KafkaError) as err:
        conn.version_for(3)
    assert err.value.code == ErrorCode.UNSUPPORTED_VERSION and "broker speaks" in str(err.value)
    with pytest.raises(KafkaError, match="does not offer it"):
        conn.version_for(0)

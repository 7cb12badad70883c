"""The `kcompat` client commands run as a user runs them (a subprocess of the installed `kcompat`
script) against a real `kcompat serve` AND a real Apache Kafka 4.3.1 single-node KRaft broker
(one of each for the module), checked against numbers known independently: what was produced,
what a real confluent-kafka consumer committed, what the broker's own Metadata says.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks.brokers import KafkaBroker
from kcompat.testing import free_port, wait_until

pytestmark = pytest.mark.timeout(300)

_SCRIPT = Path(sys.executable).parent / "kcompat"
KCOMPAT = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "kcompat"]


@pytest.fixture(scope="module")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    why = KafkaBroker.available()
    if why:
        pytest.fail(why, pytrace=False)
    broker = KafkaBroker(tmp_path_factory.mktemp("kafka-4.3.1"))
    broker.start()
    yield broker.bootstrap
    broker.stop()


@pytest.fixture(scope="module", params=["kcompat", "kafka"])
def bootstrap(request: pytest.FixtureRequest) -> str:
    if request.param == "kafka":
        return str(request.getfixturevalue("kafka_bootstrap"))
    return str(request.getfixturevalue("kcompat_session_broker").bootstrap)


Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def kc(bootstrap: str) -> Run:
    """kc(*args, input=None, ok=True): run `kcompat ARGS` with KCOMPAT_BOOTSTRAP pointing at the broker
    (and no profiles file, so the user's own profiles cannot leak in)."""

    def run(*args: str, input: str | None = None, ok: bool = True, env: dict[str, str] | None = None) -> Any:
        base = {k: v for k, v in os.environ.items() if not k.startswith(("KAFKA_", "KCOMPAT_"))}
        result = subprocess.run(
            [*KCOMPAT, *args], input=input, capture_output=True, text=True, timeout=120,
            env={**base, "KCOMPAT_BOOTSTRAP": bootstrap, "KCOMPAT_PROFILES": "/nonexistent/profiles.toml",
                 **(env or {})},
        )  # fmt: skip
        if ok and result.returncode != 0:
            pytest.fail(
                f"kcompat {' '.join(args)} exited {result.returncode}:\n{result.stderr}", pytrace=False
            )
        return result

    return run


def kc_json(kc: Run, *args: str, input: str | None = None) -> Any:
    return json.loads(kc(*args, "--format", "json", input=input).stdout)


def new_topic() -> str:
    return f"cli-{uuid.uuid4().hex[:10]}"


def test_topic_create_describe_alter_delete(kc: Run, bootstrap: str) -> None:
    topic = new_topic()
    assert (
        kc("topic", "create", topic, "-p", "3", "-c", "retention.ms=123456").stdout
        == f"created topic {topic}\n"
    )
    again = kc("topic", "create", topic, "-p", "3", ok=False)
    assert again.returncode == 1
    assert again.stderr.startswith(f"kcompat: topic {topic}: CreateTopics: TOPIC_ALREADY_EXISTS")
    assert len(again.stderr.splitlines()) == 1

    listed = kc_json(kc, "topic", "list")
    assert {"topic": topic, "partitions": 3, "replicas": 1, "internal": False} in listed

    d = kc_json(kc, "topic", "describe", topic)
    assert d["topic"] == topic and uuid.UUID(d["topic_id"]).int != 0
    assert [p["partition"] for p in d["partitions"]] == [0, 1, 2]
    node = kc_json(kc, "cluster", "info")["brokers"][0]["node_id"]
    for p in d["partitions"]:
        assert (p["leader"], p["replicas"], p["isr"]) == (node, [node], [node])
        assert (p["log_start_offset"], p["high_watermark"]) == (0, 0)
        assert p["size_bytes"] == 0
    configs = {c["name"]: c for c in d["configs"]}
    assert configs["retention.ms"]["value"] == "123456"
    assert configs["retention.ms"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["cleanup.policy"]["source"] == "DEFAULT_CONFIG"

    text = kc("topic", "describe", topic).stdout
    assert f"NAME        {topic}" in text
    assert "retention.ms" in text and "DYNAMIC_TOPIC_CONFIG" in text

    kc("topic", "alter-config", topic, "--set", "retention.ms=999", "--set", "segment.ms=3600000")
    configs = {c["name"]: c for c in kc_json(kc, "topic", "describe", topic)["configs"]}
    assert (configs["retention.ms"]["value"], configs["segment.ms"]["value"]) == ("999", "3600000")
    kc("topic", "alter-config", topic, "--delete", "retention.ms")
    configs = {c["name"]: c for c in kc_json(kc, "topic", "describe", topic)["configs"]}
    assert configs["retention.ms"]["source"] == "DEFAULT_CONFIG"

    added = kc_json(kc, "topic", "add-partitions", topic, "--num", "2")
    assert added == [{"topic": topic, "partitions_before": 3, "partitions": 5}]
    wait_until(
        lambda: len(kc_json(kc, "topic", "describe", topic)["partitions"]) == 5,
        "5 partitions",
        timeout=30,
    )

    assert kc("topic", "delete", topic).stdout == f"deleted topic {topic}\n"
    wait_until(
        lambda: topic not in {t["topic"] for t in kc_json(kc, "topic", "list")},
        "the topic to go",
        timeout=30,
    )
    gone = kc("topic", "describe", topic, ok=False)
    assert (gone.returncode, gone.stderr) == (
        1,
        f"kcompat: topic {topic}: UNKNOWN_TOPIC_OR_PARTITION; hint: kcompat topic list shows the topics\n",
    )


def test_produce_then_consume_gives_the_lines_back(kc: Run) -> None:
    topic = new_topic()
    kc("topic", "create", topic, "-p", "3")
    lines = [f"line {i} \u00e9\u00e8 {'x' * (i % 50)}" for i in range(3000)]
    produced = kc_json(kc, "produce", topic, "--batch", "400", input="\n".join(lines) + "\n")
    assert produced["records"] == 3000
    assert {
        p["partition"]: (p["first_offset"], p["last_offset"], p["records"]) for p in produced["partitions"]
    } == {0: (0, 999, 1000), 1: (0, 999, 1000), 2: (0, 999, 1000)}

    # Default format: the values, one a line. Keyless records went to the partitions in turn.
    out = kc("consume", topic).stdout.splitlines()
    assert sorted(out) == sorted(lines)
    rows = [
        line.split(" ", 2)
        for line in kc("consume", topic, "--record-format", "%p %o %v\\n").stdout.splitlines()
    ]
    for p in range(3):
        mine = [(int(o), v) for q, o, v in rows if int(q) == p]
        assert mine == list(enumerate(lines[p::3]))

    sizes = kc_json(kc, "topic", "describe", topic)["partitions"]
    assert [(p["high_watermark"], p["size_bytes"] > 0) for p in sizes] == [(1000, True)] * 3

    records = [
        json.loads(x)
        for x in kc(
            "consume", topic, "-p", "1", "-o", "10", "-n", "4", "--output", "json"
        ).stdout.splitlines()
    ]
    assert [(r["partition"], r["offset"], r["value"]) for r in records] == [
        (1, o, lines[1 + 3 * o]) for o in range(10, 14)
    ]
    assert [
        r["offset"]
        for r in map(
            json.loads, kc("consume", topic, "-p", "2", "-o", "-2", "--output", "json").stdout.splitlines()
        )
    ] == [998, 999]
    assert kc("consume", topic, "-o", "end").stdout == ""


def test_produce_keys_headers_and_partitions(kc: Run) -> None:
    from kcompat.cmd.partitioner import partition_for_key

    topic = new_topic()
    kc("topic", "create", topic, "-p", "4")
    keys = [f"user-{i}" for i in range(40)]
    old_spelling = kc(
        "produce",
        topic,
        "-f",
        "%k\\t%v",
        "-H",
        "source=test",
        input="".join(f"{k}\tvalue of {k}\n" for k in keys),
    )
    assert old_spelling.stderr == "kcompat: -f is deprecated here; use --input-format\n"
    got = kc("consume", topic, "--record-format", "%p|%k|%v|%h\\n").stdout.splitlines()
    assert sorted(got) == sorted(
        f"{partition_for_key(k.encode(), 4)}|{k}|value of {k}|source=test" for k in keys
    )

    kc("produce", topic, "--input-format", "%p %h %v", input="3 a=1,b=2 to three\n")
    (last,) = kc("consume", topic, "-p", "3", "-o", "-1", "--record-format", "%h %v\\n").stdout.splitlines()
    assert last == "a=1,b=2 to three"

    bad = kc("produce", topic, "-p", "9", input="x\n", ok=False)
    assert (bad.returncode, bad.stderr) == (2, f"kcompat: topic {topic} has no partition 9 (it has 4)\n")


def test_trim_deletes_records_below_an_offset(kc: Run) -> None:
    topic = new_topic()
    kc("topic", "create", topic, "-p", "2")
    kc("produce", topic, "-p", "0", input="".join(f"{i}\n" for i in range(20)))
    kc("produce", topic, "-p", "1", input="".join(f"{i}\n" for i in range(5)))
    trimmed = kc_json(kc, "topic", "trim", topic, "-o", "12", "-p", "0")
    assert trimmed == {"topic": topic, "partitions": [{"partition": 0, "log_start_offset": 12}]}
    assert kc("consume", topic, "-p", "0").stdout.split() == [str(i) for i in range(12, 20)]
    assert (
        kc_json(kc, "topic", "trim", topic, "-o", "end", "-p", "1")["partitions"][0]["log_start_offset"] == 5
    )
    parts = kc_json(kc, "topic", "describe", topic)["partitions"]
    assert [(p["log_start_offset"], p["high_watermark"]) for p in parts] == [(12, 20), (5, 5)]


def test_group_describe_every_assigned_partition_then_seek(kc: Run, bootstrap: str) -> None:
    from confluent_kafka import Consumer, TopicPartition

    topic, group = new_topic(), f"cli-group-{uuid.uuid4().hex[:8]}"
    kc("topic", "create", topic, "-p", "4")
    ends = {0: 10, 1: 7, 2: 5, 3: 0}
    for p, n in ends.items():
        if n:
            kc("produce", topic, "-p", str(p), input="".join(f"p{p}-{i}\n" for i in range(n)))

    assigned: list[int] = []
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "client.id": "cli-test-consumer",
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
    })  # fmt: skip
    try:
        consumer.subscribe([topic], on_assign=lambda c, ps: assigned.extend(tp.partition for tp in ps))
        deadline = time.monotonic() + 60
        while sorted(assigned) != [0, 1, 2, 3]:
            assert time.monotonic() < deadline, "the consumer was never assigned all 4 partitions"
            consumer.poll(0.2)
        # Commits on two partitions only: 2 and 3 stay without a commit.
        consumer.commit(
            offsets=[TopicPartition(topic, 0, 4), TopicPartition(topic, 1, 7)], asynchronous=False
        )

        report = kc_json(kc, "group", "describe", group)
        assert report["state"] == "Stable" and report["protocol_type"] == "consumer"
        (member,) = report["members"]
        assert member["client_id"] == "cli-test-consumer"
        assert member["assignment"] == [{"topic": topic, "partitions": [0, 1, 2, 3]}]
        rows = {r["partition"]: r for r in report["partitions"] if r["topic"] == topic}
        assert sorted(rows) == [0, 1, 2, 3]
        expected_committed = {0: 4, 1: 7, 2: None, 3: None}
        for p, r in rows.items():
            assert r["committed_offset"] == expected_committed[p]
            assert (r["log_start_offset"], r["log_end_offset"]) == (0, ends[p])
            assert r["lag"] == (None if expected_committed[p] is None else ends[p] - expected_committed[p])
            assert r["member_id"] == member["member_id"]
        assert report["total_lag"] == 6

        text = kc("group", "describe", group).stdout
        line3 = next(line for line in text.splitlines() if line.startswith(topic) and line.split()[1] == "2")
        assert line3.split()[:6] == [topic, "2", "-", "0", "5", "-"]

        live = kc("group", "seek", group, "--to", "start", ok=False)
        assert live.returncode == 1
        assert live.stderr.startswith(f"kcompat: group {group}: NON_EMPTY_GROUP")
    finally:
        consumer.close()

    wait_until(
        lambda: kc_json(kc, "group", "describe", group)["state"] == "Empty",
        "the group to empty",
        timeout=30,
    )
    assert group in {g["group"] for g in kc_json(kc, "group", "list")}

    moved = kc_json(kc, "group", "seek", group, "--to", "start")
    assert [(r["partition"], r["previous_offset"], r["new_offset"]) for r in moved["partitions"]] == [
        (0, 4, 0),
        (1, 7, 0),
        (2, None, 0),
        (3, None, 0),
    ]
    kc("group", "seek", group, "--to", "3", "-t", topic, "-p", "0,2")
    kc("group", "seek", group, "--to", "end", "-t", topic, "-p", "1")
    rows = {r["partition"]: r for r in kc_json(kc, "group", "describe", group)["partitions"]}
    assert {p: (r["committed_offset"], r["lag"]) for p, r in rows.items()} == {
        0: (3, 7),
        1: (7, 0),
        2: (3, 2),
        3: (0, 0),
    }

    # By time: the first offset whose timestamp is at or after the 6th record's of partition 0.
    stamps = [
        tuple(map(int, x.split()))
        for x in kc("consume", topic, "-p", "0", "--record-format", "%o %d\\n").stdout.splitlines()
    ]
    ts = stamps[5][1]
    kc("group", "seek", group, "--to", f"@{ts}", "-t", topic, "-p", "0")
    expected = min(o for o, t in stamps if t >= ts)
    assert {
        r["partition"]: r["committed_offset"] for r in kc_json(kc, "group", "describe", group)["partitions"]
    }[0] == expected

    assert kc("group", "delete", group).stdout == f"deleted group {group}\n"
    wait_until(
        lambda: group not in {g["group"] for g in kc_json(kc, "group", "list")},
        "the group to go",
        timeout=30,
    )


def test_group_describe_and_seek_a_kip848_group(kc: Run, bootstrap: str) -> None:
    """A group.protocol=consumer group is not a classic group: DescribeGroups answers
    GROUP_ID_NOT_FOUND, so describe and seek go through ConsumerGroupDescribe."""
    from confluent_kafka import Consumer, TopicPartition

    topic, group = new_topic(), f"cli-848-{uuid.uuid4().hex[:8]}"
    kc("topic", "create", topic, "-p", "2")
    kc("produce", topic, "-p", "0", input="a\nb\nc\n")
    kc("produce", topic, "-p", "1", input="d\n")
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
        "client.id": "cli-848", "enable.auto.commit": False, "auto.offset.reset": "earliest",
    })  # fmt: skip
    try:
        consumer.subscribe([topic])
        wait_until(lambda: (consumer.poll(0.2), len(consumer.assignment()) == 2)[1], "assignment", timeout=60)
        consumer.commit(offsets=[TopicPartition(topic, 0, 2)], asynchronous=False)
        report = kc_json(kc, "group", "describe", group)
        assert report["state"] == "Stable"
        (member,) = report["members"]
        assert member["client_id"] == "cli-848"
        assert member["assignment"] == [{"topic": topic, "partitions": [0, 1]}]
        rows = {r["partition"]: (r["committed_offset"], r["lag"]) for r in report["partitions"]}
        assert rows == {0: (2, 1), 1: (None, None)}
    finally:
        consumer.close()
    wait_until(lambda: kc_json(kc, "group", "describe", group)["state"] == "Empty", "empty", timeout=30)
    moved = kc_json(kc, "group", "seek", group, "--to", "end", "-t", topic)
    assert [(r["partition"], r["new_offset"]) for r in moved["partitions"]] == [(0, 3), (1, 1)]
    rows = {r["partition"]: r["lag"] for r in kc_json(kc, "group", "describe", group)["partitions"]}
    assert rows == {0: 0, 1: 0}


def test_cluster_info(kc: Run, bootstrap: str) -> None:
    info = kc_json(kc, "cluster", "info", "--apis")
    host, port = bootstrap.rsplit(":", 1)
    (broker,) = info["brokers"]
    assert (broker["host"], broker["port"]) == (host, int(port))
    assert info["controller_id"] in (broker["node_id"], -1) or info["controller_id"] >= 0
    assert info["cluster_id"] and len(info["cluster_id"]) == 22
    apis = {a["name"]: (a["min_version"], a["max_version"]) for a in info["apis"]}
    assert apis["Metadata"][1] >= 12 and apis["ApiVersions"][0] == 0
    supported = {f["name"]: (f["min_version"], f["max_version"]) for f in info["supported_features"]}
    finalized = {f["name"]: f["max_version_level"] for f in info["finalized_features"]}
    if "metadata.version" in supported:  # a KRaft broker (Kafka) reports it in both lists
        low, high = supported["metadata.version"]
        assert low <= finalized["metadata.version"] <= high
    # (Kafka leaves features whose lowest version is 0 out of the supported list, so finalized
    # ones such as group.version need not appear there.)
    text = kc("cluster", "info").stdout
    assert f"CLUSTER ID  {info['cluster_id']}" in text


def test_errors_are_one_line_with_exit_codes(kc: Run) -> None:
    missing = kc("consume", "no-such-topic-here", ok=False)
    assert (missing.returncode, missing.stderr) == (
        1,
        "kcompat: topic no-such-topic-here: UNKNOWN_TOPIC_OR_PARTITION; hint: kcompat topic list shows the topics\n",
    )
    port = free_port()
    down = kc("topic", "list", "-X", f"brokers=127.0.0.1:{port}", ok=False)
    assert down.returncode == 3
    assert down.stderr.splitlines() == [f"kcompat: cannot connect to 127.0.0.1:{port}: Connection refused"]
    usage = kc("consume", "t", "--record-format", "%q", ok=False)
    assert usage.returncode == 2 and usage.stderr.startswith(
        "kcompat: format '%q' has unknown placeholder %q"
    )
    assert kc("topic", ok=False).returncode == 2


def test_progress_bar_on_a_terminal_leaves_stdout_alone(kc: Run, bootstrap: str) -> None:
    """With stderr on a terminal (a pty here) produce and consume draw a progress bar there;
    stdout still carries exactly the data."""
    import pty

    topic = new_topic()
    kc("topic", "create", topic, "-p", "1")
    lines = [f"v{i}" for i in range(5000)]

    def on_a_tty(*args: str, input: str | None = None) -> tuple[str, bytes]:
        main, secondary = pty.openpty()
        try:
            env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_")}
            result = subprocess.run(
                [*KCOMPAT, *args, "--brokers", bootstrap], input=input, stdout=subprocess.PIPE,
                stderr=secondary, text=True, timeout=120, env={**env, "TERM": "xterm", "COLUMNS": "100"},
            )  # fmt: skip
            os.close(secondary)
            drawn = b""
            while True:
                try:
                    chunk = os.read(main, 65536)
                except OSError:  # EIO: every writer has gone
                    break
                if not chunk:
                    break
                drawn += chunk
        finally:
            os.close(main)
        assert result.returncode == 0, drawn.decode(errors="replace")
        return result.stdout, drawn

    out, drawn = on_a_tty(
        "produce", topic, "--batch", "500", "--format", "json", input="\n".join(lines) + "\n"
    )
    assert json.loads(out)["records"] == 5000
    assert b"producing to" in drawn
    out, drawn = on_a_tty("consume", topic, "-n", "4000")
    assert out.splitlines() == lines[:4000]
    assert b"consuming" in drawn


def test_tombstones_and_binary_keys_and_values_both_ways(kc: Run) -> None:
    topic = new_topic()
    kc("topic", "create", topic, "-p", "1")
    binary = bytes(range(256))
    lines = f"{b'k1'.hex()}\t{binary.hex()}\n{b'k2'.hex()}\t\n"
    kc("produce", topic, "--input-format", "%k\\t%v", "--key-encoding", "hex", "--value-encoding", "hex",
       "--tombstone", input=lines)  # fmt: skip
    got = [json.loads(x) for x in kc("consume", topic, "--output", "json").stdout.splitlines()]
    assert [(r["key"], r.get("key_encoding")) for r in got] == [("k1", None), ("k2", None)]
    # Not UTF-8: base64 in JSON, flagged so; the tombstone's value is null, not "".
    assert (got[0]["value_encoding"], base64.b64decode(got[0]["value"])) == ("base64", binary)
    assert got[1]["value"] is None
    hexed = kc("consume", topic, "--record-format", "%k %v %V\\n", "--value-encoding", "hex").stdout
    assert hexed.splitlines() == [f"k1 {binary.hex()} 256", "k2  -1"]
    b64 = kc("consume", topic, "-n", "1", "--value-encoding", "base64").stdout
    assert base64.b64decode(b64.strip()) == binary
    # Text output keeps every byte (\xNN escapes), and says once how to get them exactly.
    text = kc("consume", topic, "-n", "1")
    shown = binary.decode("utf-8", "backslashreplace").replace("\r", "\n")  # text=True reads \r as \n
    assert text.stdout.rstrip("\n") == shown
    assert text.stderr.count("is not UTF-8") == 1 and "--value-encoding" in text.stderr
    # Back again: what base64 printed produces the same bytes.
    kc("produce", topic, "--value-encoding", "base64", input=b64)
    last = json.loads(kc("consume", topic, "-o", "-1", "--output", "json").stdout)
    assert base64.b64decode(last["value"]) == binary
    bad = kc("produce", topic, "--value-encoding", "hex", input="zz\n", ok=False)
    assert (bad.returncode, bad.stderr) == (2, "kcompat: value 'zz' is not valid hex\n")


def test_consume_with_a_group_resumes_where_it_committed(kc: Run, bootstrap: str) -> None:
    topic, group = new_topic(), f"cli-g-{uuid.uuid4().hex[:8]}"
    kc("topic", "create", topic, "-p", "2")
    kc("produce", topic, input="".join(f"v{i}\n" for i in range(10)))
    first = kc("consume", topic, "-g", group, "-n", "4").stdout.splitlines()
    assert len(first) == 4
    committed = {
        r["partition"]: r["committed_offset"] for r in kc_json(kc, "group", "describe", group)["partitions"]
    }
    assert sum(committed.values()) == 4
    rest = kc("consume", topic, "-g", group).stdout.splitlines()
    assert sorted(first + rest) == sorted(f"v{i}" for i in range(10))
    assert kc("consume", topic, "-g", group).stdout == ""
    report = kc_json(kc, "group", "describe", group)
    assert report["total_lag"] == 0

    from confluent_kafka import Consumer

    member = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"})
    try:
        member.subscribe([topic])
        wait_until(lambda: (member.poll(0.2), bool(member.assignment()))[1], "assignment", timeout=60)
        busy = kc("consume", topic, "-g", group, ok=False)
        assert (busy.returncode, busy.stdout) == (1, "")
        assert busy.stderr.startswith(f"kcompat: group {group}: NON_EMPTY_GROUP (state is ")
    finally:
        member.close()
    wait_until(lambda: kc_json(kc, "group", "describe", group)["state"] == "Empty", "empty", timeout=30)

    deleted = kc("group", "delete-offsets", group, "-t", topic, "-p", "0")
    assert deleted.stdout == f"deleted the commits of group {group} on 1 partition(s)\n"
    rows = {
        r["partition"]: r["committed_offset"] for r in kc_json(kc, "group", "describe", group)["partitions"]
    }
    assert 0 not in rows and rows[1] is not None


def test_produce_to_a_missing_topic_says_it_was_auto_created(kc: Run) -> None:
    topic = new_topic()
    refused = kc("produce", topic, "--no-auto-create", input="x\n", ok=False)
    assert refused.returncode == 1 and refused.stderr.startswith(
        f"kcompat: topic {topic}: UNKNOWN_TOPIC_OR_PARTITION"
    )
    made = kc("produce", topic, input="x\n")
    assert made.stderr == (
        f"kcompat: topic {topic} did not exist: the broker auto-created it with 1 partition(s) "
        "(auto.create.topics.enable=true)\n"
    )
    assert kc("produce", topic, input="y\n").stderr == ""
    assert kc("consume", topic).stdout == "x\ny\n"


def test_config_get_and_set_for_topics_and_brokers(kc: Run) -> None:
    topic = new_topic()
    kc("topic", "create", topic, "-p", "1")
    assert kc("config", "set", "--topic", topic, "retention.ms=4242").stdout == (
        f"topic {topic}: set retention.ms=4242\n"
    )
    (entry,) = kc_json(kc, "config", "get", "--topic", topic, "retention.ms")
    assert (entry["value"], entry["source"]) == ("4242", "DYNAMIC_TOPIC_CONFIG")
    changed = {e["name"]: e["source"] for e in kc_json(kc, "config", "get", "--topic", topic, "--changed")}
    assert changed["retention.ms"] == "DYNAMIC_TOPIC_CONFIG"
    assert "DEFAULT_CONFIG" not in changed.values()
    kc("config", "set", "--topic", topic, "--delete", "retention.ms")
    changed = {e["name"]: e["source"] for e in kc_json(kc, "config", "get", "--topic", topic, "--changed")}
    assert "retention.ms" not in changed

    node = str(kc_json(kc, "cluster", "info")["brokers"][0]["node_id"])
    kc("config", "set", "--broker", node, "log.cleaner.threads=2")
    (entry,) = kc_json(kc, "config", "get", "--broker", node, "log.cleaner.threads")
    assert (entry["value"], entry["source"]) == ("2", "DYNAMIC_BROKER_CONFIG")
    kc("config", "set", "--broker", node, "--delete", "log.cleaner.threads")
    (entry,) = kc_json(kc, "config", "get", "--broker", node, "log.cleaner.threads")
    assert entry["source"] != "DYNAMIC_BROKER_CONFIG"
    kc("config", "set", "--broker-default", "log.cleaner.threads=2")
    (entry,) = kc_json(kc, "config", "get", "--broker", node, "log.cleaner.threads")
    assert (entry["value"], entry["source"]) == ("2", "DYNAMIC_DEFAULT_BROKER_CONFIG")
    kc("config", "set", "--broker-default", "--delete", "log.cleaner.threads")
    bad = kc("config", "set", "--topic", topic, "retention.ms=soon", ok=False)
    assert bad.returncode == 1 and len(bad.stderr.splitlines()) == 1 and "INVALID_CONFIG" in bad.stderr


def test_cluster_health(kc: Run) -> None:
    report = kc_json(kc, "cluster", "health")
    assert report["healthy"] is True and len(report["brokers"]) == 1
    assert (
        report["brokers_down"]
        == report["leaderless_partitions"]
        == report["under_replicated_partitions"]
        == []
    )
    assert kc("cluster", "health", "--check").stdout.startswith("HEALTHY           true\n")


def test_delete_errors_are_printed_once(kc: Run) -> None:
    topic = new_topic()
    kc("topic", "create", topic, "-p", "1")
    gone = kc("topic", "delete", topic, "no-such-topic-x", ok=False)
    assert gone.returncode == 1
    assert gone.stdout == f"deleted topic {topic}\n"
    assert gone.stderr == (
        "kcompat: topic no-such-topic-x: DeleteTopics: UNKNOWN_TOPIC_OR_PARTITION; "
        "hint: kcompat topic list shows the topics\n"
    )
    missing = kc("group", "delete", "no-such-group-x", ok=False)
    assert missing.returncode == 1 and missing.stdout == ""
    assert len(missing.stderr.splitlines()) == 1 and "GROUP_ID_NOT_FOUND" in missing.stderr

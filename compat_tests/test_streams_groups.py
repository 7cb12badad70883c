"""Kafka Streams 4.3.1 on the streams rebalance protocol (KIP-1071, `group.protocol=streams`) against
one `kcompat serve`: compat_tests/java/StreamsGroupApp.java (a repartition topic, a changelog-backed
count store, a KStream-KTable join copartitioned with the repartition topic, exactly_once_v2).

The broker creates the internal topics with Kafka's names and partition counts; the app reaches
RUNNING and its output holds, for every word, exactly its running counts 1..n in order, each with
the word's label; a second instance takes over part of the tasks while the output stays exact;
`kafka-streams-groups --describe` shows the members and their tasks, `--delete` deletes the group.
"""

from __future__ import annotations

import json
import random
import subprocess
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from support import DEPS, ROOT, ReportFigure, java_classpath, java_executable, kafka_tool

from compat_tests.crash.wire_client import WireClient
from compat_tests.groups_members import JVM, compile_java
from kcompat.testing import TEST_DEFAULTS, Broker
from kcompat.wire.error_codes import ErrorCode as E
from kcompat.wire.messages.streams_group_heartbeat import STREAMS_GROUP_HEARTBEAT

pytestmark = pytest.mark.timeout(300)

STREAMS_JARS = DEPS / "kafka-streams"
APP = "wordlabels"
PARTITIONS = 4
WORDS = [f"w{i:02d}" for i in range(12)]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    base = tmp_path_factory.mktemp("streams-broker")
    b = Broker(base / "data", base / "kcompat.log", overrides={**TEST_DEFAULTS})
    b.start()
    yield b
    b.stop()


@pytest.fixture(scope="module")
def classes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_java(
        tmp_path_factory.mktemp("streams-classes"),
        STREAMS_JARS,
        ROOT / "compat_tests" / "java" / "StreamsGroupApp.java",
    )


class App:
    """StreamsGroupApp.java as a process; its output lines kept by a thread."""

    def __init__(self, classes: Path, args: list[str]) -> None:
        self.proc = subprocess.Popen(
            [java_executable(), *JVM, "-cp", f"{classes}:{java_classpath(STREAMS_JARS)}", "StreamsGroupApp", *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        self.out: list[str] = []
        stdout = self.proc.stdout
        assert stdout is not None
        self._reader = threading.Thread(
            target=lambda: self.out.extend(iter(stdout.readline, "")), daemon=True
        )
        self._reader.start()

    def events(self) -> list[dict[str, object]]:
        return [json.loads(x) for x in list(self.out) if x.startswith("{")]

    def state(self) -> str | None:
        states = [e["state"] for e in self.events() if "state" in e]
        return str(states[-1]) if states else None

    def wait_running(self, timeout: float) -> float:
        started = time.monotonic()
        deadline = started + timeout
        while self.state() != "RUNNING":
            if time.monotonic() > deadline or self.proc.poll() is not None:
                pytest.fail(f"the app never reached RUNNING: {self.out[-30:]}")
            time.sleep(0.1)
        return time.monotonic() - started

    def stop(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(40)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(5)
        self.proc.stdout.close()


class Output:
    """Every committed (word, "label:count") of the output topic, in offset order."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.by_word: dict[str, list[str]] = defaultdict(list)
        self.total = 0
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:6]}",
                                  "isolation.level": "read_committed", "enable.auto.commit": False})  # fmt: skip
        self.consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            m = self.consumer.poll(0.2)
            if m is None or m.error():
                continue
            with self.lock:
                self.by_word[m.key().decode()].append(m.value().decode())
                self.total += 1

    def wait(self, what: str, want: dict[str, list[str]], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if self.by_word == want:
                    return
            time.sleep(0.1)
        with self.lock:
            wrong = {w: (got[:3], got[-3:], len(got), len(want.get(w, []))) for w, got in self.by_word.items()
                     if got != want.get(w)}  # fmt: skip
        pytest.fail(f"{what} not reached in {timeout:.0f}s: {self.total} updates; wrong: {wrong}")

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        self.consumer.close()


def labels(bootstrap: str, topic: str) -> None:
    # Java's partitioner, so that each label is in the partition of its word's repartitioned counts.
    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random"})
    for w in WORDS:
        producer.produce(topic, key=w.encode(), value=f"L{w}".encode())
    assert producer.flush(20) == 0


def produce_lines(bootstrap: str, topic: str, n: int, seed: int) -> Counter[str]:
    rng = random.Random(seed)
    # Idempotent: a retry across a leader move (the migration round moves every replica while
    # lines are written) must not write a line twice, or every later count is off.
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    words: Counter[str] = Counter()
    for i in range(n):
        line = rng.choices(WORDS, k=4)
        words.update(line)
        producer.produce(topic, key=f"{seed}-{i}".encode(), value=" ".join(line).encode())
    assert producer.flush(20) == 0
    return words


def expected_output(counts: Counter[str]) -> dict[str, list[str]]:
    return {w: [f"L{w}:{i}" for i in range(1, n + 1)] for w, n in counts.items()}


def describe(bootstrap: str, group: str = APP) -> str:
    return kafka_tool(
        "kafka-streams-groups", "--bootstrap-server", bootstrap, "--describe", "--group", group, "--members",
        "--verbose",
    ).stdout  # fmt: skip


def member_epochs(text: str, group: str) -> set[tuple[str, str, str]]:
    """(TARGET-ASSIGNMENT-EPOCH, MEMBER, MEMBER-EPOCH) of each `--describe --members` row."""
    return {
        (c[1], c[3], c[5]) for c in (line.split() for line in text.splitlines() if line.startswith(group))
    }


def assignments(row: str) -> dict[str, set[tuple[str, int]]]:
    """The tasks in a `--describe --members` row by label ("ACTIVE", "STANDBY", "TARGET-ACTIVE"...):
    "... ACTIVE: 0:[0,1]; 1:[2]; STANDBY: 0:[3]; TARGET-ACTIVE: ..."."""
    out: dict[str, set[tuple[str, int]]] = {}
    label = None
    for token in row.split():
        if token.endswith(":") and token[:-1].replace("-", "").isalpha():
            label = token[:-1]
            out.setdefault(label, set())
        elif label is not None and ":[" in token:
            sub, parts = token.rstrip(";").split(":[", 1)
            out[label].update((sub, int(p)) for p in parts.rstrip("]").split(",") if p)
    return out


def active_tasks(row: str) -> set[tuple[str, int]]:
    return assignments(row).get("ACTIVE", set())


def test_streams_app_on_the_streams_protocol(
    broker: Broker, classes: Path, tmp_path: Path, report_figure: ReportFigure
) -> None:
    bs = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in ("lines", "labels", "out")]).values():
        f.result(20)
    labels(bs, "labels")
    counts = produce_lines(bs, "lines", 300, seed=1)
    output = Output(bs, "out")
    first = App(classes, [bs, APP, "lines", "labels", "out", str(tmp_path / "state-1")])
    second: App | None = None
    try:
        to_running = first.wait_running(90)
        output.wait("the first output", expected_output(counts), 90)

        # The broker made the internal topics with Kafka's names, partition counts and configs.
        md = admin.list_topics(timeout=10).topics
        assert len(md[f"{APP}-words-repartition"].partitions) == PARTITIONS
        assert len(md[f"{APP}-counts-changelog"].partitions) == PARTITIONS
        res = ConfigResource("topic", f"{APP}-counts-changelog")
        configs = admin.describe_configs([res])[res].result(10)
        assert configs["cleanup.policy"].value == "compact"
        res = ConfigResource("topic", f"{APP}-words-repartition")
        configs = admin.describe_configs([res])[res].result(10)
        assert configs["cleanup.policy"].value == "delete"
        assert configs["retention.ms"].value == "-1"

        # A second instance takes over part of the tasks; the output stays exact.
        second = App(classes, [bs, APP, "lines", "labels", "out", str(tmp_path / "state-2")])
        scale_started = time.monotonic()
        second.wait_running(90)
        deadline = time.monotonic() + 60
        while True:
            text = describe(bs)
            rows = [line for line in text.splitlines() if line.startswith(APP)]
            if len(rows) == 2 and all(active_tasks(r) for r in rows):
                break
            assert time.monotonic() < deadline, text
            time.sleep(1)
        moved = time.monotonic() - scale_started
        tasks = [active_tasks(r) for r in rows]
        assert not tasks[0] & tasks[1] and len(tasks[0] | tasks[1]) == 2 * PARTITIONS, text
        counts += produce_lines(bs, "lines", 300, seed=2)
        output.wait("the output after scale-out", expected_output(counts), 90)
        assert all(e.get("error") is None for e in first.events() + second.events()), first.out[-20:]
        report_figure(
            "streams groups (KIP-1071)",
            f"first instance RUNNING {to_running:.1f}s after start; second instance started to both "
            f"RUNNING with tasks split {moved:.1f}s (--describe polled every 1s); output exact",
        )
    finally:
        output.close()
        for app in (second, first):
            if app is not None:
                app.stop()
    # Both gone: the group is empty, and --delete deletes it.
    deleted = kafka_tool(
        "kafka-streams-groups", "--bootstrap-server", bs, "--delete", "--group", APP, check=False
    )
    assert "deleted" in deleted.stdout.lower() or deleted.returncode == 0, deleted.stdout + deleted.stderr
    listed = kafka_tool("kafka-streams-groups", "--bootstrap-server", bs, "--list").stdout
    assert APP not in listed.split(), listed


def test_the_group_and_its_offsets_survive_a_broker_restart(
    broker: Broker, classes: Path, tmp_path: Path
) -> None:
    """The group's records (StreamsGroup*, the topology among them) and its committed offsets are
    replayed at start-up: the running member keeps its place and nothing is processed twice."""
    bs, app_id = broker.bootstrap, "survivor"
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics(
        [NewTopic(t, PARTITIONS, 1) for t in ("lines2", "labels2", "out2")]
    ).values():
        f.result(20)
    labels(bs, "labels2")
    counts = produce_lines(bs, "lines2", 200, seed=3)
    output = Output(bs, "out2")
    app = App(classes, [bs, app_id, "lines2", "labels2", "out2", str(tmp_path / "state")])
    try:
        app.wait_running(90)
        output.wait("the output before the restart", expected_output(counts), 90)
        members = member_epochs(describe(bs, app_id), app_id)
        assert len(members) == 1
        broker.restart(clean=True)
        counts += produce_lines(bs, "lines2", 200, seed=4)
        output.wait("the output after the restart", expected_output(counts), 120)
        text = describe(bs, app_id)
        # The same member at the same epochs: the group was replayed, not made anew by a rejoin.
        assert member_epochs(text, app_id) == members, (members, text)
    finally:
        output.close()
        app.stop()


def heartbeat(broker: Broker, group: str, member: str, epoch: int, **fields: Any) -> Any:
    fields = {"topology": None, "user_endpoint": None, **fields}  # nullable: null unless given
    client = WireClient(broker.host, broker.port)
    try:
        return client.call(STREAMS_GROUP_HEARTBEAT.key, 0, {"group_id": group, "member_id": member,
                                                            "member_epoch": epoch, **fields})  # fmt: skip
    finally:
        client.close()


def join_fields(source: str, changelog: str, process: str | None = "p1") -> dict[str, Any]:
    """A join as Streams sends it: one subtopology reading `source` into a store with `changelog`."""
    return {
        "rebalance_timeout_ms": 30000, "process_id": process, "active_tasks": [], "standby_tasks": [],
        "warmup_tasks": [],
        "topology": {"epoch": 0, "subtopologies": [{
            "subtopology_id": "0", "source_topics": [source],
            "state_changelog_topics": [{"name": changelog, "topic_configs": [{"key": "cleanup.policy", "value": "compact"}]}],
        }]},
    }  # fmt: skip


def test_bad_heartbeats_get_kafkas_answers(broker: Broker) -> None:
    """Raw StreamsGroupHeartbeats: a missing source topic, an internal topic that exists with the
    wrong partition count, a changed topology, an unknown member, a join without a process id, and
    the features Kafka 4.3.1 refuses (source regexes, static members, task offsets, warm-up tasks)."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic("bad-in", 4, 1), NewTopic("bad-counts-changelog", 2, 1)]).values():
        f.result(20)
    missing = heartbeat(
        broker, "bad-missing", "m1", 0, **join_fields("no-such-topic", "bad-missing-changelog")
    )
    assert missing.error_code == 0 and [s.status_code for s in missing.status] == [1], missing
    assert "no-such-topic" in missing.status[0].status_detail and not missing.active_tasks
    wrong = heartbeat(broker, "bad", "m1", 0, **join_fields("bad-in", "bad-counts-changelog"))
    assert wrong.error_code == 0 and [s.status_code for s in wrong.status] == [2], wrong
    assert "bad-counts-changelog" in wrong.status[0].status_detail and not wrong.active_tasks
    assert len(admin.list_topics(timeout=10).topics["bad-counts-changelog"].partitions) == 2  # left alone
    changed = heartbeat(broker, "bad", "m2", 0, **join_fields("bad-in", "other-changelog"))
    assert (changed.error_code, changed.error_message) == (
        E.INVALID_REQUEST,
        "Topology updates are not supported yet.",
    )
    unknown = heartbeat(broker, "bad", "nobody", 1)
    assert unknown.error_code == E.UNKNOWN_MEMBER_ID
    no_process = heartbeat(
        broker, "bad", "m3", 0, **join_fields("bad-in", "bad-counts-changelog", process=None)
    )
    assert no_process.error_code == E.INVALID_REQUEST
    regex = join_fields("bad-in", "bad-regex-changelog")
    regex["topology"]["subtopologies"][0]["source_topic_regex"] = ["bad-.*"]
    refused = heartbeat(broker, "bad-regex", "m1", 0, **regex)
    assert (refused.error_code, refused.error_message) == (
        E.INVALID_REQUEST,
        "Regular expressions for source topics are not supported yet.",  # Kafka 4.3.1's answer
    )
    offset = [{"subtopology_id": "0", "partition": 0, "offset": 1}]
    for extra, message in (  # Kafka 4.3.1's unsupported features, checked in this order
        ({"instance_id": "i1", "task_offsets": offset}, "Static membership is not yet supported."),
        ({"task_offsets": offset, "task_end_offsets": offset}, "TaskOffsets are not supported yet."),
        ({"task_end_offsets": offset}, "TaskEndOffsets are not supported yet."),
        (
            {"warmup_tasks": [{"subtopology_id": "0", "partitions": [0]}]},
            "WarmupTasks are not supported yet.",
        ),
    ):
        fields = {**join_fields("bad-in", "bad-unsupported-changelog"), **extra}
        got = heartbeat(broker, "bad-unsupported", "m1", 0, **fields)
        assert (got.error_code, got.error_message) == (E.INVALID_REQUEST, message), extra
    for gid in ("bad", "bad-missing"):  # leave, so that the module's broker ends with no member
        assert heartbeat(broker, gid, "m1", -1).error_code == 0


def test_standby_replicas_from_kafka_configs(broker: Broker, classes: Path, tmp_path: Path) -> None:
    """`streams.num.standby.replicas` set with `kafka-configs --entity-type groups`: with two
    instances every task of the stateful subtopology 0 (the count store) has a standby on the other
    one; the stateless subtopology 1 gets none, as from Kafka 4.3.1's StickyTaskAssignor."""
    bs, app_id = broker.bootstrap, "standbys"
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics(
        [NewTopic(t, PARTITIONS, 1) for t in ("lines3", "labels3", "out3")]
    ).values():
        f.result(20)
    kafka_tool("kafka-configs", "--bootstrap-server", bs, "--alter", "--entity-type", "groups",
               "--entity-name", app_id, "--add-config", "streams.num.standby.replicas=1")  # fmt: skip
    labels(bs, "labels3")
    counts = produce_lines(bs, "lines3", 100, seed=7)
    output = Output(bs, "out3")
    apps = [App(classes, [bs, app_id, "lines3", "labels3", "out3", str(tmp_path / f"s{i}")]) for i in (1, 2)]
    try:
        for a in apps:
            a.wait_running(120)
        deadline = time.monotonic() + 90
        while True:
            text = describe(bs, app_id)
            rows = [assignments(line) for line in text.splitlines() if line.startswith(app_id)]
            if (
                len(rows) == 2
                and all(r.get("ACTIVE") for r in rows)
                and rows[0].get("STANDBY") == {t for t in rows[1]["ACTIVE"] if t[0] == "0"}
                and rows[1].get("STANDBY") == {t for t in rows[0]["ACTIVE"] if t[0] == "0"}
            ):
                break
            assert time.monotonic() < deadline, text
            time.sleep(1)
        output.wait("the output", expected_output(counts), 90)
    finally:
        output.close()
        for a in apps:
            a.stop()


def test_instances_starting_together_get_one_assignment(
    broker: Broker, classes: Path, tmp_path: Path, report_figure: ReportFigure
) -> None:
    """`streams.initial.rebalance.delay.ms` set with `kafka-configs --entity-type groups`: two
    instances started together are RUNNING after a single target assignment for both (without the
    delay the first would get every task and give half back once the second joined)."""
    bs, app_id, delay_ms = broker.bootstrap, "together", 8000
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics(
        [NewTopic(t, PARTITIONS, 1) for t in ("lines5", "labels5", "out5")]
    ).values():
        f.result(20)
    kafka_tool("kafka-configs", "--bootstrap-server", bs, "--alter", "--entity-type", "groups",
               "--entity-name", app_id, "--add-config", f"streams.initial.rebalance.delay.ms={delay_ms}")  # fmt: skip
    shown = kafka_tool("kafka-configs", "--bootstrap-server", bs, "--describe", "--entity-type", "groups",
                       "--entity-name", app_id).stdout  # fmt: skip
    assert f"streams.initial.rebalance.delay.ms={delay_ms}" in shown, shown
    labels(bs, "labels5")
    counts = produce_lines(bs, "lines5", 100, seed=5)
    output = Output(bs, "out5")
    started = time.monotonic()
    apps = [App(classes, [bs, app_id, "lines5", "labels5", "out5", str(tmp_path / f"t{i}")]) for i in (1, 2)]
    try:
        for a in apps:
            a.wait_running(120)
        running = time.monotonic() - started
        output.wait("the output", expected_output(counts), 90)
        text = describe(bs, app_id)
        rows = [line for line in text.splitlines() if line.startswith(app_id)]
        tasks = [active_tasks(r) for r in rows]
        assert len(rows) == 2 and all(tasks) and not tasks[0] & tasks[1], text
        marker = f"streams group {app_id} assignment epoch"
        targets = [x for x in broker.log_path.read_text().splitlines() if marker in x]
        assert len(targets) == 1 and "2 member(s) with a new target" in targets[0], targets
        assert all(e.get("error") is None for e in apps[0].events() + apps[1].events())
        report_figure(
            "streams groups: initial rebalance delay",
            f"two instances started together with streams.initial.rebalance.delay.ms={delay_ms}: "
            f"one target assignment, both RUNNING {running:.1f}s after start; output exact",
        )
    finally:
        output.close()
        for a in apps:
            a.stop()


@pytest.mark.slow
def test_scale_in_from_three_instances_to_two_while_running(
    broker: Broker, classes: Path, tmp_path: Path, report_figure: ReportFigure
) -> None:
    """Three instances share the tasks; one stops (it leaves the group) while lines keep coming:
    the other two take its tasks over, every task on exactly one of them, and the output stays
    exactly each word's running counts."""
    bs, app_id = broker.bootstrap, "shrinking"
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics(
        [NewTopic(t, PARTITIONS, 1) for t in ("lines4", "labels4", "out4")]
    ).values():
        f.result(20)
    labels(bs, "labels4")
    counts = produce_lines(bs, "lines4", 150, seed=8)
    output = Output(bs, "out4")
    apps = [
        App(classes, [bs, app_id, "lines4", "labels4", "out4", str(tmp_path / f"s{i}")]) for i in range(3)
    ]
    stopped: list[App] = []
    try:
        for a in apps:
            a.wait_running(120)

        def split(n: int) -> list[set[tuple[str, int]]]:
            deadline = time.monotonic() + 90
            while True:
                text = describe(bs, app_id)
                tasks = [active_tasks(line) for line in text.splitlines() if line.startswith(app_id)]
                together = set().union(*tasks) if tasks else set()
                if len(tasks) == n and all(tasks) and len(together) == 2 * PARTITIONS == sum(map(len, tasks)):
                    return tasks
                assert time.monotonic() < deadline, text
                time.sleep(1)

        split(3)
        output.wait("the output on three instances", expected_output(counts), 90)
        leaving = apps.pop()
        shrink_started = time.monotonic()
        more = produce_lines(bs, "lines4", 150, seed=9)  # written while the third one goes
        leaving.stop()
        stopped.append(leaving)
        counts += more
        split(2)
        moved = time.monotonic() - shrink_started
        counts += produce_lines(bs, "lines4", 150, seed=10)
        output.wait("the output on two instances", expected_output(counts), 90)
        assert all(e.get("error") is None for a in apps + stopped for e in a.events()), apps[0].out[-20:]
        report_figure(
            "streams groups scale-in",
            f"3 -> 2 instances: the third's tasks on the other two {moved:.1f}s after it stopped "
            "(--describe polled every 1s); output exact",
        )
    finally:
        output.close()
        for a in apps:
            a.stop()

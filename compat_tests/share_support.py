"""Share group helpers the compatibility tests share (single node and cluster mode).

`JavaShareMember` runs Kafka's VerifiableShareConsumer 4.3.1 as one member of a share group and
collects the values it receives; `share_beside_java` is the routine that has it read a topic beside
a confluent-kafka ShareConsumer (until both are members, then records produced in rounds: each
must reach exactly one of them, and each of them some); `share_group_state` reads
`kafka-share-groups --describe --state --verbose` (group epoch, assignment epoch, members),
`share_members` the member epochs of `--describe --members --verbose`, and
`wait_all_acknowledged` waits for lag 0 in `--describe`.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from confluent_kafka import ShareConsumer
from support import kafka_tool, kafka_tool_command

WARM = b"warm-up"


class JavaShareMember:
    """Kafka's VerifiableShareConsumer (sync acknowledgement, at most 20 records an acquisition, so that a member
    beside it gets some too) as a share group member; `values`: what it received, warm-ups left out."""

    def __init__(self, bootstrap: str, topic: str, group: str, workdir: Path) -> None:
        config = workdir / f"java-share-{group}.properties"
        # record_limit (KIP-1206): acquisitions never past max.poll.records, where the default
        # batch_optimized mode takes a whole producer batch
        config.write_text("max.poll.records=20\nshare.acquire.mode=record_limit\n")
        cmd = kafka_tool_command(
            "kafka-verifiable-share-consumer",
            "--bootstrap-server", bootstrap, "--topic", topic, "--group-id", group,
            "--acknowledgement-mode", "sync", "--verbose", "--command-config", str(config),
        )  # fmt: skip
        self.values: list[str] = []
        self.warm_partitions: set[int] = set()  # partitions a warm-up record came from
        self._process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("name") != "record_data":
                continue
            if event.get("value") == WARM.decode():
                self.warm_partitions.add(int(event.get("partition", -1)))
            else:
                self.values.append(event["value"])

    def stop(self) -> None:
        self._process.terminate()
        try:
            self._process.wait(30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(10)
        self._reader.join(10)
        if self._process.stdout is not None:
            self._process.stdout.close()

    def __enter__(self) -> JavaShareMember:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def poll_values(c: ShareConsumer, timeout: float = 0.3) -> list[bytes]:
    """The values of one poll, warm-ups left out (errors fail the test)."""
    out = []
    for m in c.poll(timeout):
        assert m.error() is None, m.error()
        if m.value() != WARM:
            out.append(m.value())
    return out


def wait_for_members(
    bootstrap: str, group: str, topic: str, count: int, idle: Callable[[], Any], timeout: float
) -> None:
    """Until `kafka-share-groups --describe --members` lists `count` members assigned `topic`;
    `idle()` between looks (a confluent member must keep polling to stay in the group)."""
    deadline = time.time() + timeout
    while True:
        d = kafka_tool("kafka-share-groups", "--bootstrap-server", bootstrap,
                       "--describe", "--group", group, "--members", check=False)  # fmt: skip
        if d.returncode == 0 and d.stdout.count(topic) >= count:
            return
        assert time.time() < deadline, d.stdout + d.stderr
        idle()


def share_beside_java(
    bootstrap: str,
    topic: str,
    group: str,
    confluent: ShareConsumer,
    java: JavaShareMember,
    produce: Callable[[list[bytes]], None],
    *,
    prefix: str = "j",
    count: int = 300,
    timeout: float = 60,
) -> None:
    """Both members in the group, `count` records produced in rounds of 30 while both fetch (each
    round wakes both): every record reaches exactly one of them, and each of them some."""
    wait_for_members(bootstrap, group, topic, 2, lambda: poll_values(confluent, 1.0), timeout)
    values: list[bytes] = []
    java_before = len(java.values)
    mine: list[bytes] = []
    deadline = time.time() + timeout

    def send(batch: list[bytes]) -> None:
        # From a thread, while this one keeps the confluent member polling: librdkafka fetches only
        # within poll(), and a round produced while it did not would find only the JVM's ShareFetch
        # waiting (CI saw the Java member take every warm-up record for 60 s that way).
        values.extend(batch)
        failed: list[BaseException] = []

        def rounds() -> None:
            try:
                for k in range(0, len(batch), 30):
                    produce(batch[k : k + 30])
            except BaseException as e:  # raised here, in the test's thread, once the rounds end
                failed.append(e)

        sending = threading.Thread(target=rounds, daemon=True)
        sending.start()
        while time.time() < deadline and (
            sending.is_alive() or len(mine) + len(java.values) - java_before < len(values)
        ):
            mine.extend(poll_values(confluent))
        sending.join(max(0.0, deadline - time.time()))
        if failed:
            raise failed[0]

    send([f"{prefix}{i}".encode() for i in range(count)])
    extra = 0
    # Which member a round reaches is a race; one starved of CPU may miss nearly all of them (on a
    # loaded 2-core run the JVM got 20 of 300). More rounds until each got some, within the
    # deadline: a member the broker never serves still fails below.
    while not (mine and java.values[java_before:]) and time.time() < deadline:
        send([f"{prefix}x{i}".encode() for i in range(extra, extra + 30)])
        extra += 30
    theirs = java.values[java_before:]
    everything = sorted([v.decode() for v in mine] + theirs)
    assert everything == sorted(v.decode() for v in values), (len(values), len(mine), len(theirs))
    assert theirs and mine, (len(mine), len(theirs))


def wait_all_acknowledged(
    bootstrap: str, group: str, partitions: int, idle: Callable[[], Any], timeout: float = 30
) -> None:
    """Until `kafka-share-groups --describe` shows lag 0 on each of the group's `partitions` rows
    (every record delivered was acknowledged, and the acknowledgement stored)."""
    deadline = time.time() + timeout
    while True:
        out = kafka_tool(
            "kafka-share-groups", "--bootstrap-server", bootstrap, "--describe", "--group", group
        )
        lags = [line.split()[-1] for line in out.stdout.splitlines() if line.startswith(group)]
        if lags == ["0"] * partitions:
            return
        assert time.time() < deadline, out.stdout
        idle()


def share_group_state(bootstrap: str, group: str) -> dict[str, str]:
    """The row of `kafka-share-groups --describe --state --verbose`, by column name."""
    out = kafka_tool("kafka-share-groups", "--bootstrap-server", bootstrap,
                     "--describe", "--group", group, "--state", "--verbose")  # fmt: skip
    return _row(out.stdout, group)


def share_members(bootstrap: str, group: str) -> list[dict[str, str]]:
    """The rows of `kafka-share-groups --describe --members --verbose`, by column name."""
    out = kafka_tool("kafka-share-groups", "--bootstrap-server", bootstrap,
                     "--describe", "--group", group, "--members", "--verbose")  # fmt: skip
    return _rows(out.stdout, group)


def _rows(stdout: str, group: str) -> list[dict[str, str]]:
    """Kafka's tools print fixed-width columns (a value may hold a space: "host:port (id)"): each
    row is cut where the header's columns start."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    header = next(line for line in lines if line.startswith("GROUP"))
    starts = [m.start() for m in re.finditer(r"\S+(?: \(ID\))?", header)]
    names = [header[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
    return [
        {n: line[a:b].strip() for n, a, b in zip(names, starts, [*starts[1:], None], strict=True)}
        for line in lines
        if line.split()[0] == group
    ]


def _row(stdout: str, group: str) -> dict[str, str]:
    rows = _rows(stdout, group)
    assert len(rows) == 1, stdout
    return rows[0]

"""Group members as processes, for the group compatibility tests.

A Member runs compat_tests/group_member.py (kafka-python, confluent-kafka, aiokafka) or
compat_tests/java/Consumer.java (the Java client), and collects the JSON lines it prints: its
assignment over time, the records it read and the offsets it committed. A Group checks them
together: partitions held by live members are disjoint and cover the topic, and every record was
read exactly once by the group (no record by two members, nothing read again after a restart).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from support import KAFKA_CLIENTS_39_JARS, KAFKA_JARS, ROOT, java_classpath, java_executable

MEMBER_SCRIPT = ROOT / "compat_tests" / "group_member.py"
JAVA_SOURCE = ROOT / "compat_tests" / "java" / "Consumer.java"
JVM = ["-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]


def compile_java(out: Path, jars: Path, source: Path = JAVA_SOURCE) -> Path:
    """`source` (Consumer.java by default) compiled against `jars` into `out` (once per jar set:
    starting 4 JVMs from source would compile it 4 times)."""
    if not (out / f"{source.stem}.class").exists():
        out.mkdir(parents=True, exist_ok=True)
        subprocess.run(["javac", "-nowarn", "-cp", java_classpath(jars), "-d", str(out), str(source)],
                       check=True, capture_output=True, text=True)  # fmt: skip
    return out


@dataclass
class Member:
    name: str
    cmd: list[str]
    events: list[dict[str, Any]] = field(default_factory=list)
    other: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.lock = threading.Lock()
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
                                     env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        with self.proc.stdout:  # closed at the member's end of output, not left to the garbage collector
            for line in self.proc.stdout:
                try:
                    ev = json.loads(line)
                except ValueError:
                    ev = None
                with self.lock:
                    if isinstance(ev, dict) and "ev" in ev:
                        self.events.append(ev)
                    else:
                        self.other.append(line.rstrip())

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def snapshot(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.events)

    def assignment(self) -> list[int]:
        got = [e["partitions"] for e in self.snapshot() if e["ev"] == "assigned"]
        return got[-1] if got else []

    def records(self) -> list[dict[str, Any]]:
        return [e for e in self.snapshot() if e["ev"] == "record"]

    def committed(self) -> dict[int, int]:
        out: dict[int, int] = {}
        for e in self.snapshot():
            if e["ev"] == "commit":
                for p, o in e["offsets"].items():
                    out[int(p)] = max(out.get(int(p), 0), o)
        return out

    def leave(self, timeout: float = 30) -> None:
        """SIGTERM: the member closes its consumer, which leaves the group."""
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout)
        self.reader.join(5)
        assert any(e["ev"] == "closed" for e in self.snapshot()), self.log()

    def crash(self) -> None:
        self.proc.kill()
        self.proc.wait()

    def dump_stacks(self) -> None:
        """Python members print every thread's stack on SIGUSR1 (faulthandler), Java ones on SIGQUIT."""
        self.proc.send_signal(signal.SIGQUIT if self.cmd[0].endswith("java") else signal.SIGUSR1)
        time.sleep(0.5)

    def stop(self) -> None:
        if self.alive:
            self.proc.kill()
            self.proc.wait()

    def log(self, lines: int = 40) -> str:
        with self.lock:
            return f"--- {self.name} (exit {self.proc.poll()})\n" + "\n".join(self.other[-lines:])


class Group:
    """The members of one group, and the checks that only need what they printed."""

    def __init__(self, start: Callable[[str], Member], partitions: int) -> None:
        self.start_member = start
        self.partitions = partitions
        self.members: list[Member] = []

    def add(self) -> Member:
        m = self.start_member(f"member-{len(self.members)}")
        self.members.append(m)
        return m

    @property
    def live(self) -> list[Member]:
        return [m for m in self.members if m.alive]

    def logs(self) -> str:
        return "\n".join(m.log() for m in self.members)

    def wait(self, what: str, check: Callable[[], bool], timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                for m in self.live:
                    m.dump_stacks()
                state = {m.name: (m.alive, m.assignment(), len(m.records())) for m in self.members}
                raise AssertionError(f"timed out waiting for {what}: {state}\n{self.logs()}")
            time.sleep(0.1)

    def wait_balanced(self, sizes: Sequence[int], timeout: float = 60) -> None:
        """Until the live members hold disjoint partitions covering the topic, in these counts."""

        def balanced() -> bool:
            held = [m.assignment() for m in self.live]
            flat = sorted(p for ps in held for p in ps)
            return flat == list(range(self.partitions)) and sorted(len(ps) for ps in held) == sorted(sizes)

        self.wait(f"an assignment of {sorted(sizes)} partitions", balanced, timeout)

    def wait_consumed(self, expected: set[str], timeout: float = 60) -> None:
        """Until every expected value was read and the offsets after it committed."""

        def done() -> bool:
            seen = {r["v"] for m in self.members for r in m.records()}
            if not expected <= seen:
                return False
            committed: dict[int, int] = {}
            for m in self.members:
                for p, o in m.committed().items():
                    committed[p] = max(committed.get(p, 0), o)
            ends = end_offsets(expected)
            return all(committed.get(p, 0) >= end for p, end in ends.items())

        self.wait(f"{len(expected)} records read and committed", done, timeout)

    def check_exactly_once(self) -> None:
        """No record read by two members, nor twice by one: the group never shared a partition and
        every member resumed exactly from the committed offset (after rebalances and restarts)."""
        readers: dict[str, list[str]] = {}
        for m in self.members:
            for r in m.records():
                readers.setdefault(r["v"], []).append(m.name)
        twice = {v: who for v, who in readers.items() if len(who) > 1}
        assert not twice, f"read more than once: {dict(list(twice.items())[:10])}\n{self.logs()}"

    def stop(self) -> None:
        for m in self.members:
            m.stop()


def end_offsets(values: set[str]) -> dict[int, int]:
    """Values are "<partition>-<offset>": the offset after the last one per partition."""
    ends: dict[int, int] = {}
    for v in values:
        p, o = (int(x) for x in v.split("-"))
        ends[p] = max(ends.get(p, 0), o + 1)
    return ends


def python_member(
    client: str, bootstrap: str, topic: str, group: str, conf: dict[str, str]
) -> Callable[[str], Member]:
    def start(name: str) -> Member:
        args = [f"{k}={v}" for k, v in conf.items()]
        return Member(name, [sys.executable, str(MEMBER_SCRIPT), client, bootstrap, topic, group, *args])

    return start


def java_member(
    classes: Path, jars: Path, bootstrap: str, topic: str, group: str, conf: dict[str, str]
) -> Callable[[str], Member]:
    cp = f"{classes}{os.pathsep}{java_classpath(jars)}"

    def start(name: str) -> Member:
        args = [f"{k}={v}" for k, v in conf.items()]
        return Member(name, [java_executable(), *JVM, "-cp", cp, "Consumer", bootstrap, topic, group, *args])

    return start


__all__ = [
    "KAFKA_CLIENTS_39_JARS",
    "KAFKA_JARS",
    "Group",
    "Member",
    "compile_java",
    "java_member",
    "python_member",
]

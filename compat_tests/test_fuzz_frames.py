"""Fuzzing a running `kcompat serve` with mutated and random request frames (hypothesis).

Every case is a frame for any API key and version kcompat declares (plus undeclared ones): a body
drawn from the wire declarations (tests/wire/strategies.py), encoded, then maybe mutated (bits
flipped, bytes overwritten, the body cut short or extended, replaced by noise, the header's
version or key changed; the size prefix always matches what is sent). Each case goes on a new
connection. Throughout:

* the broker never dies and logs no traceback;
* each case's connection gets a response carrying its correlation id (then still answers an
  ApiVersions on the same connection) or is closed: never left hanging (except where Kafka itself
  may wait: a Fetch long poll, a JoinGroup or SyncGroup rebalance, a Produce with acks=0);
* a well-behaved client (Metadata, Produce, Fetch in a loop on its own connection) is served the
  whole time, without an error;
* memory stays bounded: the broker's RSS, sampled every 50 ms from /proc, stays within 150 MiB of
  what it was before the fuzzing.

Cases: KCOMPAT_FUZZ_CASES (default 2000, ~15 s; the slow layer runs KCOMPAT_FUZZ_SLOW_CASES,
default 12000); a further test opens 64 connections at once, each sending
a stream of random frames.
"""

from __future__ import annotations

import os
import random
import socket
import struct
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compat_tests.crash.proc import RssSampler, mib, rss_bytes
from compat_tests.crash.wire_client import WellBehaved, read_frame
from kcompat.testing import TEST_DEFAULTS, Broker, api_versions_ready
from kcompat.wire.messages import APIS
from kcompat.wire.protocol import encode_request
from tests.wire.strategies import message_values

CASES = int(os.environ.get("KCOMPAT_FUZZ_CASES", "2000"))
SLOW_CASES = int(os.environ.get("KCOMPAT_FUZZ_SLOW_CASES", "12000"))  # the slow layer's run
RSS_GROWTH_LIMIT = 150 << 20
pytestmark = pytest.mark.timeout(max(600, CASES // 4))

# Kafka may legitimately hold these without an answer for as long as the request says.
MAY_WAIT = {1, 11, 14, 78}  # Fetch, JoinGroup, SyncGroup, ShareFetch
PRODUCE = 0
# Admin requests that create partitions are not mutated: one flipped bit in a partition count
# asks for millions of partitions (see test_limits_attack.py for that limit); their bodies are
# drawn with small counts.
UNMUTATED = {19, 37}  # CreateTopics, CreatePartitions
API_VERSIONS_V0 = struct.pack(">hhih", 18, 0, 999_999, 4) + b"fuzz"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    base: Path = tmp_path_factory.mktemp("fuzz")
    b = Broker(
        base / "data", base / "broker.log", overrides={**TEST_DEFAULTS, "connections.max.idle.ms": "60000"}
    )
    b.start()
    yield b
    b.stop()


def clamp_partition_counts(key: int, body: dict[str, Any]) -> None:
    if key == 19:
        for t in body.get("topics", []):
            t["num_partitions"] = min(abs(t.get("num_partitions", 1)), 3) or 1
            t["assignments"] = []
    elif key == 37:
        for t in body.get("topics", []):
            t["count"] = min(abs(t.get("count", 1)), 3) or 1
            t["assignments"] = None


@st.composite
def cases(draw: st.DrawFn) -> tuple[int, int, int, bytes, str]:
    """(api key, version, correlation id, frame without its size prefix, mutation name)."""
    key = draw(st.sampled_from(sorted(APIS)))
    api = APIS[key]
    high = api.versions.high if api.versions.high is not None else api.versions.low + 3
    version = draw(st.integers(api.versions.low, high))
    correlation = draw(st.integers(0, 2**31 - 1))
    body = draw(message_values(api.request, version))
    clamp_partition_counts(key, body)
    try:
        frame = encode_request(key, version, correlation, body, draw(st.none() | st.text(max_size=8)))[4:]
    except (ValueError, TypeError, OverflowError, AttributeError, struct.error):
        frame = struct.pack(">hhi", key, version, correlation) + draw(st.binary(max_size=64))
    if key in UNMUTATED:
        return key, version, correlation, frame, "none"
    mutation = draw(st.sampled_from(["none", "flip", "overwrite", "truncate", "extend", "noise", "header"]))
    data = bytearray(frame)
    if mutation == "flip":
        for _ in range(draw(st.integers(1, 8))):
            i = draw(st.integers(8, max(8, len(data) - 1)))
            if i < len(data):
                data[i] ^= 1 << draw(st.integers(0, 7))
    elif mutation == "overwrite":
        i = draw(st.integers(8, max(8, len(data))))
        patch = draw(st.binary(min_size=1, max_size=16))
        data[i : i + len(patch)] = patch
    elif mutation == "truncate":
        data = data[: draw(st.integers(0, max(0, len(data) - 1)))]
    elif mutation == "extend":
        data += draw(st.binary(min_size=1, max_size=64))
    elif mutation == "noise":
        data = data[:8] + draw(st.binary(max_size=200))
    elif mutation == "header":
        struct.pack_into(
            ">hh", data, 0, draw(st.integers(-(2**15), 2**15 - 1)), draw(st.integers(-(2**15), 2**15 - 1))
        )
    return key, version, correlation, bytes(data), mutation


def outcome(sock: socket.socket, correlation: int, timeout: float) -> str:
    """'response', 'closed' or 'silent' (nothing within `timeout`)."""
    sock.settimeout(timeout)
    try:
        frame = read_frame(sock)
    except TimeoutError:
        return "silent"
    except (ConnectionError, OSError):
        return "closed"
    got = struct.unpack_from(">i", frame)[0] if len(frame) >= 4 else None
    assert got == correlation, f"a response with correlation id {got}, expected {correlation}"
    return "response"


def send_case(broker: Broker, case: tuple[int, int, int, bytes, str]) -> str:
    key, version, correlation, frame, mutation = case
    with socket.create_connection((broker.host, broker.port), timeout=5) as s:
        try:
            s.sendall(struct.pack(">i", len(frame)) + frame)
        except (BrokenPipeError, ConnectionResetError):
            return "closed"
        header_key = struct.unpack_from(">h", frame)[0] if len(frame) >= 2 else -1
        may_wait = header_key in MAY_WAIT or header_key == PRODUCE
        result = outcome(s, correlation, 2 if may_wait else 10)
        if result == "silent":
            assert may_wait, f"no response and no close for {APIS[key].name} v{version} ({mutation})"
        elif result == "response":  # the connection is still sound: it answers the next request
            s.sendall(struct.pack(">i", len(API_VERSIONS_V0)) + API_VERSIONS_V0)
            assert outcome(s, 999_999, 10) == "response", f"no answer after {APIS[key].name} v{version}"
        return result


def test_fuzzed_frames_never_hurt_the_broker(broker: Broker, capsys: pytest.CaptureFixture[str]) -> None:
    fuzz(broker, CASES, capsys)


@pytest.mark.slow
@pytest.mark.timeout(max(1800, SLOW_CASES // 5))
def test_fuzzed_frames_many_cases(broker: Broker, capsys: pytest.CaptureFixture[str]) -> None:
    fuzz(broker, SLOW_CASES, capsys)


def fuzz(broker: Broker, n: int, capsys: pytest.CaptureFixture[str]) -> None:
    pid = broker.process.pid  # type: ignore[union-attr]
    baseline = rss_bytes(pid)
    stats: Counter[str] = Counter()

    @settings(
        max_examples=n, deadline=None, database=None, derandomize=False,
        suppress_health_check=list(HealthCheck),
    )  # fmt: skip
    @given(case=cases())
    def run(case: tuple[int, int, int, bytes, str]) -> None:
        stats[send_case(broker, case)] += 1
        stats[f"mutation:{case[4]}"] += 1
        assert broker.running, f"the broker died on {APIS[case[0]].name} v{case[1]} ({case[4]})"

    with RssSampler(pid) as rss, WellBehaved(broker.host, broker.port, "fuzz-bystander") as bystander:
        run()
    assert broker.running
    assert not bystander.failures, bystander.failures[:5]
    assert len(bystander.round_trips) > 10
    assert rss.peak - baseline < RSS_GROWTH_LIMIT, f"RSS grew from {mib(baseline)} to {mib(rss.peak)}"
    assert "Traceback" not in broker.logs(), "an unexpected exception was logged"
    assert api_versions_ready(broker.host, broker.port)
    tried = sum(count for k, count in stats.items() if not k.startswith("mutation:"))
    with capsys.disabled():
        print(
            f"\nfuzz: {tried} cases ({dict(stats)}); broker RSS {mib(baseline)} before, peak {mib(rss.peak)}; "
            f"well-behaved client: {len(bystander.round_trips)} round trips, "
            f"max {max(bystander.round_trips) * 1000:.0f} ms"
        )


def test_many_connections_of_random_frames_at_once(broker: Broker) -> None:
    """64 connections at once, each a stream of frames with random headers and bodies."""
    pid = broker.process.pid  # type: ignore[union-attr]
    baseline = rss_bytes(pid)
    keys = [*sorted(APIS), -1, 999]
    errors: list[str] = []

    def attacker(seed: int) -> None:
        rng = random.Random(seed)
        try:
            with socket.create_connection((broker.host, broker.port), timeout=10) as s:
                for _ in range(rng.randint(1, 20)):
                    key = rng.choice(keys)
                    if key in UNMUTATED:
                        continue
                    body = struct.pack(
                        ">hhi", key, rng.randint(-1, 20), rng.randint(0, 2**31 - 1)
                    ) + rng.randbytes(rng.randint(0, 300))
                    s.sendall(struct.pack(">i", len(body)) + body)
                s.settimeout(10)
                while s.recv(65536):  # until the broker closes it (or answers everything)
                    pass
        except TimeoutError:
            pass  # every frame was answered and the connection is open: allowed
        except (ConnectionError, OSError):
            pass
        except Exception as e:
            errors.append(repr(e))

    with RssSampler(pid) as rss, WellBehaved(broker.host, broker.port, "fuzz-bystander-2") as bystander:
        threads = [threading.Thread(target=attacker, args=(i,)) for i in range(64)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert not errors, errors[:5]
    assert broker.running
    assert not bystander.failures, bystander.failures[:5]
    assert rss.peak - baseline < RSS_GROWTH_LIMIT, f"RSS grew from {mib(baseline)} to {mib(rss.peak)}"
    assert "Traceback" not in broker.logs()
    time.sleep(0.1)


def test_metadata_v10_with_a_null_topic_name_closes_with_one_line(tmp_path: Path) -> None:
    """Found by this fuzzer: a null topic name below v12 made the response unencodable (a traceback
    in the log). Kafka refuses it as an invalid request; kcompat closes the connection, saying why.
    A broker of its own: closing lines are rate-limited per client host and reason, and the fuzz
    rounds on the module's broker may have just closed a connection for this same reason."""
    broker = Broker(tmp_path / "data", tmp_path / "broker.log", overrides=dict(TEST_DEFAULTS))
    broker.start()
    try:
        _null_topic_name_closes_with_one_line(broker)
    finally:
        broker.stop()


def _null_topic_name_closes_with_one_line(broker: Broker) -> None:
    frame = encode_request(3, 10, 41, {"topics": [{"topic_id": uuid.UUID(int=5), "name": None}],
                                       "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})  # fmt: skip
    seen = len(broker.logs().splitlines())  # earlier fuzz connections may have used the same client port
    with socket.create_connection((broker.host, broker.port), timeout=5) as s:
        port = s.getsockname()[1]
        s.sendall(frame)
        assert outcome(s, 41, 5) == "closed"
    time.sleep(0.2)
    lines = [line for line in broker.logs().splitlines()[seen:] if f":{port}" in line]
    assert len(lines) == 1 and "cannot be null before v12" in lines[0], lines
    assert "Traceback" not in broker.logs()

"""Failed logins and fuzzed SASL exchanges against a real `kcompat serve` with a SASL_PLAINTEXT
listener (PLAIN, Kafka's default connection.failed.authentication.delay.ms of 100 ms):

* thousands of failed PLAIN logins on raw sockets, many at once: each failure is answered
  SASL_AUTHENTICATION_FAILED no sooner than the delay and then closed, logged once per connection
  with the user name and address and never the password, while a well-behaved client on the
  PLAINTEXT listener keeps its round trips fast and the broker's RSS stays bounded (the delay is
  a timer on the broker's event loop, not a sleep that holds other connections);
* random SaslHandshake/SaslAuthenticate frames, before and after a handshake: every connection is
  answered or closed, never left hanging, and the broker logs no traceback.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from compat_tests.crash.proc import RssSampler, mib, rss_bytes
from compat_tests.crash.wire_client import WellBehaved
from kcompat.testing import TEST_DEFAULTS, Broker, api_versions_ready, free_port
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.protocol import decode_response, encode_request

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
FAILED_LOGINS = 3000
AT_ONCE = 200
DELAY_S = 0.1  # Kafka's default connection.failed.authentication.delay.ms
RSS_GROWTH_LIMIT = 100 << 20
JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_bob="bob-secret";'
WRONG_PASSWORD = "hunter2-not-bobs"
pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    base: Path = tmp_path_factory.mktemp("sasl-abuse")
    props = {
        **TEST_DEFAULTS,
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "sasl.jaas.config": JAAS,
    }
    b = Broker(
        base / "data", base / "kcompat.log", overrides=props, listeners={"SASL_PLAINTEXT": free_port()}
    )
    b.start()
    yield b
    b.stop()


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    return await reader.readexactly(size)


async def _failed_login(host: str, port: int, user: str, delays: list[float]) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(encode_request(SASL_HANDSHAKE, 1, 1, {"mechanism": "PLAIN"}))
        _, hs = decode_response(SASL_HANDSHAKE, 1, await _read_frame(reader))
        assert hs.error_code == 0
        token = f"\0{user}\0{WRONG_PASSWORD}".encode()
        writer.write(encode_request(SASL_AUTHENTICATE, 2, 2, {"auth_bytes": token}))
        sent = time.monotonic()
        _, auth = decode_response(SASL_AUTHENTICATE, 2, await _read_frame(reader))
        delays.append(time.monotonic() - sent)
        assert auth.error_code == int(ErrorCode.SASL_AUTHENTICATION_FAILED)
        assert await reader.read(1) == b""  # then closed
    finally:
        writer.close()


async def _attack(host: str, port: int, delays: list[float]) -> None:
    todo = iter(range(FAILED_LOGINS))

    async def worker() -> None:
        for i in todo:
            await _failed_login(host, port, f"mallory-{i}", delays)

    await asyncio.gather(*(worker() for _ in range(AT_ONCE)))


def test_thousands_of_failed_logins_leave_others_served(
    broker: Broker, capsys: pytest.CaptureFixture[str]
) -> None:
    host, port = broker.address("SASL_PLAINTEXT").split(":")
    pid = broker.process.pid  # type: ignore[union-attr]
    baseline = rss_bytes(pid)
    delays: list[float] = []
    with RssSampler(pid) as rss, WellBehaved(broker.host, broker.port, "sasl-bystander") as bystander:
        time.sleep(0.5)  # the bystander's unhurried round trips first, for comparison
        quiet = list(bystander.round_trips)
        t0 = time.monotonic()
        asyncio.run(_attack(host, int(port), delays))
        took = time.monotonic() - t0
        during = bystander.round_trips[len(quiet) :]
    assert broker.running and not bystander.failures
    assert len(delays) == FAILED_LOGINS
    # no answer before the delay (the timer's own granularity aside), and the delays overlap
    assert min(delays) >= DELAY_S * 0.9
    assert took < FAILED_LOGINS * DELAY_S / 10
    assert during, "the well-behaved client made no round trip during the attack"
    median = statistics.median(during)
    assert median < 0.25 and max(during) < 2
    assert rss.peak - baseline < RSS_GROWTH_LIMIT
    # one INFO line per failed connection, with the user and the address, never the password
    deadline = time.monotonic() + 10
    while (
        time.monotonic() < deadline
        and broker.logs().count("failed authentication with PLAIN") < FAILED_LOGINS
    ):
        time.sleep(0.1)
    log = broker.logs()
    lines = [ln for ln in log.splitlines() if "failed authentication with PLAIN" in ln]
    assert len(lines) == FAILED_LOGINS
    assert sum("as mallory-17:" in ln for ln in lines) == 1 and all("127.0.0.1" in ln for ln in lines)
    assert WRONG_PASSWORD not in log and "Traceback" not in log
    with capsys.disabled():
        print(f"\n{FAILED_LOGINS} failed logins, {AT_ONCE} at once, in {took:.1f} s "
              f"(answer delay median {statistics.median(delays) * 1000:.0f} ms); bystander round trip "
              f"median {statistics.median(quiet or during) * 1000:.1f} ms before, {median * 1000:.1f} ms "
              f"during (max {max(during) * 1000:.0f} ms, {len(during)} trips); RSS +{mib(rss.peak - baseline)} "
              f"(shared 2-core VM: indicative)")  # fmt: skip


def _random_frame(rng: random.Random, correlation: int) -> bytes:
    kind = rng.random()
    if kind < 0.45:
        blob = rng.choice([
            b"", b"\0bob\0bob-secret", b"\0bob\0wrong", b"n,,n=bob,r=abc", b"\0\0\0",
            rng.randbytes(rng.randint(0, 300)),
        ])  # fmt: skip
        return encode_request(SASL_AUTHENTICATE, rng.randint(0, 2), correlation, {"auth_bytes": blob})
    if kind < 0.7:
        mechanism = rng.choice(["PLAIN", "SCRAM-SHA-512", "GSSAPI", "", "x" * 200])
        return encode_request(SASL_HANDSHAKE, rng.randint(0, 1), correlation, {"mechanism": mechanism})
    if kind < 0.85:  # a real header with a mangled body
        good = encode_request(SASL_AUTHENTICATE, rng.randint(0, 2), correlation, {"auth_bytes": b"abc"})
        body = bytearray(good[4:])
        for _ in range(rng.randint(1, 4)):
            body[rng.randrange(8, len(body))] = rng.randrange(256)
        return struct.pack(">i", len(body)) + bytes(body)
    noise = rng.randbytes(rng.randint(0, 64))
    return struct.pack(">i", len(noise)) + noise


async def _fuzz_one(host: str, port: int, rng: random.Random) -> str:
    """Send 1-5 random frames; 'answered' when the last got an answer, 'closed' when the broker
    closed; a hang raises TimeoutError."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        if rng.random() < 0.5:  # past the handshake first, sometimes in v0's bare-token mode
            v = rng.randint(0, 1)
            writer.write(
                encode_request(SASL_HANDSHAKE, v, 0, {"mechanism": rng.choice(["PLAIN", "SCRAM-SHA-512"])})
            )
            await asyncio.wait_for(_read_frame(reader), 5)
        for c in range(1, rng.randint(2, 6)):
            writer.write(_random_frame(rng, c))
            try:
                await asyncio.wait_for(_read_frame(reader), 5)
            except (asyncio.IncompleteReadError, ConnectionResetError):
                return "closed"
        return "answered"
    finally:
        writer.close()


def test_random_sasl_frames_are_answered_or_closed(
    broker: Broker, capsys: pytest.CaptureFixture[str]
) -> None:
    host, port = broker.address("SASL_PLAINTEXT").split(":")
    rng = random.Random(20261124)

    async def run() -> list[str]:
        sem = asyncio.Semaphore(50)

        async def one(seed: int) -> str:
            async with sem:
                return await _fuzz_one(host, int(port), random.Random(seed))

        return await asyncio.gather(*(one(rng.randrange(1 << 30)) for _ in range(600)))

    outcomes = asyncio.run(run())  # a hang would raise TimeoutError here
    assert broker.running and api_versions_ready(broker.host, broker.port)
    assert "Traceback" not in broker.logs()
    assert outcomes.count("closed") > 0 and outcomes.count("answered") > 0
    with capsys.disabled():
        print(
            f"\nfuzzed SASL connections: {outcomes.count('closed')} closed, {outcomes.count('answered')} answered"
        )

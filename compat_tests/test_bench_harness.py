"""The side-by-side benchmark harness (`python -m benchmarks`) cannot rot silently: its --quick
path runs against a real kcompat broker (confluent clients only, a few seconds), and its raw
request frames decode with kcompat's own codec, as Kafka's parser would read them."""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
import threading

import pytest
from support import ROOT

from benchmarks import fetch_path, metadata_probe, metadata_scale, proxy, share, txn
from benchmarks.brokers import KcompatBroker, free_port
from benchmarks.plan import QUICK, consume_key, produce_key
from benchmarks.suite import percentile
from kcompat.wire import protocol

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_quick_run_against_kcompat_writes_every_figure(tmp_path):
    out = tmp_path / "results"
    run = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--brokers", "kcompat", "--no-java", "--out", str(out),
         "--workdir", str(tmp_path / "work"), "--suites", "produce,consume,latency,txn,share"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    data = json.loads((out / "results.json").read_text())
    (kcompat,) = data["runs"]
    assert kcompat["broker"] == "kcompat" and kcompat["errors"] == {}
    values = kcompat["values"]
    expected = ["start/cold_s", "memory/idle_rss_mb", "memory/load_rss_mb",
                "latency/e2e/p50_ms", "latency/e2e/p99_ms", "latency/e2e/p99.9_ms"]  # fmt: skip
    for size in QUICK.sizes:
        for acks in QUICK.acks:
            for comp in QUICK.compressions:
                key = produce_key("confluent", size, acks, comp)
                expected += [f"{key}/records_per_s", f"{key}/mb_per_s"]
        for reader in ("confluent", "raw-1MiB", "raw-50MiB"):
            expected += [
                f"{consume_key(reader, size)}/records_per_s",
                f"{consume_key(reader, size)}/mb_per_s",
            ]
        # benchmarks/txn.py: the confluent transactional loop and its read_committed catch-up.
        for key in (txn.produce_key("confluent", size), txn.consume_key("confluent", size)):
            expected += [f"{key}/records_per_s", f"{key}/mb_per_s"]
    # benchmarks/share.py: the confluent ShareConsumer rows, 1 and 2 members, implicit and explicit.
    share_keys = [key for label, key in share.rows(QUICK) if label.startswith("confluent")]
    assert len(share_keys) == 2 * 2 * len(QUICK.sizes)
    for key in share_keys:
        expected += [f"{key}/records_per_s", f"{key}/mb_per_s", f"{key}/cpu_s_per_gb"]
    missing = [k for k in expected if k not in values]
    assert not missing, missing
    # a quick share row can take the broker under one clock tick of CPU now that ShareFetch sends
    # file slices: its CPU per GB may be 0, every other figure must be positive
    assert all(values[k] > 0 or (k.endswith("cpu_s_per_gb") and values[k] == 0) for k in expected), {
        k: values[k] for k in expected if not values[k] > 0
    }
    assert values["latency/e2e/p50_ms"] <= values["latency/e2e/p99_ms"] <= values["latency/e2e/p99.9_ms"]
    (machine,) = data["machine"]
    assert machine["sendfile_mbs"] > 0 and machine["write_mbs"] > 0
    report = (out / "report.md").read_text()
    assert "## Produce throughput, records/s" in report and "| confluent 1 KiB acks=all lz4 |" in report
    assert "## Targets" in report and "## Failures" not in report
    assert "| consume read_committed confluent 1 KiB |" in report
    assert "| confluent 2 members 1 KiB explicit |" in report
    for plot in ("throughput.png", "latency.png", "memory.png"):
        assert (out / plot).read_bytes()[:8] == PNG_MAGIC


def test_raw_frames_decode_as_kafka_reads_them():
    fetch = fetch_path.fetch_request(7, "some-topic", 123456789012, 1 << 20, 50 << 20)
    assert struct.unpack_from(">i", fetch)[0] == len(fetch) - 4
    req = protocol.decode_request(fetch[4:])
    assert (req.api_key, req.api_version, req.correlation_id) == (1, 4, 7)
    (topic,) = req.body.topics
    (part,) = topic.partitions
    assert (topic.topic, part.partition, part.fetch_offset, part.partition_max_bytes) == (
        "some-topic",
        0,
        123456789012,
        1 << 20,
    )
    assert (req.body.replica_id, req.body.max_bytes, req.body.min_bytes) == (-1, 50 << 20, 1)
    metadata = protocol.decode_request(metadata_probe.metadata_request()[4:])
    assert (metadata.api_key, metadata.api_version, metadata.body.topics) == (3, 4, None)
    assert metadata.body.allow_auto_topic_creation is False
    every = protocol.decode_request(metadata_scale.metadata_v12_all(9)[4:])
    assert (every.api_key, every.api_version, every.correlation_id, every.body.topics) == (3, 12, 9, None)
    assert (every.body.allow_auto_topic_creation, every.body.include_topic_authorized_operations) == (
        False,
        False,
    )


def test_only_whole_batches_count():
    def batch(base: int, last_delta: int, length: int) -> bytes:
        head = struct.pack(">qiibihi", base, length, 0, 2, 0, 0, last_delta)
        return head + bytes(12 + length - len(head))

    data = batch(0, 9, 61) + batch(10, 4, 80)
    assert fetch_path._whole_batches(memoryview(data), 0, len(data), 0) == (15, 165)
    assert fetch_path._whole_batches(memoryview(data), 0, len(data) - 1, 0) == (
        10,
        73,
    )  # the second is cut short
    assert fetch_path._whole_batches(memoryview(data), 0, 20, 3) == (3, 0)  # not even one whole batch


def test_percentile_is_nearest_rank():
    values = [float(v) for v in range(1, 1001)]
    assert (percentile(values, 50), percentile(values, 99), percentile(values, 99.9)) == (500.0, 990.0, 999.0)
    assert percentile([5.0], 99.9) == 5.0


@pytest.mark.slow
def test_cluster_suite_quick_run_against_kcompat_gives_every_figure(tmp_path):
    """The cluster suite (benchmarks/cluster.py) on a real controller and three kcompat brokers,
    then 1 and 2 brokers for scale on cores: every figure there, none failed (a minute or two)."""
    from benchmarks import cluster

    results = cluster.run(["kcompat"], cluster.QUICK, tmp_path, java=False)
    run = results["kcompat"]
    assert run["errors"] == {}, run["errors"]
    values = run["values"]
    for size in (100, 1024):
        for key in (f"produce/confluent/{size}", f"consume/confluent/{size}"):
            assert values[f"{key}/records_per_s"] > 0 and values[f"{key}/mb_per_s"] > 0
    assert 0 < values["e2e/p50_ms"] <= values["e2e/p99_ms"]
    # The controller fences the killed leader after broker.session.timeout.ms (9 s) at the earliest.
    assert cluster.SESSION_TIMEOUT_MS / 1000 - 1 < values["failover_s"] < 60
    assert 0 < values["group/classic/stable_s"] < 60 and 0 < values["group/consumer/stable_s"] < 60
    # The killed coordinator's offsets partitions move once the controller fences it, as above.
    assert cluster.SESSION_TIMEOUT_MS / 1000 - 1 < values["group/coordinator_failover_s"] < 60
    assert values["group/redelivered"] >= 0
    assert sorted(values["rss_idle_mb"]) == sorted(values["rss_peak_mb"]) == [1, 2, 3]
    assert all(v > 0 for v in values["rss_peak_mb"].values())
    scale = results["scale"]
    assert "error" not in scale, scale
    assert scale["produce_speedup"] > 0 and scale["consume_speedup"] > 0
    table = cluster.table(results)
    assert "| produce confluent 1 KiB (records/s) |" in table and "| failover after kill -9" in table
    assert "| kill -9 of the group coordinator to the next commit (s) |" in table


@pytest.mark.slow
def test_proxy_suite_quick_run_against_kcompat_gives_every_figure(tmp_path):
    """The proxy rows (benchmarks/proxy.py): a real `kcompat proxy` process in front of a real
    kcompat broker, every row direct, proxied and through the Go byte relay, the CPU and memory of
    the proxy and the relay; none failed."""
    out = tmp_path / "results"
    run = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--brokers", "kcompat", "--no-java", "--out", str(out),
         "--workdir", str(tmp_path / "work"), "--suites", "proxy", "--no-plots"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    (kcompat,) = json.loads((out / "results.json").read_text())["runs"]
    assert kcompat["errors"] == {}, kcompat["errors"]
    values = kcompat["values"]
    expected = [
        f"{p}/{f}" for p in ("proxy", "relay") for f in ("cpu_s_per_gb", "idle_rss_mb", "load_rss_mb")
    ]
    for _label, workload, size in proxy.rows(QUICK):
        expected += [
            f"{proxy.key(workload, size, path)}/{f}"
            for path in proxy.PATHS
            for f in ("records_per_s", "mb_per_s", "cpu_s_per_gb")
        ]
    expected += [f"proxy/e2e/{path}/{p}_ms" for path in proxy.PATHS for p in ("p50", "p99")]
    missing = [k for k in expected if k not in values]
    assert not missing, missing
    # a quick direct catch-up read can take under one clock tick of the broker's CPU, and a spliced
    # relay under one of its own: >= 0 there
    assert all(values[k] > 0 or (k.endswith("cpu_s_per_gb") and values[k] == 0) for k in expected)
    for p in ("proxy", "relay"):
        assert values[f"{p}/idle_rss_mb"] <= values[f"{p}/load_rss_mb"]
    ratios = proxy.ratios(values, QUICK)
    added = [f"proxy/e2e/{path}/added_p99_ms" for path in ("proxied", "relayed")]
    assert all(k in ratios for k in added)  # indirect p99 - direct p99: either sign on a loaded machine
    throughput = {k: r for k, r in ratios.items() if k not in added}
    assert len(throughput) == 2 * len(proxy.rows(QUICK)) and all(r > 0 for r in throughput.values())
    report = (out / "report.md").read_text()
    assert "## Through `kcompat proxy` and a byte relay vs direct" in report
    assert "| row, upstream | direct | proxied | relayed | proxied/direct | relayed/direct |" in report
    assert (
        "| produce confluent 1 KiB, records/s, kcompat |" in report
        and "| process CPU s per GB (its rows), kcompat |" in report
    )
    assert "| proxy throughput >= 0.9x direct, every row |" in report and "relay floor" in report


@pytest.mark.slow
def test_streams_suite_quick_run_against_kcompat_gives_every_figure(tmp_path):
    """The streams suite (benchmarks/streams.py): Kafka Streams 4.3.1 on the streams protocol
    against a real kcompat broker, its throughput and scale-out figures there, none failed."""
    from benchmarks import streams

    out = tmp_path / "results"
    run = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--brokers", "kcompat", "--suites", "streams",
         "--no-plots", "--out", str(out), "--workdir", str(tmp_path / "work")],
        cwd=ROOT, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    (kcompat,) = json.loads((out / "results.json").read_text())["runs"]
    assert kcompat["errors"] == {}, kcompat["errors"]
    for _label, key, _unit, _higher in streams.rows():
        assert kcompat["values"][key] > 0, key
    # Two heartbeats at most: the newcomer's join and the first member's revocation.
    assert kcompat["values"][f"{streams.SCALE_OUT}/s"] < 60
    report = (out / "report.md").read_text()
    assert "| stateful app, input lines/s end to end |" in report, report


def test_requests_suite_quick_run_against_kcompat_gives_every_figure(tmp_path):
    """The small-requests rows and the produce ceiling (benchmarks/small_requests.py): the Go load
    against a real kcompat broker, every figure there and positive, and the two targets in the report."""
    from benchmarks import small_requests

    out = tmp_path / "results"
    run = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--brokers", "kcompat", "--no-java", "--out", str(out),
         "--workdir", str(tmp_path / "work"), "--suites", "requests", "--no-plots"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    (kcompat,) = json.loads((out / "results.json").read_text())["runs"]
    assert kcompat["errors"] == {}, kcompat["errors"]
    values = kcompat["values"]
    for _label, key, _unit, _higher in small_requests.rows():
        assert values[key] > 0, key
    # every small request carries 16 KiB of records: the broker cannot take them faster than the disk
    (machine,) = json.loads((out / "results.json").read_text())["machine"]
    for acks in small_requests.ACKS:
        assert (
            values[f"{small_requests.key(acks)}/requests_per_s"] * 16 * 1024 < 2 * machine["write_mbs"] * 1e6
        )
    # the Python floor under these rows (request_floor.py): it answered every request of both jobs
    from benchmarks import request_floor

    for key in request_floor.FIGURES:
        assert machine[key] > 0, key
    report = (out / "report.md").read_text()
    assert "## Small requests and the produce ceiling" in report
    assert "the Python floor:" in report  # beside the small-requests and ceiling targets
    assert "| produce ceiling >= 50% of the page-cache write limit |" in report
    assert "MB/s of" in report  # the ceiling as a share of the write limit measured in the same run


def test_byte_relay_passes_bytes_and_half_closes_on_both_ways(tmp_path):
    """benchmarks/relay (built by go_tools): every byte both ways, unchanged, and a client's half
    close reaches the upstream, whose answer and own close come back: what a Kafka connection
    through it relies on (the proxy rows' relayed path)."""
    from benchmarks import go_tools

    payload = bytes(range(256)) * 4096  # 1 MiB: many splice calls, not one segment
    answers: list[bytes] = []
    with socket.create_server(("127.0.0.1", 0)) as upstream:

        def serve() -> None:
            conn, _ = upstream.accept()
            with conn:
                got = bytearray()
                while chunk := conn.recv(1 << 16):  # b"": the client's half close came through
                    got += chunk
                answers.append(bytes(got))
                conn.sendall(bytes(reversed(got)))  # its answer, after the client stopped sending

        server = threading.Thread(target=serve, daemon=True)
        server.start()
        port = free_port()
        relay = subprocess.Popen(
            [str(go_tools.binary("relay", "this test")), f"127.0.0.1:{port}", f"127.0.0.1:{upstream.getsockname()[1]}"],
            stdout=subprocess.PIPE,
        )  # fmt: skip
        with relay:  # closes its stdout pipe
            try:
                assert relay.stdout is not None and relay.stdout.readline() == b"listening\n"
                with socket.create_connection(("127.0.0.1", port), timeout=30) as client:
                    client.sendall(payload)
                    client.shutdown(socket.SHUT_WR)
                    back = bytearray()
                    while chunk := client.recv(1 << 16):  # b"": the upstream's close came back
                        back += chunk
                server.join(30)
                assert answers == [payload] and bytes(back) == bytes(reversed(payload))
            finally:
                relay.terminate()
                relay.wait(15)


def test_relay_refuses_an_upstream_that_does_not_advertise_it(tmp_path):
    """A broker's plain listener names its own port in Metadata: clients would leave the relay after
    bootstrap and the relayed rows would measure the direct path. RelayProcess.start says so."""
    broker = KcompatBroker(tmp_path / "broker")  # no RELAY listener
    broker.start()
    relay = proxy.RelayProcess(free_port(), broker.port, tmp_path / "relay.log")
    try:
        with pytest.raises(RuntimeError, match=f"not the relay's {relay.port}"):
            relay.start()
        assert relay.process is None  # stopped on the way out
    finally:
        relay.stop()
        broker.stop()
        broker.cleanup()

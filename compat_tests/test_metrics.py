"""The HTTP admin listener and its Prometheus /metrics, scraped over HTTP from a real `kcompat serve`
after confluent-kafka (librdkafka) produced, consumed and committed: the counts are the ones sent,
the lag is log end minus committed, and a broker with the listener off loads no HTTP or Prometheus code."""

from __future__ import annotations

import http.client
import json
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families
from support import default_admin_port_taken

from kcompat.testing import Broker, free_port

pytestmark = pytest.mark.timeout(120)

DASHBOARD = Path(__file__).resolve().parent.parent / "docs" / "grafana" / "kcompat.json"

TOPIC = "metered"
PARTITIONS = 3
RECORDS = 300
COMMITTED = {0: 7, 1: 0, 2: 40}  # offsets the group commits, per partition (at most what each holds)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    base = tmp_path_factory.mktemp("metrics")
    b = Broker(base / "data", base / "broker.log", {"admin.listener": f"127.0.0.1:{free_port()}",
                                                     "group.initial.rebalance.delay.ms": "0",
                                                     "offsets.topic.num.partitions": "1"})  # fmt: skip
    b.start()
    yield b
    b.stop()


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of /metrics as {(name, sorted labels): value}."""
    host_port = url.removeprefix("http://")
    conn = http.client.HTTPConnection(host_port, timeout=10)
    conn.request("GET", "/metrics")
    resp = conn.getresponse()
    assert resp.status == 200
    assert resp.getheader("content-type", "").startswith("text/plain; version=")
    text = resp.read().decode()
    conn.close()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}  # fmt: skip


def value(
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: object
) -> float:
    key = (name, tuple(sorted((k, str(v)) for k, v in labels.items())))
    assert key in samples, f"{name}{labels} is not in /metrics"
    return samples[key]


def test_metrics_count_what_clients_sent_and_compute_lag(broker: Broker) -> None:
    assert broker.admin_url is not None
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)

    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(RECORDS):
        producer.produce(TOPIC, value=b"v" * 50, key=str(i).encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "metered-group",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})  # fmt: skip
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    got = 0
    deadline = time.monotonic() + 30
    while got < RECORDS and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None:
            assert m.error() is None, m.error()
            got += 1
    assert got == RECORDS
    consumer.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in COMMITTED.items()], asynchronous=False)
    ends = {
        p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1] for p in range(PARTITIONS)
    }
    assert sum(ends.values()) == RECORDS

    samples = scrape(broker.admin_url)
    consumer.close()
    del producer, admin  # librdkafka's clients go before the module's broker does

    assert value(samples, "kafka_server_brokertopicmetrics_messagesin_total", topic=TOPIC) == RECORDS
    # Batches are stored as they came (no recompression): bytes in is the size of the topic's logs,
    # and the consumer read each batch once.
    log_bytes = sum(value(samples, "kafka_log_log_size", topic=TOPIC, partition=p) for p in range(PARTITIONS))
    assert (
        value(samples, "kafka_server_brokertopicmetrics_bytesin_total", topic=TOPIC)
        == log_bytes
        > RECORDS * 50
    )
    assert value(samples, "kafka_server_brokertopicmetrics_bytesout_total", topic=TOPIC) == log_bytes
    assert value(samples, "kafka_topic_partitions", topic=TOPIC) == PARTITIONS
    for p in range(PARTITIONS):
        assert value(samples, "kafka_log_log_logendoffset", topic=TOPIC, partition=p) == ends[p]
        assert value(samples, "kafka_topic_partition_current_offset", topic=TOPIC, partition=p) == ends[p]
        assert value(samples, "kafka_log_log_logstartoffset", topic=TOPIC, partition=p) == 0
        tp = {"consumergroup": "metered-group", "topic": TOPIC, "partition": p}
        assert value(samples, "kafka_consumergroup_current_offset", **tp) == COMMITTED[p]
        assert value(samples, "kafka_consumergroup_lag", **tp) == ends[p] - COMMITTED[p]
    assert value(
        samples, "kafka_consumergroup_lag_sum", consumergroup="metered-group", topic=TOPIC
    ) == RECORDS - sum(COMMITTED.values())

    # Requests per API, and a latency histogram whose count is that number.
    for api in ("Produce", "Fetch", "Metadata", "OffsetCommit", "CreateTopics"):
        n = value(samples, "kafka_network_requestmetrics_requests_total", request=api)
        assert n >= 1
        assert value(samples, "kafka_network_requestmetrics_totaltime_seconds_count", request=api) == n
        assert (
            value(samples, "kafka_network_requestmetrics_totaltime_seconds_bucket", request=api, le="+Inf")
            == n
        )
    assert value(samples, "kafka_server_socketservermetrics_connection_creation_total") >= 2
    assert value(samples, "kafka_server_socketservermetrics_connection_count") >= 1


def test_errors_by_api_and_code_latency_quantiles_and_process(broker: Broker) -> None:
    """Six topics refused in one CreateTopics count six TOPIC_ALREADY_EXISTS (Kafka's ErrorsPerSec);
    TotalTimeMs's percentiles are there as the JMX exporter names them; so are process metrics."""
    assert broker.admin_url is not None
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    names = [f"dup-{i}" for i in range(6)]
    for f in admin.create_topics([NewTopic(n, 1, 1) for n in names]).values():
        f.result(30)
    before = scrape(broker.admin_url)
    failed = admin.create_topics([NewTopic(n, 1, 1) for n in names], request_timeout=30)
    for f in failed.values():
        with pytest.raises(KafkaException, match="TOPIC_ALREADY_EXISTS"):
            f.result(30)
    after = scrape(broker.admin_url)
    del admin
    exists = {"request": "CreateTopics", "error": "TOPIC_ALREADY_EXISTS"}
    errors = "kafka_network_requestmetrics_errors_total"
    assert value(after, errors, **exists) - before.get((errors, tuple(sorted(exists.items()))), 0) == 6
    assert value(after, errors, request="CreateTopics", error="NONE") == value(
        before, errors, request="CreateTopics", error="NONE"
    )
    assert value(after, errors, request="ApiVersions", error="NONE") >= 1

    produced = value(after, "kafka_network_requestmetrics_requests_total", request="Produce")
    assert value(after, "kafka_network_requestmetrics_totaltimems_count", request="Produce") == produced
    quantiles = [
        value(after, "kafka_network_requestmetrics_totaltimems", request="Produce", quantile=q)
        for q in ("0.50", "0.75", "0.95", "0.98", "0.99", "0.999")
    ]
    assert 0 < quantiles[0] <= quantiles[-1] == max(quantiles)
    assert quantiles == sorted(quantiles)

    assert value(after, "process_resident_memory_bytes") > 10_000_000
    assert value(after, "process_open_fds") > 0
    assert value(after, "process_cpu_seconds_total") > 0
    assert any(name == "python_info" for name, _ in after)


# A PromQL selector: a metric name, its optional {label matchers}, not a function call.
_SELECTOR = re.compile(r"(?<![\w:\"])([a-zA-Z_:][a-zA-Z0-9_:]*)(?![\w:])\s*(\{[^}]*\})?(?!\s*\()")
_MATCHER = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"')
_KEYWORDS = {
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "offset",
    "bool",
    "and",
    "or",
    "unless",
}


def selectors(expr: str) -> list[tuple[str, list[tuple[str, str, str]]]]:
    """The series selectors of a PromQL expression: (metric name, [(label, op, value)])."""
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # range durations
    expr = re.sub(r"\b(by|without|on|ignoring)\s*\([^)]*\)", "", expr)  # grouping label lists
    found = []
    for m in _SELECTOR.finditer(expr):
        name, matchers = m.group(1), m.group(2) or ""
        if name not in _KEYWORDS and not name.isdigit():
            found.append((name, _MATCHER.findall(matchers)))
    return found


def _matches(labels: dict[str, str], matchers: list[tuple[str, str, str]]) -> bool:
    for label, op, want in matchers:
        have = labels.get(label, "")
        ok = {"=": have == want, "!=": have != want,
              "=~": re.fullmatch(want, have) is not None, "!~": re.fullmatch(want, have) is None}[op]  # fmt: skip
        if not ok:
            return False
    return True


def test_selectors_parse_promql() -> None:
    expr = 'histogram_quantile(0.95, sum by (le, request) (rate(x_bucket{request=~"A|B",error!="NONE"}[5m])))'
    assert selectors(expr) == [("x_bucket", [("request", "=~", "A|B"), ("error", "!=", "NONE")])]
    assert selectors("process_open_fds") == [("process_open_fds", [])]


def test_every_grafana_panel_has_data(broker: Broker) -> None:
    """Each expression of docs/grafana/kcompat.json names only series this broker's /metrics has,
    each with a sample its label matchers select (the first test and the errors test made traffic,
    a group and a refused CreateTopics)."""
    assert broker.admin_url is not None
    dashboard = json.loads(DASHBOARD.read_text())
    samples = scrape(broker.admin_url)
    by_name: dict[str, list[dict[str, str]]] = {}
    for name, labels in samples:
        by_name.setdefault(name, []).append(dict(labels))
    assert len(dashboard["panels"]) >= 10
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])
    for panel in dashboard["panels"]:
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            found = selectors(target["expr"])
            assert found, (panel["title"], target["expr"])
            for name, matchers in found:
                series = by_name.get(name, [])
                assert series, f"panel {panel['title']!r}: {name} is not in /metrics"
                assert any(_matches(labels, matchers) for labels in series), (
                    f"panel {panel['title']!r}: no {name} sample matches {matchers}"
                )


def test_admin_listener_http(broker: Broker) -> None:
    assert broker.admin_url is not None
    conn = http.client.HTTPConnection(broker.admin_url.removeprefix("http://"), timeout=10)
    for method, path, status in (("GET", "/", 200), ("GET", "/nope", 404), ("POST", "/metrics", 405),
                                 ("HEAD", "/metrics", 200), ("GET", "/metrics?x=1", 200)):  # fmt: skip
        conn.request(method, path, body=b"ignored" if method == "POST" else None)  # one keep-alive connection
        resp = conn.getresponse()
        body = resp.read()
        assert resp.status == status, (method, path)
        assert (body == b"") == (method == "HEAD"), (method, path)
    conn.close()
    assert f"console at {broker.admin_url}/, metrics at {broker.admin_url}/metrics" in broker.logs()


def _serve(tmp_path: Path, *overrides: str) -> subprocess.Popen[str]:
    port = free_port()
    cmd = [sys.executable, "-X", "importtime", "-m", "kcompat", "serve", "--override",
           f"listeners=PLAINTEXT://127.0.0.1:{port}", "--override", f"log.dirs={tmp_path / 'data'}"]  # fmt: skip
    for o in overrides:
        cmd += ["--override", o]
    return subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)


def _run_until_listening(proc: subprocess.Popen[str]) -> str:
    """The process's stderr, from start to its exit after the "listening" line and a SIGTERM."""
    assert proc.stderr is not None
    lines = []
    with proc.stderr:
        for line in proc.stderr:
            lines.append(line)
            if " listening on " in line:
                proc.terminate()
    proc.wait(30)
    return "".join(lines)


def test_serve_loads_no_prometheus_or_console_until_asked(tmp_path: Path) -> None:
    off = _run_until_listening(_serve(tmp_path, "admin.listener="))
    assert " listening on " in off and "metrics at" not in off
    loaded = {line.split("|")[-1].strip() for line in off.splitlines() if line.startswith("import time:")}
    assert "uvloop" in loaded  # the import-time lines are there to look at
    assert not {m for m in loaded if m.split(".")[0] in ("prometheus_client", "h11", "jinja2")}
    on = _run_until_listening(_serve(tmp_path, f"admin.listener=127.0.0.1:{free_port()}"))
    assert "metrics at http://127.0.0.1:" in on
    # with it on, Prometheus and the console wait for the first scrape or page (an idle broker stays small)
    loaded_on = {line.split("|")[-1].strip() for line in on.splitlines() if line.startswith("import time:")}
    assert "uvloop" in loaded_on
    assert not {m for m in loaded_on if m.split(".")[0] in ("prometheus_client", "jinja2")}


def test_admin_port_taken(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        # A port the user chose: one line, exit 1, as for a Kafka listener.
        proc = _serve(tmp_path, f"admin.listener=127.0.0.1:{port}")
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 1
        assert f"cannot listen on admin.listener 127.0.0.1:{port}" in err and "Traceback" not in err
    # The default port taken (by this test, or by anything else holding 9644): the broker starts anyway.
    with default_admin_port_taken():
        out = _run_until_listening(_serve(tmp_path))
    assert "admin listener not started: 127.0.0.1:9644 is in use" in out
    assert " listening on " in out

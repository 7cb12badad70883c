"""Kafka's RequestMetrics as a Kafka dashboard queries them through the Prometheus JMX exporter:

    kafka_network_requestmetrics_requests_total{request}
    kafka_network_requestmetrics_errors_total{request,error}   ErrorsPerSec: every error code in the
        answers, NONE included; UNKNOWN_SERVER_ERROR also counts a request whose handling failed
        (kcompat closes that connection where Kafka would answer the error)
    kafka_network_requestmetrics_cancelled_total{request}     kcompat's: answers dropped with their
        closed connection (an acks=all Produce still waiting for the ISR)
    kafka_network_requestmetrics_totaltimems{request,quantile}  TotalTimeMs's percentiles, with
        quantile "0.50" ... "0.999" as the exporter names 50thPercentile ... 999thPercentile, and
        _count and _sum (ms)
    kafka_network_requestmetrics_totaltime_seconds{request}    the same times as a histogram

The percentiles cost the hot path nothing beyond the histogram's one bisect: the dispatcher counts
each request in a fine bucket (broker_stats.FINE_BUCKETS_S) and a scrape interpolates in the
counts of the last five minutes (the difference from a snapshot that old; since start-up while the
first scrape is younger than that). Kafka's reservoir likewise weighs its last five minutes most.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric

from kcompat.server.broker_stats import FINE_BUCKETS_S, LATENCY_BUCKETS_S, RequestStats
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages import APIS

PREFIX = "kafka_network_requestmetrics_"
# The JMX exporter's quantile label for Kafka's 50thPercentile ... 999thPercentile attributes.
QUANTILES = (("0.50", 0.50), ("0.75", 0.75), ("0.95", 0.95), ("0.98", 0.98), ("0.99", 0.99), ("0.999", 0.999))
WINDOW_S = 300.0
_BOUNDS = [repr(b) for b in LATENCY_BUCKETS_S] + ["+Inf"]

Counts = dict[int, list[int]]


class RecentCounts:
    """The fine-bucket counts of the last WINDOW_S seconds, from snapshots taken at scrapes (at
    most one per twentieth of the window, so a tight scrape loop does not pile them up)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, window_s: float = WINDOW_S) -> None:
        self._clock = clock
        self._window = window_s
        self._snapshots: deque[tuple[float, Counts]] = deque()

    def since_window(self, requests: dict[int, RequestStats]) -> Counts:
        now = self._clock()
        current = {key: list(stats.buckets) for key, stats in requests.items()}
        snaps = self._snapshots
        while len(snaps) >= 2 and now - snaps[1][0] >= self._window:
            snaps.popleft()
        base = snaps[0][1] if snaps and now - snaps[0][0] >= self._window else {}
        if not snaps or now - snaps[-1][0] >= self._window / 20:
            snaps.append((now, current))
        out = {}
        for key, counts in current.items():
            before = base.get(key)
            out[key] = counts if before is None else [c - b for c, b in zip(counts, before, strict=True)]
        return out


def quantile_ms(counts: list[int], q: float) -> float:
    """The q-quantile in ms of the times counted per fine bucket (+Inf last), interpolated
    linearly inside its bucket (a time over the last bound counts as that bound)."""
    total = sum(counts)
    if total == 0:
        return 0.0
    rank = q * total
    seen = 0
    for i, n in enumerate(counts):
        if n and seen + n >= rank:
            low = FINE_BUCKETS_S[i - 1] if i else 0.0
            high = FINE_BUCKETS_S[i] if i < len(FINE_BUCKETS_S) else low
            return (low + (high - low) * (rank - seen) / n) * 1000.0
        seen += n
    return FINE_BUCKETS_S[-1] * 1000.0


def api_name(key: int) -> str:
    declared = APIS.get(key)
    return declared.name if declared is not None else str(key)


def request_metrics(requests: dict[int, RequestStats], recent: RecentCounts) -> Iterator[Metric]:
    total = CounterMetricFamily(PREFIX + "requests", "Requests handled, by API.", labels=["request"])
    errors = CounterMetricFamily(
        PREFIX + "errors",
        "Error codes in the answers, NONE included (Kafka's ErrorsPerSec); UNKNOWN_SERVER_ERROR also "
        "counts requests whose handling failed and closed the connection.",
        labels=["request", "error"],
    )
    cancelled = CounterMetricFamily(
        PREFIX + "cancelled",
        "Requests taken whose answer was dropped with their closed connection (acks=all Produce).",
        labels=["request"],
    )
    histogram = HistogramMetricFamily(
        PREFIX + "totaltime_seconds",
        "Time from a request decoded to its response ready, parked waits included.",
        labels=["request"],
    )
    summary = Metric(
        PREFIX + "totaltimems",
        "Kafka's TotalTimeMs: percentiles of the last five minutes, count and sum since start-up (ms).",
        "summary",
    )
    window = recent.since_window(requests)
    for key, stats in sorted(requests.items()):
        api = api_name(key)
        total.add_metric([api], stats.count)
        for code, n in sorted(stats.error_codes.items()):
            errors.add_metric([api, ErrorCode.of(code).name], n)
        cancelled.add_metric([api], stats.cancelled)
        cumulative, running = [], 0
        for bound, n in zip(_BOUNDS, stats.histogram(), strict=True):
            running += n
            cumulative.append((bound, running))
        histogram.add_metric([api], cumulative, stats.seconds)
        for label, q in QUANTILES:
            summary.add_sample(summary.name, {"request": api, "quantile": label}, quantile_ms(window[key], q))
        summary.add_sample(summary.name + "_count", {"request": api}, stats.count)
        summary.add_sample(summary.name + "_sum", {"request": api}, stats.seconds * 1000.0)
    yield from (total, errors, cancelled, histogram, summary)

"""What the broker counts as it serves (Kafka's BrokerTopicStats and RequestMetrics), as plain ints.

The hot path only adds to ints and lists (a dict lookup and an increment per produced batch, per
fetched partition with data, per request); nothing here knows Prometheus. kcompat.server.admin.metrics
turns these into metric families when /metrics is scraped, and is imported only when the admin
listener is on: a broker without it pays the increments and nothing else.

    Produce (handlers/produce.py) --records_in(topic, n, bytes)--> TopicStats.messages_in/bytes_in
    Fetch   (handlers/fetch.py)   --bytes_out(topic, bytes)------> TopicStats.bytes_out (consumers),
                                                                     .replication_bytes_out (followers)
    every request (dispatcher.py) --observe(api_key, seconds, body)-> RequestStats: count, sum,
                                                                     fine buckets, error codes
"""

from __future__ import annotations

from bisect import bisect_left
from itertools import pairwise

from kcompat.server.error_counts import count_errors

# Upper bounds (seconds) of the request-latency buckets: from a fast Produce (~0.1 ms) to a Fetch
# that long-polls for its whole max.wait.ms (500 ms by default) or a JoinGroup that waits longer.
LATENCY_BUCKETS_S = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)


def _fine_bounds() -> tuple[float, ...]:
    """The histogram's bounds with each gap split in four geometric steps (about x1.26 each), and
    three more below 0.1 ms: what the quantile estimate interpolates in (one spans at most x1.32,
    so an estimate is off by less than a third, usually far less). Every
    histogram bound is one of them, so the histogram's buckets are sums of these."""
    coarse = (0.00001, 0.000025, 0.00005, *LATENCY_BUCKETS_S)
    fine = [coarse[0]]
    for low, high in pairwise(coarse):
        fine += [low * (high / low) ** (k / 4) for k in (1, 2, 3)]
        fine.append(high)
    return tuple(fine)


FINE_BUCKETS_S = _fine_bounds()
# For each fine bucket (+Inf last), the histogram bucket holding it.
HISTOGRAM_OF_FINE = (*(bisect_left(LATENCY_BUCKETS_S, b) for b in FINE_BUCKETS_S), len(LATENCY_BUCKETS_S))
UNKNOWN_SERVER_ERROR = -1  # what a request whose handling failed (its connection closed) counts as


class TopicStats:
    __slots__ = ("bytes_in", "bytes_out", "messages_in", "replication_bytes_out")

    def __init__(self) -> None:
        self.messages_in = 0
        self.bytes_in = 0
        self.bytes_out = 0  # to consumers; followers' fetches count apart, as Kafka's BytesOutPerSec
        self.replication_bytes_out = 0


class RequestStats:
    """One API's requests: how many, their total time, a count per fine latency bucket (+Inf last)
    and per error code found in the answers (UNKNOWN_SERVER_ERROR: handling failed)."""

    __slots__ = ("buckets", "cancelled", "count", "error_codes", "seconds")

    def __init__(self) -> None:
        self.count = 0
        self.error_codes: dict[int, int] = {}
        self.cancelled = 0  # requests taken whose answer was dropped with their closed connection
        self.seconds = 0.0
        self.buckets = [0] * (len(FINE_BUCKETS_S) + 1)

    def histogram(self) -> list[int]:
        """The count per histogram bucket (LATENCY_BUCKETS_S, +Inf last)."""
        out = [0] * (len(LATENCY_BUCKETS_S) + 1)
        for i, n in enumerate(self.buckets):
            out[HISTOGRAM_OF_FINE[i]] += n
        return out


class BrokerStats:
    __slots__ = ("requests", "topics")

    def __init__(self) -> None:
        self.topics: dict[str, TopicStats] = {}
        self.requests: dict[int, RequestStats] = {}

    def topic(self, name: str) -> TopicStats:
        stats = self.topics.get(name)
        if stats is None:
            stats = self.topics[name] = TopicStats()
        return stats

    def records_in(self, topic: str, messages: int, size: int) -> None:
        stats = self.topic(topic)
        stats.messages_in += messages
        stats.bytes_in += size

    def bytes_out(self, topic: str, size: int, replication: bool = False) -> None:
        if replication:
            self.topic(topic).replication_bytes_out += size
        else:
            self.topic(topic).bytes_out += size

    def observe(
        self,
        api_key: int,
        seconds: float,
        failed: bool = False,
        cancelled: bool = False,
        body: object = None,
    ) -> None:
        """One request served in `seconds`; `body`: its answer, whose error codes are counted."""
        stats = self.requests.get(api_key)
        if stats is None:
            stats = self.requests[api_key] = RequestStats()
        stats.count += 1
        stats.seconds += seconds
        stats.buckets[bisect_left(FINE_BUCKETS_S, seconds)] += 1
        if body is not None:
            count_errors(body, stats.error_codes)
        if failed:
            codes = stats.error_codes
            codes[UNKNOWN_SERVER_ERROR] = codes.get(UNKNOWN_SERVER_ERROR, 0) + 1
        if cancelled:
            stats.cancelled += 1

    def forget_topic(self, name: str) -> None:
        """A deleted topic's counters go with it, as Kafka removes its BrokerTopicMetrics."""
        self.topics.pop(name, None)

"""What the broker counts as it serves (Kafka's BrokerTopicStats and RequestMetrics), as plain ints.

The hot path only adds to ints and lists (a dict lookup and an increment per produced batch, per
fetched partition with data, per request); nothing here knows Prometheus. kcompat.server.admin.metrics
turns these into metric families when /metrics is scraped, and is imported only when the admin
listener is on: a broker without it pays the increments and nothing else.

    Produce (handlers/produce.py) --records_in(topic, n, bytes)--> TopicStats.messages_in/bytes_in
    Fetch   (handlers/fetch.py)   --bytes_out(topic, bytes)------> TopicStats.bytes_out (consumers),
                                                                     .replication_bytes_out (followers)
    every request (dispatcher.py) --observe(api_key, seconds)----> RequestStats: count, sum, buckets
"""

from __future__ import annotations

from bisect import bisect_left

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


class TopicStats:
    __slots__ = ("bytes_in", "bytes_out", "messages_in", "replication_bytes_out")

    def __init__(self) -> None:
        self.messages_in = 0
        self.bytes_in = 0
        self.bytes_out = 0  # to consumers; followers' fetches count apart, as Kafka's BytesOutPerSec
        self.replication_bytes_out = 0


class RequestStats:
    """One API's requests: how many, their total time, and a count per latency bucket (+Inf last)."""

    __slots__ = ("buckets", "cancelled", "count", "errors", "seconds")

    def __init__(self) -> None:
        self.count = 0
        self.errors = 0  # requests whose handler failed (the connection was closed)
        self.cancelled = 0  # requests taken whose answer was dropped with their closed connection
        self.seconds = 0.0
        self.buckets = [0] * (len(LATENCY_BUCKETS_S) + 1)


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

    def observe(self, api_key: int, seconds: float, failed: bool = False, cancelled: bool = False) -> None:
        stats = self.requests.get(api_key)
        if stats is None:
            stats = self.requests[api_key] = RequestStats()
        stats.count += 1
        stats.seconds += seconds
        stats.buckets[bisect_left(LATENCY_BUCKETS_S, seconds)] += 1
        if failed:
            stats.errors += 1
        if cancelled:
            stats.cancelled += 1

    def forget_topic(self, name: str) -> None:
        """A deleted topic's counters go with it, as Kafka removes its BrokerTopicMetrics."""
        self.topics.pop(name, None)

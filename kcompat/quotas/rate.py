"""Kafka's windowed rate (metrics.stats.Rate over a SampledStat sum) and the throttle time of a
quota violation (QuotaUtils.throttleTime), with the time passed in.

    samples: quota.window.num windows of quota.window.size.seconds, plus one that may overlap
    rate = sum of the live samples / window size (at least samples-1 full windows, see below)
    throttle = (rate - bound) / bound * window size      (the delay that brings rate down to bound)

A sample expires once its last event is samples x window old. The window size is the time since
the oldest live sample started, counted as at least samples-1 full windows so that a new sensor
does not measure a burst as a huge rate (Rate.windowSize).
"""

from __future__ import annotations

__all__ = ["QuotaWindow", "Rate"]


class QuotaWindow:
    """quota.window.num samples of quota.window.size.seconds each (Kafka's MetricConfig)."""

    __slots__ = ("samples", "window_ms")

    def __init__(self, samples: int = 11, window_ms: int = 1000) -> None:
        self.samples = max(samples, 1)
        self.window_ms = max(window_ms, 1)

    def max_in_window(self, bound: float) -> float:
        """What one record may carry without a certain throttle (getMaxValueInQuotaWindow)."""
        return bound * (self.samples - 1) * self.window_ms / 1000


class _Sample:
    __slots__ = ("last_event_ms", "start_ms", "value")

    def __init__(self, now_ms: int) -> None:
        self.value = 0.0
        self.start_ms = now_ms
        self.last_event_ms = now_ms

    def reset(self, now_ms: int) -> None:
        self.value = 0.0
        self.start_ms = now_ms
        self.last_event_ms = now_ms


class Rate:
    """A sum per second over the quota window; `record` answers the throttle time in ms."""

    __slots__ = ("_current", "_samples", "window")

    def __init__(self, window: QuotaWindow) -> None:
        self.window = window
        self._samples: list[_Sample] = []
        self._current = 0

    def _sample(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        return self._samples[self._current]

    def _purge(self, now_ms: int) -> None:
        expire = self.window.samples * self.window.window_ms
        for s in self._samples:
            if now_ms - s.last_event_ms >= expire:
                s.reset(now_ms)

    def add(self, value: float, now_ms: int) -> None:
        """Record `value` at `now_ms` (negative to take back what was recorded, as Kafka's unrecord)."""
        sample = self._sample(now_ms)
        if now_ms - sample.start_ms >= self.window.window_ms:  # complete: the next one (ring of n+1)
            self._current = (self._current + 1) % (self.window.samples + 1)
            if self._current >= len(self._samples):
                sample = _Sample(now_ms)
                self._samples.append(sample)
            else:
                sample = self._samples[self._current]
                sample.reset(now_ms)
        sample.value += value
        sample.last_event_ms = now_ms

    def window_size_ms(self, now_ms: int) -> int:
        self._purge(now_ms)
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        oldest = min(s.start_ms for s in self._samples)
        elapsed = now_ms - oldest
        full = elapsed // self.window.window_ms
        least = self.window.samples - 1
        if full < least:
            elapsed += (least - full) * self.window.window_ms
        return max(elapsed, 1)

    def measure(self, now_ms: int) -> float:
        """The rate per second at `now_ms`."""
        size = self.window_size_ms(now_ms)  # purges first, as Rate.measure does
        return sum(s.value for s in self._samples) * 1000 / size

    def throttle_ms(self, bound: float, now_ms: int) -> int:
        """0 within `bound`; else the delay that brings the rate back to it (QuotaUtils.throttleTime)."""
        size = self.window_size_ms(now_ms)  # purges first, as Rate.measure does
        value = sum(s.value for s in self._samples) * 1000 / size
        if value <= bound:
            return 0
        return round((value - bound) / bound * size)

    def record(self, value: float, bound: float, now_ms: int) -> int:
        """Add `value` and check the quota (Sensor.record with checkQuotas): the throttle time in ms."""
        self.add(value, now_ms)
        return self.throttle_ms(bound, now_ms)


class TokenBucket:
    """controller_mutation_rate's measure (KIP-599, Kafka's TokenBucket): `quota` tokens a second,
    at most samples x window x quota of them; a mutation takes its partitions' worth, and the
    bucket may go below zero once. Below zero, the throttle is the time it takes to refill."""

    __slots__ = ("_last_ms", "tokens", "window")

    def __init__(self, window: QuotaWindow) -> None:
        self.window = window
        self.tokens = 0.0
        self._last_ms = 0

    def _refill(self, bound: float, now_ms: int) -> None:
        burst = self.window.samples * self.window.window_ms / 1000 * bound
        self.tokens = min(burst, self.tokens + bound * (now_ms - self._last_ms) / 1000)
        self._last_ms = now_ms

    def throttle_ms(self, bound: float, now_ms: int) -> int:
        """0 while tokens are left; else the time to refill to zero (throttleTimeMs)."""
        self._refill(bound, now_ms)
        return 0 if self.tokens >= 0 else round(-self.tokens / bound * 1000)

    def take(self, permits: float, bound: float, now_ms: int) -> None:
        self._refill(bound, now_ms)
        self.tokens -= permits

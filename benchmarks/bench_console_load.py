#!/usr/bin/env python3
"""Produce latency while a browser refreshes the web console, against the same without one.

    python benchmarks/bench_console_load.py [--rounds 3] [--seconds 10] [--rate 2000] [--client browser|http]

One `kcompat serve` with the admin listener; a topic of 3 partitions and a group with lag on it
(so the group page has something to compute). Each round produces --rate records/s (100 bytes,
acks=1, linger.ms=0) for --seconds with confluent-kafka and takes each record's latency from
librdkafka (Message.latency(): produce() to acknowledgement); rounds alternate between no browser
and headless Chromium (Selenium) reloading the group page, the topics page and the topic page in
a loop, as fast as it renders them (the group page also polls its lag table and chart every 2 s);
with --client http, urllib fetches those pages and what they load instead, so that the browser's
own CPU (Chromium on the same 2 cores) is left out and the broker's share is what is measured.
Figures, not a test: printed, nothing asserted.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kcompat.testing import TEST_DEFAULTS, Broker, free_port

TOPIC, GROUP = "load", "load-group"


def _browser() -> Any:
    from selenium import webdriver

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(arg)
    service = webdriver.ChromeService(executable_path=shutil.which("chromedriver") or "chromedriver")
    return webdriver.Chrome(service=service, options=options)


def _refresh(chrome: Any, url: str, stop: threading.Event, pages: list[int]) -> None:
    while not stop.is_set():
        for path in (f"/group?id={GROUP}", "/topics", f"/topic?name={TOPIC}"):
            chrome.get(url + path)
            pages[0] += 1


def _fetch(url: str, stop: threading.Event, pages: list[int], times: list[float]) -> None:
    """The same pages (and what they fetch: fragments, lag history, scripts, /metrics) from a
    plain HTTP client: the broker's share of the load without the browser's own CPU."""
    paths = (f"/group?id={GROUP}", f"/group/lag?id={GROUP}", f"/group/lag.json?id={GROUP}", "/topics",
             f"/topic?name={TOPIC}", f"/topic/messages?name={TOPIC}&partition=0&offset=-20&format=json",
             "/static/uPlot-1.6.32.iife.min.js", "/metrics")  # fmt: skip
    while not stop.is_set():
        for path in paths:
            t0 = time.perf_counter()
            with urllib.request.urlopen(url + path) as resp:
                resp.read()
            times.append(time.perf_counter() - t0)
            pages[0] += 1
        stop.wait(0.1)


def _round(bootstrap: str, seconds: float, rate: int) -> list[float]:
    latencies: list[float] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            latencies.append(msg.latency())

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": 1})
    value = b"x" * 100
    start = time.perf_counter()
    sent = 0
    while (now := time.perf_counter() - start) < seconds:
        due = int(now * rate)
        while sent < due:
            p.produce(TOPIC, value, partition=sent % 3, on_delivery=delivered)
            sent += 1
        p.poll(0.0005)
    p.flush(30)
    return latencies


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rate", type=int, default=2000)
    parser.add_argument(
        "--client",
        choices=("browser", "http"),
        default="browser",
        help="browser: headless Chromium on this machine; http: the same pages from urllib",
    )
    args = parser.parse_args()

    base = Path(tempfile.mkdtemp(prefix="bench-console-"))
    broker = Broker(
        base / "data", base / "log", {**TEST_DEFAULTS, "admin.listener": f"127.0.0.1:{free_port()}"}
    ).start()
    url = broker.admin_url
    assert url is not None
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 3, 1)])[TOPIC].result(30)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": GROUP})
    consumer.commit(offsets=[TopicPartition(TOPIC, p, 0) for p in range(3)], asynchronous=False)
    chrome = _browser() if args.client == "browser" else None
    times: list[float] = []
    results: dict[bool, list[tuple[float, float, float]]] = {False: [], True: []}
    try:
        for r in range(args.rounds):
            for with_browser in (False, True) if r % 2 == 0 else (True, False):
                stop, pages = threading.Event(), [0]
                work = (
                    (_refresh, (chrome, url, stop, pages))
                    if chrome is not None
                    else (_fetch, (url, stop, pages, times))
                )
                t = threading.Thread(target=work[0], args=work[1]) if with_browser else None
                if t is not None:
                    t.start()
                lat = _round(broker.bootstrap, args.seconds, args.rate)
                stop.set()
                if t is not None:
                    t.join()
                row = (_pct(lat, 0.5), _pct(lat, 0.99), statistics.fmean(lat) * 1000)
                results[with_browser].append(row)
                what = (
                    f"{args.client} refreshing ({pages[0] / args.seconds:.1f} pages/s)"
                    if with_browser
                    else "no console"
                )
                print(f"round {r} {what:38} {len(lat):6d} records  p50 {row[0]:6.2f} ms  p99 {row[1]:6.2f} ms",
                      flush=True)  # fmt: skip
    finally:
        if chrome is not None:
            chrome.quit()
        consumer.close()
        broker.stop()
    for with_browser, rows in results.items():
        label = f"{args.client} refreshing" if with_browser else "no console"
        print(f"{label:20} p50 median {statistics.median(r[0] for r in rows):6.2f} ms   "
              f"p99 median {statistics.median(r[1] for r in rows):6.2f} ms   (p99 per round: "
              f"{', '.join(f'{r[1]:.2f}' for r in rows)})")  # fmt: skip
    if times:
        print(
            f"console requests: {len(times)}, round trip p50 {_pct(times, 0.5):.2f} ms, p99 {_pct(times, 0.99):.2f} ms"
        )


if __name__ == "__main__":
    main()

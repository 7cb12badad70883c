"""Clickstream generator: simulated users browsing a shop, one JSON event per click, produced to
`clickstream.clicks` (keyed by user, so each user's clicks stay in order in one partition).

Each user alternates between sessions (a walk through the shop: home, categories, products, cart,
checkout; a few seconds to two minutes between clicks) and idle spells of more than five minutes,
so the streaming job's 5-minute session windows find the sessions the users really had.

    python spark_examples/clickstream/generate.py                  # ~100000 clicks of the last ~17 minutes, flat out
    python spark_examples/clickstream/generate.py --live --rate 200  # about 200 clicks/s in real time, until Ctrl-C
"""

from __future__ import annotations

import argparse
import heapq
import json
import random
import signal
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import CLICKS, SESSION_GAP_S, add_bootstrap_arg

CATEGORIES = ("shoes", "shirts", "bags", "watches", "hats")
DEVICES = (("mobile", 0.6), ("desktop", 0.32), ("tablet", 0.08))
COUNTRIES = (("FR", 0.3), ("DE", 0.25), ("GB", 0.2), ("US", 0.15), ("ES", 0.1))
EXTERNAL = (("search", 0.5), ("direct", 0.25), ("social", 0.15), ("email", 0.1))
MEAN_THINK_S = 12.0
MAX_THINK_S = 120.0  # well under the session gap, so a session never splits by accident
MEAN_IDLE_S = 600.0


def pick(rng: random.Random, weighted: tuple[tuple[str, float], ...]) -> str:
    return rng.choices([v for v, _ in weighted], [w for _, w in weighted])[0]


def next_page(rng: random.Random, page: str | None) -> str | None:
    """A click's successor, or None when the visitor leaves."""
    if page is None:
        return rng.choices(
            ["/", f"/c/{rng.choice(CATEGORIES)}", f"/p/{rng.randrange(200)}"], [0.6, 0.25, 0.15]
        )[0]
    if page == "/checkout/complete":
        return None
    if page == "/checkout":
        return rng.choices(["/checkout/complete", "/cart", None], [0.7, 0.1, 0.2])[0]
    if page == "/cart":
        return rng.choices(["/checkout", f"/c/{rng.choice(CATEGORIES)}", None], [0.45, 0.3, 0.25])[0]
    if page.startswith("/p/"):
        return rng.choices(
            ["/cart", f"/p/{rng.randrange(200)}", f"/c/{rng.choice(CATEGORIES)}", None],
            [0.25, 0.35, 0.2, 0.2],
        )[0]
    if page.startswith("/c/"):
        return rng.choices(
            [f"/p/{rng.randrange(200)}", f"/c/{rng.choice(CATEGORIES)}", None], [0.65, 0.15, 0.2]
        )[0]
    return rng.choices([f"/c/{rng.choice(CATEGORIES)}", "/search", None], [0.6, 0.2, 0.2])[
        0
    ]  # "/" and "/search"


@dataclass(order=True)
class User:
    next_at: float  # event time (s) of this user's next click
    user_id: str = field(compare=False)
    device: str = field(compare=False)
    country: str = field(compare=False)
    page: str | None = field(default=None, compare=False)  # None: between sessions


def clicks(rng: random.Random, users: int, start: float) -> Iterator[tuple[float, dict[str, object]]]:
    """Clicks in event-time order, forever: (event time in s, event)."""
    heap = [
        User(start + rng.uniform(0, MEAN_IDLE_S), f"user-{i:05d}", pick(rng, DEVICES), pick(rng, COUNTRIES))
        for i in range(users)
    ]
    heapq.heapify(heap)
    while True:
        user = heapq.heappop(heap)
        page = next_page(rng, user.page)
        if page is None:  # leaves: idle for longer than the session gap
            user.page = None
            user.next_at += SESSION_GAP_S + 30 + rng.expovariate(1 / MEAN_IDLE_S)
            heapq.heappush(heap, user)
            continue
        referrer = user.page if user.page is not None else pick(rng, EXTERNAL)
        yield (
            user.next_at,
            {
                "event_id": uuid.UUID(int=rng.getrandbits(128)).hex,
                "user_id": user.user_id,
                "page": page,
                "referrer": referrer,
                "device": user.device,
                "country": user.country,
                "ts": int(user.next_at * 1000),
            },
        )
        user.page = page
        user.next_at += min(rng.expovariate(1 / MEAN_THINK_S), MAX_THINK_S) + 0.5
        heapq.heappush(heap, user)


def users_for(rate: float) -> int:
    """How many simulated users make about `rate` clicks per second: a visit is about 4 clicks
    12.5 s apart, then the user is away for about 15.5 minutes (measured from this model)."""
    clicks_per_visit, think_s = 4.1, MEAN_THINK_S + 0.5
    per_user = clicks_per_visit / (clicks_per_visit * think_s + SESSION_GAP_S + 30 + MEAN_IDLE_S)
    return max(1, round(rate / per_user))


def main() -> None:
    args = _parse_args()

    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    _ensure_topic(
        AdminClient({"bootstrap.servers": args.bootstrap}),
        NewTopic(args.topic, num_partitions=args.partitions),
    )
    producer = Producer(
        {
            "bootstrap.servers": args.bootstrap,
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "compression.type": "lz4",
            "enable.idempotence": True,
        }
    )
    failures: list[str] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            failures.append(str(err))

    rng = random.Random(args.seed)
    users = users_for(args.rate)
    now = time.time()
    source, end = _source(rng, users, now, args)

    stop = False

    def on_sigint(_sig: int, _frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGINT, on_sigint)
    sent = 0
    began = time.monotonic()
    last_report = began
    for at, click in source:
        if stop or at >= end or (not args.live and sent >= args.events):
            break
        if args.live:
            while (delay := at - time.time()) > 0 and not stop:
                producer.poll(min(delay, 0.2))
        _send(producer, args.topic, click, on_delivery)
        sent += 1
        producer.poll(0)
        t = time.monotonic()
        if t - last_report >= 5:
            print(f"{sent} clicks produced ({sent / (t - began):.0f}/s)", flush=True)
            last_report = t
    left = producer.flush(60)
    elapsed = time.monotonic() - began
    if failures or left:
        raise SystemExit(f"{len(failures)} clicks failed ({failures[:3]}), {left} unacknowledged")
    print(
        f"produced {sent} clicks of {users} users to {args.topic} in {elapsed:.1f}s ({sent / elapsed:.0f} clicks/s)"
    )


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_bootstrap_arg(parser)
    parser.add_argument("--topic", default=CLICKS)
    parser.add_argument(
        "--events",
        type=int,
        default=100_000,
        help="clicks to produce: about this many, ending now (default 100000; ignored with --live)",
    )
    parser.add_argument(
        "--rate",
        type=float,
        default=100.0,
        help="clicks per second of traffic the simulated users make (default 100)",
    )
    parser.add_argument("--live", action="store_true", help="produce in real time, until Ctrl-C")
    parser.add_argument(
        "--partitions", type=int, default=4, help="partitions of the topic if it is created (default 4)"
    )
    parser.add_argument("--seed", type=int, default=None)
    return parser.parse_args()


def _ensure_topic(admin: Any, topic: Any) -> None:
    """Create the topic unless it exists."""
    for future in admin.create_topics([topic]).values():
        try:
            future.result(timeout=30)
        except Exception as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise


def _source(
    rng: random.Random, users: int, now: float, args: argparse.Namespace
) -> tuple[Iterator[tuple[float, dict[str, object]]], float]:
    """The clicks to produce and the event time to stop at."""
    if args.live:
        return clicks(rng, users, now), float("inf")
    # Simulated traffic of the last events/rate seconds, up to now (never in the future, or a
    # live run afterwards would find the watermark ahead of its clicks).
    span = args.events / args.rate
    source = clicks(rng, users, now - span - MEAN_IDLE_S)
    for at, _ in source:  # skip the warm-up, while the users arrive
        if at >= now - span:
            break
    return source, now


def _send(producer: Any, topic: str, click: dict[str, object], on_delivery: Any) -> None:
    while True:
        try:
            producer.produce(
                topic,
                json.dumps(click).encode(),
                key=str(click["user_id"]).encode(),
                timestamp=int(click["ts"]),
                on_delivery=on_delivery,
            )
            return
        except BufferError:  # local queue full: let librdkafka send some
            producer.poll(0.05)


if __name__ == "__main__":
    main()

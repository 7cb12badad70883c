#!/usr/bin/env python3
"""The broker's CPU per small Produce request, under load from many connections: a `kcompat serve`
process, the Go load of benchmarks/loadgen (each request one batch of `--records` 1 KiB records,
acks=1, `--in-flight` pipelined per connection), and the broker's user + system CPU from
/proc/<pid>/stat over the run, divided by the requests answered. CPU time, not wall time: the
figure holds on a machine other work loads too (the load's own CPU is reported apart).

    python -m benchmarks.request_cost [--conns 16] [--requests 40000] [--rounds 3]
                                      [--profile out.svg | --dump out.txt] [--source DIR]

`--profile` records the broker with py-spy for the last round (`--native` frames, a flame graph);
`--dump` writes py-spy's raw samples as text (collapsed stacks) for stage-by-stage sums.
Figures, not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from benchmarks import wire_load
from benchmarks.brokers import KcompatBroker

TOPIC = "small"
TICKS = os.sysconf("SC_CLK_TCK")


def user_system(pid: int) -> tuple[float, float]:
    """The process's user and system CPU seconds so far (every thread)."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return int(fields[11]) / TICKS, int(fields[12]) / TICKS


def one_round(broker: KcompatBroker, args: argparse.Namespace, profile: list[str] | None) -> str:
    count = args.requests * args.records
    spy = None
    if profile is not None:
        spy = subprocess.Popen(
            ["py-spy", "record", "--native", "-r", "200", "-p", str(broker.pid), *profile],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(1.0)  # py-spy attaches
    user0, sys0 = user_system(broker.pid)
    run = wire_load.produce(
        broker.bootstrap, TOPIC, count, 1024, conns=args.conns, in_flight=args.in_flight,
        batch_records=args.records,
    )  # fmt: skip
    user1, sys1 = user_system(broker.pid)
    user, system = user1 - user0, sys1 - sys0
    cpu = user + system
    if spy is not None:
        spy.send_signal(2)  # SIGINT: py-spy writes its output and exits
        spy.wait(60)
    requests = run.records // args.records
    return (
        f"{requests} requests in {run.seconds:.2f} s: {requests / run.seconds:,.0f} req/s, "
        f"broker CPU {cpu:.2f} s = {cpu / requests * 1e6:.1f} us/request "
        f"(user {user / requests * 1e6:.1f}, system {system / requests * 1e6:.1f}) "
        f"(load {run.cpu_s / requests * 1e6:.1f} us/request)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conns", type=int, default=16, help="connections (one partition each)")
    parser.add_argument("--requests", type=int, default=40000, help="Produce requests per round")
    parser.add_argument("--records", type=int, default=16, help="1 KiB records per batch (request)")
    parser.add_argument("--in-flight", type=int, default=1, help="unanswered requests per connection")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", help="py-spy flame graph (svg) of the last round")
    parser.add_argument("--dump", help="py-spy collapsed stacks (text) of the last round")
    parser.add_argument("--source", help="serve the kcompat package found in this directory instead")
    args = parser.parse_args()
    if args.source:  # the broker process inherits it; this one has imported what it needs
        os.environ["PYTHONPATH"] = str(Path(args.source).resolve())
    if (args.profile or args.dump) and shutil.which("py-spy") is None:
        sys.exit("py-spy is not on PATH")
    with tempfile.TemporaryDirectory() as tmp:
        broker = KcompatBroker(Path(tmp) / "kcompat")
        broker.start()
        try:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            admin.create_topics([NewTopic(TOPIC, args.conns, 1)])[TOPIC].result(30)
            for r in range(args.rounds):
                profile = None
                if r == args.rounds - 1 and args.profile:
                    profile = ["-o", args.profile]
                elif r == args.rounds - 1 and args.dump:
                    profile = ["-f", "raw", "-o", args.dump]
                print(f"round {r + 1}: {one_round(broker, args, profile)}", flush=True)
        finally:
            broker.stop()


if __name__ == "__main__":
    main()

"""`kcompat dev-cluster --brokers N`: a local KRaft cluster for development and tests.

One Apache Kafka 4.3 controller (process.roles=controller, from the jars under $KAFKA_HOME/libs or
the project's .deps/kafka) and N `kcompat serve` brokers in cluster mode, node ids 1..N, on
127.0.0.1 with free ports; the bootstrap servers go to stdout, then it waits. Ctrl-C or SIGTERM
stops the brokers (each a controlled shutdown) and then the controller, leaving nothing running.
The files (configs, logs, data) are in --dir, or a temporary directory removed at exit.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
import threading
from pathlib import Path
from types import FrameType


def register(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = commands.add_parser(
        "dev-cluster",
        help="start a local cluster: one Kafka controller and N kcompat brokers",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    p.add_argument("--brokers", type=int, default=3, help="how many kcompat brokers (default 3)")
    p.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="where to keep configs, logs and data (default: a temporary dir)",
    )
    p.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="key=value",
        help="a broker property for every broker (repeatable)",
    )


def run(args: argparse.Namespace) -> int:
    from kcompat.testing_cluster import ControllerQuorum, ControllerStartError, DevCluster, kafka_jars

    if args.brokers < 1:
        print("kcompat dev-cluster: --brokers must be at least 1", file=sys.stderr)
        return 1
    why_not = ControllerQuorum.available(kafka_jars())
    if why_not is not None:
        print(
            f"kcompat dev-cluster: cannot run a Kafka controller: {why_not} (or set KAFKA_HOME)",
            file=sys.stderr,
        )
        return 1
    overrides = {}
    for item in args.override:
        key, sep, value = item.partition("=")
        if not sep:
            print(f"kcompat dev-cluster: --override {item!r} is not key=value", file=sys.stderr)
            return 1
        overrides[key.strip()] = value.strip()
    workdir = args.dir or Path(tempfile.mkdtemp(prefix="kcompat-dev-cluster-"))
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    cluster = DevCluster(workdir, brokers=args.brokers, overrides=overrides)
    try:
        try:
            cluster.start()
        except ControllerStartError as e:
            print(f"kcompat dev-cluster: {e}", file=sys.stderr)
            return 1
        print(
            f"controller: {cluster.quorum.bootstrap_servers}  (cluster id {cluster.quorum.cluster_id})",
            flush=True,
        )
        print(f"bootstrap servers: {cluster.bootstrap_servers}", flush=True)
        if cluster.console_urls:
            print(f"consoles and /metrics: {' '.join(cluster.console_urls)}", flush=True)
        print(f"processes: {' '.join(str(pid) for pid in cluster.pids)}", flush=True)
        print(f"logs and data in {workdir}; Ctrl-C stops everything", flush=True)
        stop.wait()
        print("stopping the cluster", flush=True)
        return 0
    finally:
        cluster.stop()
        for s, handler in previous.items():
            signal.signal(s, handler)
        if args.dir is None:
            shutil.rmtree(workdir, ignore_errors=True)

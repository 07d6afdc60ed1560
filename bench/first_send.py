"""The first acks=all send to a topic created a moment earlier (RF 3), against later ones.

    python3 bench/first_send.py [--topics 10]

Starts a ZooKeeper (pyspark's jars) and three ``minibroker broker`` processes with
``dev up``'s replication settings (``replica.fetch.backoff.ms`` 1000, Kafka's default),
then, per topic: CreateTopics (1 partition, RF 3) through the bundled Admin, and at once
a Producer(acks="all") that sends one record and waits for its acknowledgement, then a
second. The first send waits for every follower's first fetch: a follower that asked a
leader before the leader had applied its LeaderAndIsr used to wait out the whole
back-off (about 1 s). Prints the load average before and after, and one JSON object on
its last line: first and second send latencies in ms (median, max, every one).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from minibroker import Admin, Producer
from minibroker.zk.client import open_zk_client
from minibroker.zk.server import ZooKeeperServer
from tests.support.cluster import ProcessCluster

PROPERTIES = {"replica.fetch.backoff.ms": 1000, "replica.fetch.wait.max.ms": 500}
"""What `dev up` brokers run with (ProcessCluster's fault-drill defaults are shorter)."""


async def first_and_second_send(bootstrap: str, topic: str) -> tuple[float, float]:
    async with Admin(bootstrap) as admin:
        await admin.create_topic(topic, partitions=1, replication_factor=3)
    async with Producer(bootstrap, acks="all", linger_ms=0) as producer:
        started = time.perf_counter()
        await producer.send(topic, b"first")
        first = time.perf_counter()
        await producer.send(topic, b"second")
        second = time.perf_counter()
    return (first - started) * 1000, (second - first) * 1000


async def main(args: argparse.Namespace) -> dict[str, Any]:
    print(f"load average before: {os.getloadavg()}", flush=True)
    firsts, seconds = [], []
    with tempfile.TemporaryDirectory() as tmp, ZooKeeperServer(Path(tmp) / "zk") as zk:
        async with open_zk_client(zk.connect_string, session_timeout=30) as client:
            await client.ensure_path("/bench")
        cluster = ProcessCluster(
            Path(tmp), zk.connect_string + "/bench", size=3, properties=PROPERTIES
        )
        try:
            await cluster.start_all()
            bootstrap = ",".join(f"127.0.0.1:{cluster.address(i)[1]}" for i in (1, 2, 3))
            for n in range(args.topics):
                first, second = await first_and_second_send(bootstrap, f"fresh-{n}")
                firsts.append(round(first, 1))
                seconds.append(round(second, 1))
        finally:
            cluster.close()
    print(f"load average after: {os.getloadavg()}", flush=True)
    return {
        "topics": args.topics,
        "first_send_ms_median": statistics.median(firsts),
        "first_send_ms_max": max(firsts),
        "second_send_ms_median": statistics.median(seconds),
        "first_send_ms": firsts,
        "second_send_ms": seconds,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=10, help="fresh topics to time")
    print(json.dumps(trio.run(main, parser.parse_args())))

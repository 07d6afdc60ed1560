"""bench/vs_kafka.py's consumer group step alone: a group of three beside Apache Kafka.

    python bench/vs_kafka_group.py [--rounds 3] [--records 300000]

One broker of each system (the same settings as bench/vs_kafka.py, Kafka's shipped
``group.initial.rebalance.delay.ms`` 0 for both), one at a time on the same ports and
ZooKeeper, the one that goes first alternating from round to round. Each gets a topic of
6 partitions filled with ``--records`` 1 KiB records, a committed offset of another
group first (so ``__consumer_offsets`` exists, as after vs_kafka.py's earlier
workloads), then three confluent-kafka consumers, each a process, subscribe at once
and read it all (``group_consume``): MB/s from the subscribe, and seconds until the last
member had its assignment. One JSON line per run, then the medians, ranges and
minibroker/Kafka ratios as one JSON object on the last line.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import confluent_kafka

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.side_by_side.brokers import Brokers, KafkaBrokers, MinibrokerBrokers
from bench.side_by_side.report import SYSTEMS
from bench.side_by_side.workloads import create_topic, group_consume, produce_spread
from bench.vs_kafka import GROUP_MEMBERS, GROUP_PARTITIONS, KIB, free_port_range, kafka_jars
from minibroker.zk.server import ZooKeeperServer

COMMIT_TRIES = 60
COMMIT_RETRY_S = 0.5  # the coordinator is being made: nothing to wait on from a client


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--records", type=int, default=300_000)
    return p.parse_args()


def offsets_topic_made(bootstrap: str) -> None:
    """Commit one offset of another group, retried while the coordinator is not there."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "warm"})
    try:
        for _ in range(COMMIT_TRIES):
            try:
                offset = confluent_kafka.TopicPartition("group", 0, 0)
                consumer.commit(offsets=[offset], asynchronous=False)
                return
            except confluent_kafka.KafkaException:
                time.sleep(COMMIT_RETRY_S)
        raise RuntimeError("no group coordinator")
    finally:
        consumer.close()


def main() -> None:
    args = parse_args()
    base_port = free_port_range()
    runs: list[dict[str, object]] = []
    with (
        tempfile.TemporaryDirectory(prefix="vs-kafka-group-") as tmp,
        ZooKeeperServer(Path(tmp) / "zookeeper", force_sync=False) as zookeeper,
    ):
        classpath = kafka_jars()
        for round_number in range(args.rounds):
            order = SYSTEMS if round_number % 2 == 0 else SYSTEMS[::-1]
            for system in order:
                root = Path(tmp) / f"{system}-{round_number}"
                chroot = f"{zookeeper.connect_string}/{system}-{round_number}"
                brokers: Brokers = (
                    KafkaBrokers(root, chroot, base_port, 1, classpath=classpath)
                    if system == "kafka"
                    else MinibrokerBrokers(root, chroot, base_port, 1)
                )
                try:
                    brokers.start_all()
                    create_topic(brokers.bootstrap, "group", partitions=GROUP_PARTITIONS)
                    produce_spread(brokers.bootstrap, "group", args.records, KIB, GROUP_PARTITIONS)
                    offsets_topic_made(brokers.bootstrap)
                    load = os.getloadavg()[0]
                    found = group_consume(brokers.bootstrap, "group", args.records, GROUP_MEMBERS)
                finally:
                    brokers.stop()
                    shutil.rmtree(root, ignore_errors=True)
                run = {
                    "round": round_number,
                    "system": system,
                    **{k: round(v, 3) for k, v in found.items()},
                    "load_before": round(load, 2),
                    "load_after": round(os.getloadavg()[0], 2),
                }
                print(json.dumps(run), flush=True)
                runs.append(run)
    summary: dict[str, dict[str, object]] = {}
    for figure in ("mb_per_s", "settled_s"):
        values = {s: [float(str(r[figure])) for r in runs if r["system"] == s] for s in SYSTEMS}
        medians = {s: statistics.median(v) for s, v in values.items() if v}
        if len(medians) == len(SYSTEMS):
            summary[figure] = {
                **{s: round(m, 3) for s, m in medians.items()},
                "ratio": round(medians["minibroker"] / medians["kafka"], 3),
                "range": {s: [min(v), max(v)] for s, v in values.items()},
            }
    print(json.dumps({"summary": summary}))


if __name__ == "__main__":
    main()

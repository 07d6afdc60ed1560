"""Shared by the log-compaction tests against broker processes: a compacted topic,
writing rounds of keyed values, reading a partition back whole."""

from __future__ import annotations

from pathlib import Path

import trio

from minibroker.client.consumer import Consumer
from minibroker.client.producer import Producer
from minibroker.protocol.records import ConsumerRecord
from tests.support.cluster import ProcessCluster

TOPIC = "table"
COMPACTED = {
    "cleanup.policy": "compact",
    "segment.bytes": "4096",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "3600000",
}
"""Small segments so a few hundred records make many; any dirt is worth a cleaning."""
CLEANER = {"log.cleaner.backoff.ms": 100}


def bootstrap(cluster: ProcessCluster) -> str:
    return ",".join(f"127.0.0.1:{cluster.brokers[i].port}" for i in cluster.live)


def value(key: int, round_: int) -> bytes:
    return b"k%d-round-%d-" % (key, round_) + b"x" * 40


async def write_rounds(
    cluster: ProcessCluster, rounds: range, keys: int
) -> dict[bytes, tuple[int, bytes | None]]:
    """Every key gets a value per round; returns per key its last (offset, value)."""
    latest: dict[bytes, tuple[int, bytes | None]] = {}
    async with Producer(bootstrap(cluster), acks="all", linger_ms=1) as producer:
        for r in rounds:
            for k in range(keys):
                key = b"k%d" % k
                meta = await producer.send(TOPIC, value(k, r), key=key, partition=0)
                latest[key] = (meta.offset, value(k, r))
    return latest


async def read_all(cluster: ProcessCluster, end_offset: int) -> list[ConsumerRecord]:
    """Every record of partition 0 from the beginning up to ``end_offset`` (exclusive)."""
    out: list[ConsumerRecord] = []
    async with Consumer(bootstrap(cluster), auto_offset_reset="earliest") as consumer:
        consumer.assign([(TOPIC, 0)])
        with trio.fail_after(60):
            while not out or out[-1].offset < end_offset - 1:
                out += await consumer.poll(timeout_ms=1000, max_records=10_000)
    return out


def partition_dir(cluster: ProcessCluster, broker_id: int = 1) -> Path:
    return cluster.root / f"broker-{broker_id}" / "logs" / f"{TOPIC}-0"

"""Idempotent produce on a real 3-broker cluster: InitProducerId and deduplication.

The test plays a producer whose answers get lost: it sends the very same batch bytes
twice (the retry of a Produce whose response never came), before and after the
partition's leader is killed, and checks that every record is in the log once, at the
offset the first answer named.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import OutOfOrderSequenceNumberError
from minibroker.protocol.records import Record, encode_batch
from tests.support.broker import fetch_body, fetched, produce_body, produced, values_of
from tests.support.cluster import ProcessCluster

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]

TOPIC = "idem"


def producer_batch(producer_id: int, sequence: int, *values: bytes) -> bytes:
    records = [Record(v, timestamp=1_000) for v in values]
    return encode_batch(records, producer_id=producer_id, producer_epoch=0, base_sequence=sequence)


async def leader_of(cluster: ProcessCluster, *, other_than: int = -1) -> int:
    found: list[int] = []

    async def elected() -> bool:
        metadata = await cluster.metadata(TOPIC)
        leader: int = metadata["partitions"][0]["leader_id"]
        if leader < 0 or leader == other_than or leader not in cluster.live:
            return False
        found.append(leader)
        return True

    await cluster.wait_until(elected, "a leader for the partition", timeout=60)
    return found[-1]


async def produce(cluster: ProcessCluster, broker_id: int, records: bytes) -> dict[str, Any]:
    response = await cluster.request(broker_id, ApiKey.PRODUCE, produce_body(TOPIC, 0, records, -1))
    return produced(response)


async def init_producer_id(cluster: ProcessCluster, broker_id: int) -> dict[str, Any]:
    body = {"transactional_id": None, "producer_id": -1, "producer_epoch": -1}
    answer: dict[str, Any] = await cluster.request(broker_id, ApiKey.INIT_PRODUCER_ID, body)
    return answer


async def test_a_batch_sent_twice_is_written_once_even_across_a_leader_kill(
    tmp_path: Path, zk_connect: str
) -> None:
    cluster = ProcessCluster(tmp_path, zk_connect, size=3, properties={"min.insync.replicas": 2})
    try:
        await cluster.start_all()
        await cluster.create_topic(TOPIC, 1, 3)
        leader = await leader_of(cluster)

        # Two brokers never hand out the same producer id (ZooKeeper blocks).
        ids = [await init_producer_id(cluster, broker_id) for broker_id in (1, 2, 3, 1)]
        assert all((a["error_code"], a["producer_epoch"]) == (0, 0) for a in ids)
        assert len({a["producer_id"] for a in ids}) == 4
        producer_id = ids[0]["producer_id"]

        first = producer_batch(producer_id, 0, b"a", b"b")
        assert (await produce(cluster, leader, first))["base_offset"] == 0
        again = await produce(cluster, leader, first)  # the answer was "lost": resent
        assert (again["error_code"], again["base_offset"]) == (0, 0)
        second = producer_batch(producer_id, 2, b"c")
        assert (await produce(cluster, leader, second))["base_offset"] == 2

        # The leader dies; the producer retries its last batch on the new leader, which
        # learnt the producer's batches as a follower.
        cluster.kill(leader)
        successor = await leader_of(cluster, other_than=leader)
        with trio.fail_after(60):
            while True:
                retried = await produce(cluster, successor, second)
                if retried["error_code"] == 0:
                    break
                await trio.sleep(0.2)  # e.g. NOT_ENOUGH_REPLICAS until the ISR shrinks
        assert retried["base_offset"] == 2
        gap = await produce(cluster, successor, producer_batch(producer_id, 9, b"x"))
        assert gap["error_code"] == OutOfOrderSequenceNumberError.code
        third = await produce(cluster, successor, producer_batch(producer_id, 3, b"d"))
        assert (third["error_code"], third["base_offset"]) == (0, 3)

        response = await cluster.request(successor, ApiKey.FETCH, fetch_body(TOPIC, {0: 0}))
        assert values_of(fetched(response)) == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")]
    finally:
        cluster.close()

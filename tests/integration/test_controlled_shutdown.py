"""Controlled shutdown when nobody can take over: a broker stops without retrying.

Brokers 2 and 3 hold a partition; 3 stops first and hands its leadership to 2. When 2
stops, the partition's only other replica is gone, so the controller cannot move its
leadership however often 2 asks: 2 asks once and stops, instead of retrying
``controlled.shutdown.max.retries`` times (15 s with Kafka's defaults, which this test
keeps). A broker that could still hand over keeps its normal, successful shutdown.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from tests.support.cluster import ProcessCluster

pytestmark = pytest.mark.timeout(120)

TOPIC = "handover"
KAFKA_DEFAULT_BACKOFF_MS = 5000


@pytest.fixture
async def cluster(tmp_path: Path, zk_connect: str) -> AsyncIterator[ProcessCluster]:
    properties = {"controlled.shutdown.retry.backoff.ms": KAFKA_DEFAULT_BACKOFF_MS}
    async with ProcessCluster(tmp_path, zk_connect, size=3, properties=properties) as cluster:
        yield cluster


async def test_a_broker_whose_partners_are_gone_stops_after_one_attempt(
    cluster: ProcessCluster,
) -> None:
    await cluster.create_topic(TOPIC, 1, 2, assignment={0: [3, 2]})

    async def in_sync() -> bool:
        partition = (await cluster.metadata(TOPIC))["partitions"][0]
        return sorted(partition["isr_nodes"]) == [2, 3] and partition["leader_id"] == 3

    await cluster.wait_until(in_sync, "both replicas in sync, 3 leading")

    assert await cluster.terminate(3) == 0
    assert "controlled shutdown of broker 3 succeeded" in cluster.output(3)

    async def led_by_2() -> bool:
        return bool((await cluster.metadata(TOPIC))["partitions"][0]["leader_id"] == 2)

    await cluster.wait_until(led_by_2, "leadership moved to broker 2")

    with trio.fail_after(KAFKA_DEFAULT_BACKOFF_MS / 1000):  # less than one retry's wait
        assert await cluster.terminate(2) == 0
    output = cluster.output(2)
    assert output.count("controlled shutdown: broker still leads") == 1, output
    assert "no other replica is alive to take leadership" in output

"""Producer id blocks through ZooKeeper: Kafka's znode, never the same id twice."""

from __future__ import annotations

import json

import pytest
import trio

from minibroker.zk.client import ZkClient, open_zk_client
from minibroker.zk.data import KafkaZkClient
from minibroker.zk.values import ProducerIdBlock

pytestmark = pytest.mark.timeout(60)


async def test_the_first_block_starts_at_zero_in_kafkas_json(zk_client: ZkClient) -> None:
    block = await KafkaZkClient(zk_client).allocate_producer_id_block(3, 1000)
    assert block == ProducerIdBlock(3, 0, 999)
    data, _ = await zk_client.get("/latest_producer_id_block")
    assert json.loads(data) == {
        "version": 1,
        "broker": 3,
        "block_start": "0",
        "block_end": "999",
    }


async def test_brokers_racing_for_blocks_get_disjoint_ones(
    zk_client: ZkClient, zk_connect: str
) -> None:
    blocks: list[ProducerIdBlock] = []
    async with open_zk_client(zk_connect) as other:
        clients = [KafkaZkClient(zk_client), KafkaZkClient(other)]

        async def reserve(client: KafkaZkClient, broker_id: int) -> None:
            for _ in range(5):
                blocks.append(await client.allocate_producer_id_block(broker_id, 1000))

        async with trio.open_nursery() as nursery:
            for broker_id, client in enumerate(clients, start=1):
                nursery.start_soon(reserve, client, broker_id)
    starts = sorted(block.start for block in blocks)
    assert starts == [i * 1000 for i in range(10)]
    assert all(block.end == block.start + 999 for block in blocks)

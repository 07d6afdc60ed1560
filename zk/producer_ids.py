"""/latest_producer_id_block: blocks of idempotent producer ids, one broker's at a time.

Each broker hands out producer ids from a block it reserved here (Kafka's
ZkProducerIdManager), so two brokers never give the same id: a block is taken with a
conditional set on the znode's version, and a broker that loses the race takes the
next one.
"""

from __future__ import annotations

import contextlib

from minibroker.zk.client import BadVersion, NodeExists, NoNode
from minibroker.zk.model import (
    PRODUCER_ID_BLOCK_PATH,
    decode_producer_id_block,
    encode_producer_id_block,
)
from minibroker.zk.values import ProducerIdBlock
from minibroker.zk.znodes import ZnodeAccess


class ProducerIdZnodes(ZnodeAccess):
    async def allocate_producer_id_block(self, broker_id: int, size: int) -> ProducerIdBlock:
        """Reserve the next ``size`` producer ids for ``broker_id``: read the latest
        block, write the one after it if nobody wrote meanwhile, else try again."""
        while True:
            try:
                data, stat = await self.zk.get(PRODUCER_ID_BLOCK_PATH)
            except NoNode:
                with contextlib.suppress(NodeExists):
                    await self.zk.create(PRODUCER_ID_BLOCK_PATH, b"")
                continue
            latest = decode_producer_id_block(data)
            start = 0 if latest is None else latest.end + 1
            block = ProducerIdBlock(broker_id, start, start + size - 1)
            try:
                await self.zk.set(
                    PRODUCER_ID_BLOCK_PATH, encode_producer_id_block(block), version=stat.version
                )
            except BadVersion:
                continue  # another broker took this block first: take the next one
            return block

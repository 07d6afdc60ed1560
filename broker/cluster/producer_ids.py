"""InitProducerId: producer ids for idempotent producers, unique across the cluster.

How this works. Ids are handed out from a block of ``PRODUCER_ID_BLOCK_SIZE``
consecutive ids this broker reserved; when the block runs out the next one is reserved
(only one reservation at a time; requests arriving meanwhile wait for it):

- in a cluster, through ZooKeeper as Kafka does (``/latest_producer_id_block``, a
  conditional set on the znode version, see ``KafkaZkClient.allocate_producer_id_block``),
  so two brokers never hand out the same id;
- a standalone broker has no peer to collide with, only its own past: it keeps the end
  of its last block in ``producer-id-block`` in every log dir (written and fsynced
  *before* any id of the block is handed out) and continues after the largest end it
  finds. A persisted counter rather than a random start: uniqueness is certain, not
  probable, and the file lives with the logs whose producer state it protects (wipe
  the dirs and no state remains that an old id could match).

Epochs: a request naming its current id and epoch (KIP-360) gets the same id with the
epoch + 1, so the producer's old epoch is fenced on every partition; at epoch 32767 it
gets a fresh id at epoch 0. Transactions (a ``transactional_id``) are not served.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import trio

from minibroker.broker.requests.dispatcher import Answer, Deferred, RequestDispatcher
from minibroker.protocol.api import RequestHeader
from minibroker.protocol.errors import (
    NONE,
    CoordinatorNotAvailableError,
    InvalidRequestError,
    KafkaError,
)
from minibroker.protocol.messages import bodies
from minibroker.storage.checkpoint import write_atomically
from minibroker.zk.data import KafkaZkClient
from minibroker.zk.values import ProducerIdBlock

log = logging.getLogger(__name__)

PRODUCER_ID_BLOCK_SIZE = 1000
"""Kafka's block size: one ZooKeeper write per thousand producers."""
MAX_EPOCH = 32767
"""Epochs are int16; past this a producer gets a new id instead."""
LOCAL_BLOCK_FILE = "producer-id-block"


class BlockSource(Protocol):
    async def allocate_producer_id_block(self, broker_id: int, size: int) -> ProducerIdBlock: ...


class LocalBlocks:
    """Blocks for a standalone broker, persisted in its log dirs (see the module doc)."""

    def __init__(self, log_dirs: Sequence[Path]) -> None:
        self.log_dirs = list(log_dirs)

    def _latest_end(self) -> int:
        latest = -1
        for directory in self.log_dirs:
            try:
                latest = max(latest, int((directory / LOCAL_BLOCK_FILE).read_text().strip()))
            except (OSError, ValueError):
                continue  # missing or unreadable: the other dirs still count
        return latest

    async def allocate_producer_id_block(self, broker_id: int, size: int) -> ProducerIdBlock:
        def reserve() -> ProducerIdBlock:
            start = self._latest_end() + 1
            block = ProducerIdBlock(broker_id, start, start + size - 1)
            written = 0
            for directory in self.log_dirs:
                try:
                    write_atomically(directory / LOCAL_BLOCK_FILE, f"{block.end}\n".encode())
                    written += 1
                except OSError as exc:
                    log.warning("cannot record producer id block in %s: %r", directory, exc)
            if not written:
                raise CoordinatorNotAvailableError("no log dir can record a producer id block")
            return block

        return await trio.to_thread.run_sync(reserve)


class ProducerIdManager:
    """Hands out producer ids from reserved blocks."""

    def __init__(
        self,
        broker_id: int,
        blocks: BlockSource,
        *,
        block_size: int = PRODUCER_ID_BLOCK_SIZE,
    ) -> None:
        self.broker_id = broker_id
        self._blocks = blocks
        self.block_size = block_size
        self._next = 0
        self._end = -1  # no block yet
        self._lock = trio.Lock()

    async def next_id(self) -> int:
        async with self._lock:
            if self._next > self._end:
                try:
                    block = await self._blocks.allocate_producer_id_block(
                        self.broker_id, self.block_size
                    )
                except KafkaError:
                    raise
                except Exception as exc:  # ZooKeeper down or slow: the client retries
                    raise CoordinatorNotAvailableError(
                        f"cannot reserve producer ids: {exc!r}"
                    ) from exc
                log.info("producer id block [%d, %d] reserved", block.start, block.end)
                self._next, self._end = block.start, block.end
            producer_id = self._next
            self._next += 1
            return producer_id


class InitProducerIdApi:
    """The InitProducerId handler (API key 22)."""

    def __init__(self, manager: ProducerIdManager) -> None:
        self.manager = manager

    def install(self, dispatcher: RequestDispatcher) -> None:
        dispatcher.register(bodies.INIT_PRODUCER_ID, self.handle_init_producer_id)

    def handle_init_producer_id(
        self, header: RequestHeader, request: bodies.InitProducerIdRequest
    ) -> Answer[bodies.InitProducerIdResponse]:
        if request["transactional_id"] is not None:
            return _answer(InvalidRequestError("transactional producers are not supported"))
        producer_id, epoch = request["producer_id"], request["producer_epoch"]
        if (producer_id >= 0) != (epoch >= 0):
            return _answer(InvalidRequestError("producer_id and producer_epoch go together"))
        if producer_id >= 0 and epoch < MAX_EPOCH:
            return {"producer_id": producer_id, "producer_epoch": epoch + 1}
        return Deferred(self._new_producer)

    async def _new_producer(self) -> bodies.InitProducerIdResponse:
        try:
            producer_id = await self.manager.next_id()
        except KafkaError as exc:
            return _answer(exc)
        return {"error_code": NONE, "producer_id": producer_id, "producer_epoch": 0}


def _answer(error: KafkaError) -> bodies.InitProducerIdResponse:
    return {"error_code": error.code, "producer_id": -1, "producer_epoch": -1}


def install_init_producer_id(
    dispatcher: RequestDispatcher,
    broker_id: int,
    log_dirs: Sequence[str],
    zk: KafkaZkClient | None,
) -> ProducerIdManager:
    """Serve InitProducerId: blocks from ZooKeeper in a cluster, from the log dirs
    standalone (``zk`` None)."""
    source: BlockSource = LocalBlocks([Path(d) for d in log_dirs]) if zk is None else zk
    manager = ProducerIdManager(broker_id, source)
    InitProducerIdApi(manager).install(dispatcher)
    return manager


__all__ = [
    "PRODUCER_ID_BLOCK_SIZE",
    "InitProducerIdApi",
    "LocalBlocks",
    "ProducerIdManager",
    "install_init_producer_id",
]

"""InitProducerId: ids from reserved blocks, epoch bumps, the standalone counter."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from minibroker.broker.apis import Deferred
from minibroker.broker.cluster.producer_ids import (
    InitProducerIdApi,
    LocalBlocks,
    ProducerIdManager,
)
from minibroker.protocol.api import RequestHeader
from minibroker.protocol.errors import CoordinatorNotAvailableError
from minibroker.zk.values import ProducerIdBlock

HEADER = RequestHeader(22, 0, 1, "test")


class CountingBlocks:
    """Blocks of ``size`` handed out in order, like the ZooKeeper znode would."""

    def __init__(self) -> None:
        self.next_start = 0
        self.calls = 0

    async def allocate_producer_id_block(self, broker_id: int, size: int) -> ProducerIdBlock:
        self.calls += 1
        await trio.sleep(0)  # a real reservation awaits: others must queue behind it
        block = ProducerIdBlock(broker_id, self.next_start, self.next_start + size - 1)
        self.next_start += size
        return block


async def test_ids_come_from_blocks_reserved_one_at_a_time() -> None:
    source = CountingBlocks()
    manager = ProducerIdManager(1, source, block_size=3)
    ids: list[int] = []

    async def take() -> None:
        ids.append(await manager.next_id())

    async with trio.open_nursery() as nursery:
        for _ in range(7):
            nursery.start_soon(take)
    assert sorted(ids) == list(range(7))
    assert source.calls == 3  # 3 + 3 + 1: concurrent requests shared each reservation


class UnreachableBlocks:
    """ZooKeeper down: every reservation fails."""

    async def allocate_producer_id_block(self, broker_id: int, size: int) -> ProducerIdBlock:
        raise ConnectionError("ZooKeeper is not answering")


async def test_a_block_source_that_fails_is_answered_retriable() -> None:
    manager = ProducerIdManager(1, UnreachableBlocks())
    with pytest.raises(CoordinatorNotAvailableError) as raised:
        await manager.next_id()
    assert raised.value.retriable


async def test_a_new_producer_gets_a_fresh_id_at_epoch_zero() -> None:
    api = InitProducerIdApi(ProducerIdManager(1, CountingBlocks()))
    body = {"transactional_id": None, "producer_id": -1, "producer_epoch": -1}
    result = api.handle_init_producer_id(HEADER, body)
    assert isinstance(result, Deferred)
    assert await result.wait() == {"error_code": 0, "producer_id": 0, "producer_epoch": 0}


async def test_a_producer_naming_its_id_and_epoch_gets_the_next_epoch() -> None:
    api = InitProducerIdApi(ProducerIdManager(1, CountingBlocks()))
    body = {"transactional_id": None, "producer_id": 42, "producer_epoch": 3}
    assert api.handle_init_producer_id(HEADER, body) == {"producer_id": 42, "producer_epoch": 4}
    exhausted = {"transactional_id": None, "producer_id": 42, "producer_epoch": 32767}
    result = api.handle_init_producer_id(HEADER, exhausted)
    assert isinstance(result, Deferred)
    assert (await result.wait())["producer_epoch"] == 0  # a new id instead of epoch 32768


async def test_transactional_producers_are_refused() -> None:
    api = InitProducerIdApi(ProducerIdManager(1, CountingBlocks()))
    body = {"transactional_id": "tx", "producer_id": -1, "producer_epoch": -1}
    assert api.handle_init_producer_id(HEADER, body)["error_code"] == 42  # type: ignore[index]


async def test_a_standalone_broker_never_reuses_a_block_after_a_restart(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    for d in dirs:
        d.mkdir()
    first = await LocalBlocks(dirs).allocate_producer_id_block(1, 1000)
    (dirs[0] / "producer-id-block").unlink()  # one dir lost its copy: the other counts
    second = await LocalBlocks(dirs).allocate_producer_id_block(1, 1000)
    assert (first.start, first.end, second.start, second.end) == (0, 999, 1000, 1999)
    assert (dirs[0] / "producer-id-block").read_text() == "1999\n"

"""The transaction coordinator's rules over an in-memory ``__transaction_state``: new
ids, epoch bumps that fence, a commit's two phases, a timed-out transaction aborted
under a new epoch (and its producer's KIP-588 recovery), stale epochs refused."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest
import trio
import trio.testing

from minibroker.broker.cluster.producer_ids import ProducerIdManager
from minibroker.coordinator.offsets_log import Acknowledgement
from minibroker.protocol.errors import (
    ConcurrentTransactionsError,
    InvalidProducerIdMappingError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    KafkaError,
    ProducerFencedError,
)
from minibroker.protocol.records.types import DecodedRecord, Record
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.transaction.coordinator import TransactionConfig, TransactionCoordinator
from minibroker.transaction.metadata import TxnState
from minibroker.transaction.state_manager import TransactionStateManager
from minibroker.zk.values import ProducerIdBlock

TP = TopicPartition("t", 0)


class MemoryLog:
    def __init__(self) -> None:
        self.records: list[DecodedRecord] = []

    def leader_epoch(self, partition: int) -> int | None:
        return 0

    def append(self, partition: int, records: Sequence[Record], **_: Any) -> Acknowledgement:
        for r in records:
            self.records.append(DecodedRecord(len(self.records), 0, r.key, r.value))

        async def acknowledged() -> KafkaError | None:
            return None

        return acknowledged

    def read_all(self, partition: int) -> Iterator[DecodedRecord | None]:
        yield from list(self.records)


class Blocks:
    async def allocate_producer_id_block(self, broker_id: int, size: int) -> ProducerIdBlock:
        return ProducerIdBlock(broker_id, 1000, 1000 + size - 1)


class Markers:
    def __init__(self) -> None:
        self.written: list[tuple[int, int, bool]] = []

    def write_now(self, *, partitions: Any, **_: Any) -> tuple[set[TopicPartition], None]:
        return set(partitions), None  # none now: every marker is written by ``write``

    async def write(
        self, *, producer_id: int, producer_epoch: int, committed: bool, **_: Any
    ) -> bool:
        self.written.append((producer_id, producer_epoch, committed))
        return True


class Clock:
    ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


async def coordinator(nursery: trio.Nursery) -> tuple[TransactionCoordinator, Markers, Clock]:
    clock = Clock()
    state = TransactionStateManager(MemoryLog(), num_partitions=lambda: 1, clock=clock)  # type: ignore[arg-type]
    await state.became_leader(0, 0)
    markers = Markers()
    coordinator = TransactionCoordinator(
        state,
        ProducerIdManager(1, Blocks()),
        markers,  # type: ignore[arg-type]
        TransactionConfig(max_timeout_ms=60_000, id_expiration_ms=10**9, abort_interval_ms=10**6),
        clock=clock,
    )
    await nursery.start(coordinator.run)
    return coordinator, markers, clock


async def test_a_second_init_bumps_the_epoch_and_fences_the_first() -> None:
    async with trio.open_nursery() as nursery:
        c, _, _ = await coordinator(nursery)
        assert await c.init_producer_id("tx", 10_000, -1, -1) == (1000, 0)
        assert await c.init_producer_id("tx", 10_000, -1, -1) == (1000, 1)
        with pytest.raises(ProducerFencedError):
            await c.add_partitions("tx", 1000, 0, [TP])
        with pytest.raises(InvalidProducerIdMappingError):
            await c.add_partitions("tx", 999, 1, [TP])
        with pytest.raises(InvalidTransactionTimeoutError):
            await c.init_producer_id("tx", 120_000, -1, -1)
        nursery.cancel_scope.cancel()


async def test_a_commit_is_prepared_then_marked_then_complete() -> None:
    async with trio.open_nursery() as nursery:
        c, markers, _ = await coordinator(nursery)
        pid, epoch = await c.init_producer_id("tx", 10_000, -1, -1)
        await c.add_partitions("tx", pid, epoch, [TP])
        assert c.state.get("tx").state is TxnState.ONGOING  # type: ignore[union-attr]
        await c.end_transaction("tx", pid, epoch, committed=True)
        await c.add_partitions("tx", pid, epoch, [TP])  # waits for the markers, then goes on
        assert markers.written == [(pid, epoch, True)]
        assert c.state.get("tx").state is TxnState.ONGOING  # type: ignore[union-attr]
        nursery.cancel_scope.cancel()


async def test_a_timed_out_transaction_is_aborted_under_a_new_epoch() -> None:
    async with trio.open_nursery() as nursery:
        c, markers, clock = await coordinator(nursery)
        pid, epoch = await c.init_producer_id("tx", 10_000, -1, -1)
        await c.add_partitions("tx", pid, epoch, [TP])
        clock.ms += 10_001
        c.check_timeouts()
        await trio.testing.wait_all_tasks_blocked()
        meta = c.state.get("tx")
        assert meta is not None and meta.state is TxnState.COMPLETE_ABORT
        assert markers.written == [(pid, epoch + 1, False)]
        with pytest.raises(ProducerFencedError):  # the abandoned producer is fenced ...
            await c.end_transaction("tx", pid, epoch, committed=True)
        # ... but may recover with a new epoch (KIP-588)
        assert await c.init_producer_id("tx", 10_000, pid, epoch) == (pid, epoch + 2)
        with pytest.raises(ProducerFencedError):  # two bumps behind: a zombie
            await c.init_producer_id("tx", 10_000, pid, epoch)
        nursery.cancel_scope.cancel()


async def test_a_new_producer_aborts_the_open_transaction_of_the_old_one() -> None:
    async with trio.open_nursery() as nursery:
        c, markers, _ = await coordinator(nursery)
        pid, epoch = await c.init_producer_id("tx", 10_000, -1, -1)
        await c.add_partitions("tx", pid, epoch, [TP])
        with pytest.raises(ConcurrentTransactionsError):
            await c.init_producer_id("tx", 10_000, -1, -1)
        await trio.testing.wait_all_tasks_blocked()
        assert markers.written == [(pid, epoch + 1, False)]
        assert await c.init_producer_id("tx", 10_000, -1, -1) == (pid, epoch + 2)
        nursery.cancel_scope.cancel()


async def test_a_partition_is_verified_only_while_its_transaction_is_ongoing() -> None:
    async with trio.open_nursery() as nursery:
        c, _, _ = await coordinator(nursery)
        other = TopicPartition("t", 1)
        pid, epoch = await c.init_producer_id("tx", 10_000, -1, -1)
        before = c.verify_partitions("tx", pid, epoch, [TP])  # no transaction yet
        assert isinstance(before[TP], InvalidTxnStateError)
        await c.add_partitions("tx", pid, epoch, [TP])
        during = c.verify_partitions("tx", pid, epoch, [TP, other])
        assert during[TP] is None and isinstance(during[other], InvalidTxnStateError)
        with pytest.raises(ProducerFencedError):
            c.verify_partitions("tx", pid, epoch - 1, [TP])
        with pytest.raises(InvalidProducerIdMappingError):
            c.verify_partitions("tx", pid + 1, epoch, [TP])
        await c.end_transaction("tx", pid, epoch, committed=True)
        await trio.testing.wait_all_tasks_blocked()
        after = c.verify_partitions("tx", pid, epoch, [TP])  # a late write of the last one
        assert isinstance(after[TP], InvalidTxnStateError)
        nursery.cancel_scope.cancel()


async def test_with_transaction_version_2_every_end_bumps_the_epoch_and_fences_the_last() -> None:
    """KIP-890 part 2: the prepared state and its markers carry the next epoch; a retry
    of the end presents the old one and gets the same answer; a late end of the
    ended transaction cannot end the next one (KAFKA-17754)."""
    async with trio.open_nursery() as nursery:
        c, markers, _ = await coordinator(nursery)
        pid, epoch = await c.init_producer_id("tx", 10_000, -1, -1)
        await c.add_partitions("tx", pid, epoch, [TP])
        await c.end_transaction("tx", pid, epoch, committed=True, bump_epoch=True)
        assert c.producer_of("tx") == (pid, epoch + 1)
        await c.end_transaction("tx", pid, epoch, committed=True, bump_epoch=True)  # a retry
        assert c.producer_of("tx") == (pid, epoch + 1)
        with pytest.raises(InvalidTxnStateError):  # a retry must ask for the same result
            await c.end_transaction("tx", pid, epoch, committed=False, bump_epoch=True)
        await c.add_partitions("tx", pid, epoch + 1, [TP])  # the next transaction
        assert markers.written == [(pid, epoch + 1, True)]
        with pytest.raises(ProducerFencedError):
            await c.end_transaction("tx", pid, epoch, committed=True, bump_epoch=True)
        with pytest.raises(ProducerFencedError):
            await c.add_partitions("tx", pid, epoch, [TP])
        await c.end_transaction("tx", pid, epoch + 1, committed=False, bump_epoch=True)
        assert c.producer_of("tx") == (pid, epoch + 2)
        nursery.cancel_scope.cancel()


async def test_with_transaction_version_2_an_abort_of_nothing_bumps_the_epoch() -> None:
    """Its client cannot know whether a failed Produce added a partition, so it aborts
    from Empty or Complete* too; a commit of nothing stays refused."""
    async with trio.open_nursery() as nursery:
        c, _, _ = await coordinator(nursery)
        pid, epoch = await c.init_producer_id("tx", 10_000, -1, -1)
        with pytest.raises(InvalidTxnStateError):
            await c.end_transaction("tx", pid, epoch, committed=True, bump_epoch=True)
        await c.end_transaction("tx", pid, epoch, committed=False, bump_epoch=True)
        assert c.producer_of("tx") == (pid, epoch + 1)
        await c.end_transaction("tx", pid, epoch + 1, committed=False, bump_epoch=True)
        assert c.producer_of("tx") == (pid, epoch + 2)
        with pytest.raises(ProducerFencedError):  # the epoch of an ended transaction
            await c.end_transaction("tx", pid, epoch + 2, committed=True, bump_epoch=True)
        nursery.cancel_scope.cancel()


async def test_without_transaction_version_2_the_epoch_stays() -> None:
    async with trio.open_nursery() as nursery:
        c, markers, _ = await coordinator(nursery)
        pid, epoch = await c.init_producer_id("tx", 10_000, -1, -1)
        await c.add_partitions("tx", pid, epoch, [TP])
        await c.end_transaction("tx", pid, epoch, committed=False)
        await c.end_transaction("tx", pid, epoch, committed=False)  # a retry, same epoch
        assert c.producer_of("tx") == (pid, epoch)
        await c.add_partitions("tx", pid, epoch, [TP])
        assert markers.written == [(pid, epoch, False)]
        nursery.cancel_scope.cancel()

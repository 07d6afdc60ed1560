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
    TransactionAbortableError,
)
from minibroker.protocol.records.types import DecodedRecord, Record
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.protocol.transaction_log import decode_value
from minibroker.transaction.coordinator import TransactionConfig, TransactionCoordinator
from minibroker.transaction.metadata import LAST_EPOCH, MAX_EPOCH, TxnState
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
    def __init__(self, first_id: int = 1000) -> None:
        self.first_id = first_id

    async def allocate_producer_id_block(self, broker_id: int, size: int) -> ProducerIdBlock:
        return ProducerIdBlock(broker_id, self.first_id, self.first_id + size - 1)


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


class StuckMarkers(Markers):
    """Markers that never get written (a coordinator that stops before they are)."""

    async def write(self, **_: Any) -> bool:
        await trio.sleep_forever()
        raise AssertionError("unreachable")


async def coordinator(
    nursery: trio.Nursery,
    log: MemoryLog | None = None,
    first_id: int = 1000,
    markers: Markers | None = None,
) -> tuple[TransactionCoordinator, Markers, Clock]:
    clock = Clock()
    log = MemoryLog() if log is None else log
    state = TransactionStateManager(log, num_partitions=lambda: 1, clock=clock)  # type: ignore[arg-type]
    markers = Markers() if markers is None else markers
    coordinator = TransactionCoordinator(
        state,
        ProducerIdManager(1, Blocks(first_id)),
        markers,  # type: ignore[arg-type]
        TransactionConfig(max_timeout_ms=60_000, id_expiration_ms=10**9, abort_interval_ms=10**6),
        clock=clock,
    )
    await nursery.start(coordinator.run)
    await state.became_leader(0, 0)  # loaded once running: it completes what was prepared
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
        assert isinstance(before[TP], TransactionAbortableError)
        await c.add_partitions("tx", pid, epoch, [TP])
        during = c.verify_partitions("tx", pid, epoch, [TP, other])
        assert during[TP] is None and isinstance(during[other], TransactionAbortableError)
        with pytest.raises(ProducerFencedError):
            c.verify_partitions("tx", pid, epoch - 1, [TP])
        with pytest.raises(InvalidProducerIdMappingError):
            c.verify_partitions("tx", pid + 1, epoch, [TP])
        await c.end_transaction("tx", pid, epoch, committed=True)
        await trio.testing.wait_all_tasks_blocked()
        after = c.verify_partitions("tx", pid, epoch, [TP])  # a late write of the last one
        assert isinstance(after[TP], TransactionAbortableError)
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


async def at_last_epoch(c: TransactionCoordinator) -> tuple[int, int]:
    """A producer of "tx" at the last epoch it can be given (written to the log)."""
    pid, _ = await c.init_producer_id("tx", 10_000, -1, -1)
    meta = c.state.get("tx")
    assert meta is not None
    await c.state.write(meta, meta.prepare(TxnState.EMPTY, c.clock(), producer_epoch=LAST_EPOCH))
    return pid, LAST_EPOCH


async def test_with_transaction_version_2_an_end_at_the_last_epoch_moves_to_a_new_producer_id() -> (
    None
):
    """As Kafka's coordinator: the markers carry the old id at the bumped (maximum)
    epoch, the answer names a new producer id at epoch 0, the next transaction runs
    under it, and a retry of that end with the old id and epoch gets the same answer."""
    async with trio.open_nursery() as nursery:
        c, markers, _ = await coordinator(nursery)
        pid, epoch = await at_last_epoch(c)
        await c.add_partitions("tx", pid, epoch, [TP])
        await c.end_transaction("tx", pid, epoch, committed=True, bump_epoch=True)
        new_pid, new_epoch = c.producer_of("tx")
        assert (new_epoch, new_pid != pid) == (0, True)
        await c.end_transaction("tx", pid, epoch, committed=True, bump_epoch=True)  # a retry
        assert c.producer_of("tx") == (new_pid, 0)
        await c.add_partitions("tx", new_pid, 0, [TP])  # the next transaction
        assert markers.written == [(pid, MAX_EPOCH, True)]
        assert c.state.get("tx").value.producer_id == new_pid  # type: ignore[union-attr]
        with pytest.raises(InvalidProducerIdMappingError):  # the old id is done with
            await c.add_partitions("tx", pid, epoch, [TP])
        await c.end_transaction("tx", new_pid, 0, committed=False, bump_epoch=True)
        assert c.producer_of("tx") == (new_pid, 1)
        await c.end_transaction("tx", new_pid, 1, committed=False, bump_epoch=True)
        assert markers.written[1:] == [(new_pid, 1, False)]
        nursery.cancel_scope.cancel()


async def test_an_abort_of_nothing_at_the_last_epoch_moves_to_a_new_producer_id_too() -> None:
    async with trio.open_nursery() as nursery:
        c, _, _ = await coordinator(nursery)
        pid, epoch = await at_last_epoch(c)
        await c.end_transaction("tx", pid, epoch, committed=False, bump_epoch=True)
        new_pid, new_epoch = c.producer_of("tx")
        assert (new_epoch, new_pid != pid) == (0, True)
        await c.add_partitions("tx", new_pid, 0, [TP])
        nursery.cancel_scope.cancel()


async def test_the_move_to_a_new_producer_id_survives_a_reload_of_the_log() -> None:
    """The prepared state names the next id, Complete* the previous one (v1 tagged
    fields): a new coordinator answers the retry of the end as the old one did."""
    log = MemoryLog()
    async with trio.open_nursery() as nursery:
        c, _, _ = await coordinator(nursery, log)
        pid, epoch = await at_last_epoch(c)
        await c.add_partitions("tx", pid, epoch, [TP])
        await c.end_transaction("tx", pid, epoch, committed=True, bump_epoch=True)
        new_pid, _ = c.producer_of("tx")
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    values = [decode_value(r.value) for r in log.records if r.value is not None]
    prepared, completed = values[-2:]
    assert (prepared.producer_id, prepared.producer_epoch) == (pid, MAX_EPOCH)
    assert (prepared.next_producer_id, prepared.previous_producer_id) == (new_pid, -1)
    assert (completed.producer_id, completed.producer_epoch) == (new_pid, 0)
    assert (completed.next_producer_id, completed.previous_producer_id) == (-1, pid)
    async with trio.open_nursery() as nursery:
        c, _, _ = await coordinator(nursery, log, first_id=5000)
        await c.end_transaction("tx", pid, epoch, committed=True, bump_epoch=True)  # a retry
        assert c.producer_of("tx") == (new_pid, 0)
        await c.add_partitions("tx", new_pid, 0, [TP])
        nursery.cancel_scope.cancel()


async def test_a_reloaded_end_at_the_last_epoch_completes_under_the_new_producer_id() -> None:
    log = MemoryLog()
    async with trio.open_nursery() as nursery:
        c, _, _ = await coordinator(nursery, log, markers=StuckMarkers())
        pid, epoch = await at_last_epoch(c)
        await c.add_partitions("tx", pid, epoch, [TP])
        await c.end_transaction("tx", pid, epoch, committed=False, bump_epoch=True)
        new_pid, _ = c.producer_of("tx")
        with pytest.raises(ConcurrentTransactionsError):  # the new id, before the markers
            c.verify_partitions("tx", new_pid, 0, [TP])
        nursery.cancel_scope.cancel()  # before the markers: PrepareAbort is the last record
    assert decode_value(log.records[-1].value).next_producer_id == new_pid  # type: ignore[arg-type]
    async with trio.open_nursery() as nursery:
        c, markers, _ = await coordinator(nursery, log, first_id=5000)
        await c.add_partitions("tx", new_pid, 0, [TP])  # waits for the reloaded completion
        assert markers.written == [(pid, MAX_EPOCH, False)]
        nursery.cancel_scope.cancel()


async def test_a_timeout_at_the_last_epoch_aborts_under_32767_and_moves_to_a_new_producer_id() -> (
    None
):
    """As Kafka's (KAFKA-20090): the abort's markers carry 32767, so every batch of the
    last epoch is fenced, and the id moves to a new producer id; the abandoned producer
    recovers under it (an EndTxn v5 retry, or InitProducerId with its old id), and a
    commit of the aborted transaction is fenced (KAFKA-20785), not INVALID_TXN_STATE."""
    async with trio.open_nursery() as nursery:
        c, markers, clock = await coordinator(nursery)
        pid, epoch = await at_last_epoch(c)
        await c.add_partitions("tx", pid, epoch, [TP])
        clock.ms += 10_001
        c.check_timeouts()
        await trio.testing.wait_all_tasks_blocked()
        assert markers.written == [(pid, MAX_EPOCH, False)]
        meta = c.state.get("tx")
        assert meta is not None and meta.state is TxnState.COMPLETE_ABORT
        new_pid = meta.value.producer_id
        assert (new_pid != pid, meta.value.producer_epoch) == (True, 0)
        with pytest.raises(ProducerFencedError):
            await c.end_transaction("tx", pid, epoch, committed=True, bump_epoch=True)
        await c.end_transaction("tx", pid, epoch, committed=False, bump_epoch=True)
        assert c.producer_of("tx") == (new_pid, 0)
        with pytest.raises(InvalidProducerIdMappingError):  # the old id is done with
            await c.add_partitions("tx", pid, epoch, [TP])
        assert await c.init_producer_id("tx", 10_000, pid, epoch) == (new_pid, 1)
        with pytest.raises(ProducerFencedError):  # once: its next bump fences it
            await c.init_producer_id("tx", 10_000, pid, epoch)
        nursery.cancel_scope.cancel()


async def test_a_fence_at_the_last_epoch_aborts_under_32767_and_gives_a_new_producer_id() -> None:
    async with trio.open_nursery() as nursery:
        c, markers, _ = await coordinator(nursery)
        pid, epoch = await at_last_epoch(c)
        await c.add_partitions("tx", pid, epoch, [TP])
        with pytest.raises(ConcurrentTransactionsError):  # the new instance waits ...
            await c.init_producer_id("tx", 10_000, -1, -1)
        await trio.testing.wait_all_tasks_blocked()
        assert markers.written == [(pid, MAX_EPOCH, False)]
        new_pid, new_epoch = await c.init_producer_id("tx", 10_000, -1, -1)  # ... and goes on
        assert (new_pid != pid, new_epoch) == (True, 1)
        with pytest.raises(InvalidProducerIdMappingError):  # the fenced one cannot
            await c.add_partitions("tx", pid, epoch, [TP])
        nursery.cancel_scope.cancel()


class LocalMarkers(Markers):
    """Markers of partitions this broker leads alone: appended at once by ``write_now``."""

    def write_now(  # type: ignore[override]
        self, *, producer_id: int, producer_epoch: int, committed: bool, **_: Any
    ) -> tuple[set[TopicPartition], None]:
        self.written.append((producer_id, producer_epoch, committed))
        return set(), None


async def test_an_end_is_answered_once_prepared_and_its_markers_follow_before_the_next() -> None:
    """As Kafka answers EndTxn: the decision is durable, the markers and Complete* come
    after the answer (even on one broker, where they need no wait), and the id's next
    request waits for them."""
    async with trio.open_nursery() as nursery:
        c, markers, _ = await coordinator(nursery, markers=LocalMarkers())
        pid, epoch = await c.init_producer_id("tx", 10_000, -1, -1)
        await c.add_partitions("tx", pid, epoch, [TP])
        await c.end_transaction("tx", pid, epoch, committed=True)  # answered
        assert c.state.get("tx").state is TxnState.PREPARE_COMMIT  # type: ignore[union-attr]
        assert markers.written == [] and c.completing("tx")
        await c.add_partitions("tx", pid, epoch, [TP])  # waits for the completion, goes on
        assert markers.written == [(pid, epoch, True)] and not c.completing("tx")
        assert c.state.get("tx").state is TxnState.ONGOING  # type: ignore[union-attr]
        nursery.cancel_scope.cancel()

"""The coordinator on a real ReplicaManager (no network): LeaderAndIsr and StopReplica
tell it which offsets partitions it leads, commits go through the leader's log with
acks=all, and a manager that becomes leader again reads them back."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

import pytest

from minibroker.broker.replication.partition import LeaderAndIsrPartition, Partition, ReadResult
from minibroker.coordinator.group import Group
from minibroker.coordinator.group_metadata_manager import GroupMetadataManager, OffsetsConfig
from minibroker.coordinator.offsets_log import ReplicaOffsetsLog
from minibroker.protocol.errors import NotCoordinatorError
from minibroker.protocol.offsets_topic import OFFSETS_TOPIC, OffsetCommitValue
from minibroker.protocol.records import Record, encode_batch
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.storage.cleaner.records import gap_batch
from tests.support.broker import broker_config, replica_manager

OFFSETS_0 = TopicPartition(OFFSETS_TOPIC, 0)
ORDERS = TopicPartition("orders", 3)


def led(epoch: int, leader: int = 1) -> LeaderAndIsrPartition:
    return LeaderAndIsrPartition(
        controller_epoch=1, leader=leader, leader_epoch=epoch, isr=(1,), zk_version=epoch,
        replicas=(1, 2), is_new=epoch == 0,
    )  # fmt: skip


async def test_leadership_changes_reach_the_listeners_and_commits_survive_a_reload(
    tmp_path: Path,
) -> None:
    changes: list[tuple[list[TopicPartition], list[TopicPartition]]] = []

    def listener(leaders: Sequence[Partition], resigned: Sequence[TopicPartition]) -> None:
        changes.append(([p.tp for p in leaders], list(resigned)))

    with replica_manager(broker_config(tmp_path)) as manager:
        manager.replicas.leadership_listeners.append(listener)
        offsets_log = ReplicaOffsetsLog(manager, timeout_ms=1000, clock=lambda: 5)
        config = OffsetsConfig(num_partitions=1, retention_ms=1000, metadata_max_bytes=10)
        first = GroupMetadataManager(offsets_log, config, clock=lambda: 5)

        await manager.leadership.become_leader_or_follower(1, {OFFSETS_0: led(0)})
        assert changes == [([OFFSETS_0], [])]
        await first.became_leader(0, 0)
        group = first.add_group(Group("g"))
        assert await first.store_offsets(group, {ORDERS: OffsetCommitValue(42, "m", 5)})() is None
        assert await first.store_group(group, {}) is None

        await manager.leadership.become_leader_or_follower(1, {OFFSETS_0: led(1, leader=2)})
        assert changes[-1] == ([], [OFFSETS_0])
        first.resigned(0)
        with pytest.raises(NotCoordinatorError):
            first.check_owner("g")

        await manager.leadership.become_leader_or_follower(1, {OFFSETS_0: led(2)})
        second = GroupMetadataManager(offsets_log, config, clock=lambda: 5)
        await second.became_leader(0, 2)
        reloaded = second.group("g")
        assert reloaded is not None
        assert reloaded.offsets == {ORDERS: OffsetCommitValue(42, "m", 5)}

        await manager.leadership.stop_replicas(1, [(OFFSETS_0, False)])
        assert changes[-1] == ([], [OFFSETS_0])


class _CleanedPartition:
    """An offsets partition as the log cleaner leaves it: two records, then an empty
    batch over offsets 2-9 whose records were all removed; the log ends at 10."""

    log_start_offset = 0
    log_end_offset = 10

    def __init__(self) -> None:
        records = encode_batch([Record(b"v0", b"k0"), Record(b"v1", b"k1")])
        self.chunk = bytes(records) + gap_batch(2, 9, leader_epoch=0, timestamp=1)

    def read(self, offset: int, max_bytes: int, *, from_follower: bool) -> ReadResult:
        return ReadResult(self.chunk, high_watermark=10, log_start_offset=0, log_end_offset=10)


class _OneCleanedPartition:
    def get_partition(self, tp: TopicPartition) -> _CleanedPartition:
        return _CleanedPartition()


def test_loading_a_cleaned_offsets_partition_continues_past_batches_without_records() -> None:
    offsets_log = ReplicaOffsetsLog(
        SimpleNamespace(replicas=_OneCleanedPartition()),  # type: ignore[arg-type]
        timeout_ms=1000,
        clock=lambda: 5,
    )
    read = list(itertools.islice(offsets_log.read_all(0), 10))
    assert [r.offset for r in read if r is not None] == [0, 1]
    assert len(read) == 3  # the two records and one end-of-chunk marker, then done

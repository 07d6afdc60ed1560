"""LeaderAndIsr and the leader-epoch checkpoint: a new leadership's epoch is in memory
at once (the next append is stamped with it) and in the partition's
leader-epoch-checkpoint soon after the request is answered, written off the event loop
in one worker-thread batch for all the partitions the request makes this broker lead
(broker/replication/epoch_checkpoints.py). A flush or a clean close writes one still pending.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from minibroker.broker.replication.partition import LeaderAndIsrPartition
from minibroker.broker.replication.replica_manager import ReplicaManager
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.storage.leader_epoch import LeaderEpochCache
from tests.support.broker import broker_config, replica_manager

ME = 1
TPS = [TopicPartition("orders", p) for p in range(5)]


def leading(epoch: int) -> LeaderAndIsrPartition:
    return LeaderAndIsrPartition(
        controller_epoch=1, leader=ME, leader_epoch=epoch, isr=(ME,), zk_version=epoch,
        replicas=(ME,), is_new=epoch == 0,
    )  # fmt: skip


@pytest.fixture
async def manager(tmp_path: Path) -> AsyncIterator[ReplicaManager]:
    """A ReplicaManager over a LogManager in tmp_path: no server, no network."""
    with replica_manager(broker_config(tmp_path)) as manager:
        yield manager


def on_disk(manager: ReplicaManager, tp: TopicPartition) -> list[tuple[int, int]]:
    partition = manager.replicas.partitions[tp]
    reread = LeaderEpochCache(partition.log.dir, lambda: 0)
    return [(e.epoch, e.start_offset) for e in reread.entries]


async def test_every_new_leaders_epoch_reaches_its_checkpoint_after_leader_and_isr_returns(
    manager: ReplicaManager,
) -> None:
    async with trio.open_nursery() as nursery:
        await nursery.start(manager.replicas.epoch_checkpoints.run)
        await manager.leadership.become_leader_or_follower(1, {tp: leading(0) for tp in TPS})
        assert all(manager.replicas.partitions[tp].leader_epoch == 0 for tp in TPS)
        # The answer did not wait for the files (seconds for thousands of leaderships,
        # while the controller held back the UpdateMetadata naming the new leaders).
        assert all(on_disk(manager, tp) == [] for tp in TPS)
        await manager.replicas.epoch_checkpoints.idle.wait()
        assert all(on_disk(manager, tp) == [(0, 0)] for tp in TPS)
        await manager.leadership.become_leader_or_follower(1, {tp: leading(2) for tp in TPS})
        await manager.replicas.epoch_checkpoints.idle.wait()
        # Epoch 2 starts where epoch 0 did (nothing was appended), so it replaces it.
        assert all(on_disk(manager, tp) == [(2, 0)] for tp in TPS)
        nursery.cancel_scope.cancel()


async def test_a_pending_epoch_checkpoint_is_written_by_a_flush(manager: ReplicaManager) -> None:
    # No writer ran (a broker stopping at once): the clean close's flush writes it.
    await manager.leadership.become_leader_or_follower(1, {tp: leading(3) for tp in TPS})
    for tp in TPS:
        manager.replicas.partitions[tp].log.flush()
    assert all(on_disk(manager, tp) == [(3, 0)] for tp in TPS)

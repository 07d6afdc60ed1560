"""LeaderAndIsr creates all its new partitions' logs in one batch: each log dir is
fsynced once for the whole request, and a log that cannot be created fails only its
own partition (KAFKA_STORAGE_ERROR)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from minibroker.broker.replication.partition import LeaderAndIsrPartition
from minibroker.broker.replication.replica_manager import ReplicaManager
from minibroker.protocol.errors import KafkaStorageError
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.storage import log_manager as log_manager_module
from tests.support.broker import broker_config, replica_manager

ME = 1
TPS = [TopicPartition("orders", p) for p in range(40)]


def state(leader: int) -> LeaderAndIsrPartition:
    return LeaderAndIsrPartition(
        controller_epoch=1, leader=leader, leader_epoch=0, isr=(1, 2), zk_version=0,
        replicas=(1, 2), is_new=True,
    )  # fmt: skip


@pytest.fixture
async def manager(tmp_path: Path) -> AsyncIterator[ReplicaManager]:
    dirs = f"{tmp_path / 'd1'},{tmp_path / 'd2'}"
    with replica_manager(broker_config(tmp_path, log_dirs=dirs)) as manager:
        yield manager


async def test_one_leader_and_isr_creates_every_new_log_with_one_fsync_per_log_dir(
    manager: ReplicaManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    fsynced: list[Path] = []
    monkeypatch.setattr(log_manager_module, "fsync_dir", fsynced.append)
    states = {tp: state(ME if tp.partition % 2 else 2) for tp in TPS}
    errors = await manager.leadership.become_leader_or_follower(1, states)
    assert errors == dict.fromkeys(TPS, 0)
    assert sorted(fsynced) == sorted(manager.replicas.log_manager.log_dirs)
    assert {tp for tp, p in manager.replicas.partitions.items() if p.is_leader} == {
        tp for tp in TPS if tp.partition % 2
    }
    assert all(
        manager.replicas.partitions[tp].log is manager.replicas.log_manager.get_log(tp)
        for tp in TPS
    )


async def test_a_log_that_cannot_be_created_fails_only_its_partition(
    manager: ReplicaManager,
) -> None:
    logs = manager.replicas.log_manager
    offline = logs.log_dirs[1]
    logs.set_preferred_log_dir(TPS[0], offline)
    logs.mark_log_dir_offline(offline)
    errors = await manager.leadership.become_leader_or_follower(
        1, {tp: state(ME) for tp in TPS[:3]}
    )
    assert errors == {TPS[0]: KafkaStorageError.code, TPS[1]: 0, TPS[2]: 0}
    assert TPS[0] not in manager.replicas.partitions

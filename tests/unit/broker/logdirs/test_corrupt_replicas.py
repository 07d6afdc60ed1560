"""The broker side of a corrupt replica: a log that lost committed records when loaded
is refused to the controller (KAFKA_STORAGE_ERROR) until StopReplica has repaired it,
and high watermarks checkpointed before a restart survive until their partitions
come back."""

from __future__ import annotations

from pathlib import Path
from typing import cast

from minibroker.broker.logdirs.corruption import CorruptReplicas
from minibroker.broker.replication.hosted_replicas import HostedReplicas
from minibroker.broker.replication.partition import LeaderAndIsrPartition
from minibroker.protocol.errors import KafkaStorageError
from minibroker.protocol.records import Record, encode_batch, iter_headers
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.zk.data import KafkaZkClient
from tests.support.broker import broker_config, replica_manager

ME = 1
TP = TopicPartition("orders", 0)


def follower_state(epoch: int) -> LeaderAndIsrPartition:
    return LeaderAndIsrPartition(
        controller_epoch=1, leader=2, leader_epoch=epoch, isr=(1, 2), zk_version=0,
        replicas=(1, 2),
    )  # fmt: skip


def leader_state(epoch: int) -> LeaderAndIsrPartition:
    return LeaderAndIsrPartition(
        controller_epoch=1, leader=ME, leader_epoch=epoch, isr=(ME,), zk_version=0,
        replicas=(ME,),
    )  # fmt: skip


async def fill_and_checkpoint(tmp_path: Path, batches: int = 30) -> None:
    """A led partition of ``batches`` two-record batches, its HW checkpointed; the
    broker then stops as kill -9 does (no clean-shutdown marker, no flush)."""
    config = broker_config(tmp_path, log_segment_bytes=2048)
    with replica_manager(config) as manager:
        await manager.leadership.become_leader_or_follower(1, {TP: leader_state(0)})
        for i in range(batches):
            records = encode_batch([Record(b"r%03d-%d" % (i, j) + b"x" * 30) for j in range(2)])
            [(_, result)] = manager.append_records(1, [(TP, records)])
            assert not isinstance(result, Exception)
        await manager.checkpoint_high_watermarks()
        manager.replicas.log_manager.abandon()


def flip_middle_of_first_segment(tmp_path: Path) -> int:
    path = sorted((tmp_path / str(TP)).glob("*.log"))[0]
    data = path.read_bytes()
    positions = [p for p, _ in iter_headers(data)]
    target = positions[len(positions) // 2]
    with path.open("r+b") as f:
        f.seek(target + 70)
        f.write(b"\xff" * 16)
    return int.from_bytes(data[target : target + 8], "big")


def replicated_repairs(manager: HostedReplicas) -> CorruptReplicas:
    """Corrupt-replica handling as in cluster mode (a controller would take over); the
    ZooKeeper client is never called, as the notifying task is not started here."""
    return CorruptReplicas(manager, zk=cast(KafkaZkClient, object()))


async def test_high_watermarks_checkpointed_before_a_restart_survive_until_leader_and_isr(
    tmp_path: Path,
) -> None:
    await fill_and_checkpoint(tmp_path)
    with replica_manager(broker_config(tmp_path, log_segment_bytes=2048)) as manager:
        await manager.checkpoint_high_watermarks()  # before any LeaderAndIsr
        assert manager.replicas.log_manager.read_replication_offsets(tmp_path) == {TP: 60}


async def test_a_log_cut_below_its_high_watermark_is_refused_until_repaired(
    tmp_path: Path,
) -> None:
    await fill_and_checkpoint(tmp_path)
    lost_from = flip_middle_of_first_segment(tmp_path)
    with replica_manager(
        broker_config(tmp_path, log_segment_bytes=2048), corruption=replicated_repairs
    ) as manager:
        errors = await manager.leadership.become_leader_or_follower(1, {TP: follower_state(1)})
        assert errors == {TP: KafkaStorageError.code}
        partition = manager.replicas.partitions[TP]
        assert partition.corruption is not None and partition.corruption.offset == lost_from
        assert partition.log_end_offset == lost_from
        # The controller resends the same state to learn which replicas are offline.
        again = await manager.leadership.become_leader_or_follower(1, {TP: follower_state(1)})
        assert again == {TP: KafkaStorageError.code}
        # It takes the replica out of the ISR and stops it: the repair clears the mark.
        assert await manager.leadership.stop_replicas(1, [(TP, False)]) == {TP: 0}
        assert partition.corruption is None
        assert partition.high_watermark <= lost_from
        stats = manager.replicas.log_manager.corruption_stats
        assert (stats.corrupt["recovery"], stats.repairs) == (1, 1)
        # A later LeaderAndIsr makes it a follower that fetches the rest.
        assert await manager.leadership.become_leader_or_follower(1, {TP: follower_state(2)}) == {
            TP: 0
        }
        assert partition.leader_id == 2


async def test_a_log_cut_only_above_its_high_watermark_serves_at_once(tmp_path: Path) -> None:
    await fill_and_checkpoint(tmp_path)
    checkpoint = tmp_path / "replication-offset-checkpoint"
    checkpoint.write_text(f"0\n1\n{TP.topic} {TP.partition} 2\n")  # HW behind the damage
    flip_middle_of_first_segment(tmp_path)
    with replica_manager(
        broker_config(tmp_path, log_segment_bytes=2048), corruption=replicated_repairs
    ) as manager:
        errors = await manager.leadership.become_leader_or_follower(1, {TP: follower_state(1)})
        assert errors == {TP: 0}
        assert manager.replicas.partitions[TP].corruption is None

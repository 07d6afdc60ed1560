"""Partition: roles, leader epochs, HW = min LEO over the ISR, reads bounded by HW/LEO."""

from __future__ import annotations

from pathlib import Path

import pytest

from minibroker.broker.config.broker_config import BrokerConfig
from minibroker.broker.replication.hosted_replicas import to_log_config
from minibroker.broker.replication.partition import LeaderAndIsrPartition, Partition
from minibroker.protocol.errors import (
    FencedLeaderEpochError,
    InvalidRecordError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    UnknownLeaderEpochError,
)
from minibroker.protocol.records import Record, decode_records, encode_batch, read_header
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.storage.log import Log

ME = 1
NOW = 1_700_000_000_000


def make_partition(tmp_path: Path, **properties: str) -> Partition:
    config = BrokerConfig.from_properties(None, properties).topic_config()
    log = Log(tmp_path / "t-0", to_log_config(config))
    return Partition(
        TopicPartition("t", 0), local_broker_id=ME, log=log, config=config, clock=lambda: NOW
    )


def leader_state(
    epoch: int = 0, isr: tuple[int, ...] = (ME,), replicas: tuple[int, ...] = (ME,)
) -> LeaderAndIsrPartition:
    return LeaderAndIsrPartition(
        controller_epoch=1, leader=ME, leader_epoch=epoch, isr=isr, zk_version=0, replicas=replicas
    )


def records(*values: bytes) -> bytes:
    return encode_batch([Record(v, timestamp=5) for v in values])


def test_single_replica_leader_moves_hw_to_leo_on_every_append(tmp_path: Path) -> None:
    partition = make_partition(tmp_path)
    assert partition.make_leader(leader_state(epoch=3)) is True
    result = partition.append_records_to_leader(records(b"a", b"b"), required_acks=1)
    assert (result.info.first_offset, result.info.last_offset) == (0, 1)
    assert result.high_watermark_moved
    assert partition.high_watermark == partition.log_end_offset == 2
    data = partition.read(0, 1 << 20, from_follower=False).records
    assert read_header(data).partition_leader_epoch == 3


def test_hw_is_the_minimum_leo_over_the_isr_and_never_moves_back(tmp_path: Path) -> None:
    partition = make_partition(tmp_path)
    partition.make_leader(leader_state(isr=(ME, 2), replicas=(ME, 2)))
    partition.append_records_to_leader(records(b"a", b"b", b"c"), required_acks=1)
    assert partition.high_watermark == 0  # the follower has fetched nothing yet
    partition.remote_replicas[2].log_end_offset = 2
    assert partition.maybe_increment_high_watermark()
    assert partition.high_watermark == 2
    partition.remote_replicas[2].log_end_offset = 1
    assert not partition.maybe_increment_high_watermark()
    assert partition.high_watermark == 2


def test_consumers_read_below_the_hw_and_followers_up_to_the_leo(tmp_path: Path) -> None:
    partition = make_partition(tmp_path)
    partition.make_leader(leader_state(isr=(ME, 2), replicas=(ME, 2)))
    partition.append_records_to_leader(records(b"a"), required_acks=1)
    assert partition.read(0, 1 << 20, from_follower=False).records == b""
    follower_view = partition.read(0, 1 << 20, from_follower=True)
    assert [r.value for r in decode_records(follower_view.records)] == [b"a"]
    with pytest.raises(OffsetOutOfRangeError):
        partition.read(5, 1 << 20, from_follower=True)


def test_a_follower_refuses_appends_and_reads(tmp_path: Path) -> None:
    partition = make_partition(tmp_path)
    state = LeaderAndIsrPartition(
        controller_epoch=1, leader=2, leader_epoch=0, isr=(2, ME), zk_version=0, replicas=(2, ME)
    )
    assert partition.make_follower(state) is True
    assert partition.isr == frozenset()
    with pytest.raises(NotLeaderOrFollowerError):
        partition.append_records_to_leader(records(b"a"), required_acks=1)
    with pytest.raises(NotLeaderOrFollowerError):
        partition.read(0, 100, from_follower=False)


def test_acks_all_needs_min_insync_replicas_in_the_isr(tmp_path: Path) -> None:
    partition = make_partition(tmp_path, **{"min.insync.replicas": "2"})
    partition.make_leader(leader_state(isr=(ME,), replicas=(ME, 2)))
    with pytest.raises(NotEnoughReplicasError):
        partition.append_records_to_leader(records(b"a"), required_acks=-1)
    assert partition.log_end_offset == 0
    partition.append_records_to_leader(records(b"a"), required_acks=1)  # acks=1 is fine


def test_requests_naming_another_leader_epoch_are_fenced_or_unknown(tmp_path: Path) -> None:
    partition = make_partition(tmp_path)
    partition.make_leader(leader_state(epoch=5))
    with pytest.raises(FencedLeaderEpochError):
        partition.read(0, 100, from_follower=False, current_leader_epoch=4)
    with pytest.raises(UnknownLeaderEpochError):
        partition.read(0, 100, from_follower=False, current_leader_epoch=6)
    partition.read(0, 100, from_follower=False, current_leader_epoch=5)


def test_re_election_of_the_same_leader_is_not_a_new_leadership(tmp_path: Path) -> None:
    partition = make_partition(tmp_path)
    assert partition.make_leader(leader_state(epoch=0))
    partition.append_records_to_leader(records(b"a"), required_acks=1)
    assert partition.make_leader(leader_state(epoch=1)) is False
    partition.append_records_to_leader(records(b"b"), required_acks=1)
    assert [(e.epoch, e.start_offset) for e in partition.log.leader_epoch_cache.entries] == [
        (0, 0),
        (1, 1),
    ]
    assert partition.epoch_for_offset(0) == 0
    assert partition.epoch_for_offset(1) == 1


def test_log_append_time_topics_carry_the_broker_clock(tmp_path: Path) -> None:
    partition = make_partition(tmp_path, **{"log.message.timestamp.type": "LogAppendTime"})
    partition.make_leader(leader_state())
    result = partition.append_records_to_leader(records(b"a"), required_acks=1)
    assert result.log_append_time_ms == NOW
    [record] = decode_records(partition.read(0, 1 << 20, from_follower=False).records)
    assert record.timestamp == NOW


def test_a_replaced_topic_config_rules_the_next_append(tmp_path: Path) -> None:
    partition = make_partition(tmp_path)
    partition.make_leader(leader_state())
    partition.append_records_to_leader(records(b"keyless"), required_acks=1)
    partition.config = BrokerConfig.from_properties(
        None, {"log.cleanup.policy": "compact", "log.message.timestamp.type": "LogAppendTime"}
    ).topic_config()
    with pytest.raises(InvalidRecordError):
        partition.append_records_to_leader(records(b"keyless"), required_acks=1)
    keyed = encode_batch([Record(b"v", key=b"k", timestamp=5)])
    result = partition.append_records_to_leader(keyed, required_acks=1)
    assert result.log_append_time_ms == NOW


def test_list_offsets_by_timestamp_stays_below_the_hw_for_consumers(tmp_path: Path) -> None:
    partition = make_partition(tmp_path)
    partition.make_leader(leader_state(isr=(ME, 2), replicas=(ME, 2)))
    partition.append_records_to_leader(records(b"a"), required_acks=1)
    assert partition.offset_for_timestamp(0, from_replica=False) == (-1, -1, -1)
    assert partition.offset_for_timestamp(0, from_replica=True)[1] == 0
    assert partition.offset_for_timestamp(-1, from_replica=False)[1] == 0
    assert partition.offset_for_timestamp(-1, from_replica=True)[1] == 1

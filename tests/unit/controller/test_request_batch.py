"""The request batch: one request per (broker, kind), in LeaderAndIsr, UpdateMetadata,
StopReplica order, stamped with the controller id and epoch."""

from __future__ import annotations

import pytest

from minibroker.controller.context import ControllerContext, ReassignmentContext
from minibroker.controller.request_batch import (
    LEADER_AND_ISR,
    STOP_REPLICA,
    UPDATE_METADATA,
    BatchNotEmptyError,
    ControllerBrokerRequestBatch,
    StopReplicaCallback,
)
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.zk.values import LeaderAndIsr
from tests.unit.controller.fakes import Broker, RecordingSender, make_context

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def setup(
    on_stop_replica_response: StopReplicaCallback | None = None,
) -> tuple[ControllerBrokerRequestBatch, RecordingSender, ControllerContext]:
    ctx = make_context([1, 2, 3], {"a": {0: [1, 2], 1: [2, 3]}, "b": {0: [3, 1]}}, epoch=5)
    ctx.leadership = {
        A0: LeaderAndIsr(1, 3, (1, 2), 4, 7),
        A1: LeaderAndIsr(2, 0, (2, 3), 5, 0),
        B0: LeaderAndIsr(3, 1, (3,), 5, 2),
    }
    sender = RecordingSender()
    return ControllerBrokerRequestBatch(ctx, 9, sender, on_stop_replica_response), sender, ctx


def test_partitions_for_one_broker_go_in_one_leader_and_isr_request() -> None:
    batch, sender, ctx = setup()
    batch.add_leader_and_isr([1, 2], A0, ctx.leadership[A0], [1, 2])
    batch.add_leader_and_isr([2, 3], A1, ctx.leadership[A1], [2, 3], is_new=True)
    batch.send_requests(5)
    kinds = [(s.broker_id, s.api_key) for s in sender.sent]
    assert kinds == [
        (1, LEADER_AND_ISR),
        (2, LEADER_AND_ISR),
        (3, LEADER_AND_ISR),
        (1, UPDATE_METADATA),
        (2, UPDATE_METADATA),
        (3, UPDATE_METADATA),
    ]
    body = sender.to(2, LEADER_AND_ISR)[0]
    assert body["controller_id"] == 9 and body["controller_epoch"] == 5
    assert body["partition_states"] == [
        {
            "topic_name": "a",
            "partition_index": 0,
            "controller_epoch": 4,
            "leader": 1,
            "leader_epoch": 3,
            "isr": [1, 2],
            "zk_version": 7,
            "replicas": [1, 2],
            "adding_replicas": [],
            "removing_replicas": [],
            "is_new": False,
        },
        {
            "topic_name": "a",
            "partition_index": 1,
            "controller_epoch": 5,
            "leader": 2,
            "leader_epoch": 0,
            "isr": [2, 3],
            "zk_version": 0,
            "replicas": [2, 3],
            "adding_replicas": [],
            "removing_replicas": [],
            "is_new": True,
        },
    ]
    assert body["live_leaders"] == [
        {"id": 1, "host": "127.0.0.1", "port": 9001, "rack": None},
        {"id": 2, "host": "127.0.0.1", "port": 9002, "rack": None},
    ]
    assert batch.is_empty()


def test_update_metadata_carries_every_live_broker_and_offline_replicas() -> None:
    batch, sender, ctx = setup()
    ctx.remove_live_brokers([3])
    batch.add_update_metadata([1, 2, 3], [A1])
    batch.send_requests(5)
    assert [s.broker_id for s in sender.sent] == [1, 2]  # 3 is gone: not addressed
    body = sender.to(1, UPDATE_METADATA)[0]
    assert [b["id"] for b in body["live_brokers"]] == [1, 2]
    assert body["live_brokers"][0] == {"id": 1, "host": "127.0.0.1", "port": 9001, "rack": None}
    (state,) = body["partition_states"]
    assert state["offline_replicas"] == [3]
    assert state["leader"] == 2


def test_update_metadata_without_partitions_still_lists_brokers() -> None:
    batch, sender, _ = setup()
    batch.add_update_metadata([2], [])
    batch.send_requests(5)
    (body,) = sender.to(2, UPDATE_METADATA)
    assert body["partition_states"] == [] and len(body["live_brokers"]) == 3


def test_stop_replica_merges_delete_flags_and_gets_the_response_callback() -> None:
    seen: list[tuple[int, int]] = []
    batch, sender, _ = setup(
        lambda broker, req, resp: seen.append((broker, len(req["partition_states"])))
    )
    batch.add_stop_replica([1], A0, delete=True)
    batch.add_stop_replica([1], A0, delete=False)
    batch.add_stop_replica([1], B0, delete=False)
    batch.send_requests(5)
    (sent,) = sender.sent
    assert sent.api_key == STOP_REPLICA
    assert sent.body["partition_states"] == [
        {"topic_name": "a", "partition_index": 0, "leader_epoch": 3, "delete_partition": True},
        {"topic_name": "b", "partition_index": 0, "leader_epoch": 1, "delete_partition": False},
    ]
    assert sent.on_response is not None
    sent.on_response(1, {})
    assert seen == [(1, 2)]


def test_leader_and_isr_names_replicas_being_added_and_removed_by_a_reassignment() -> None:
    batch, sender, ctx = setup()
    ctx.partitions_being_reassigned[A0] = ReassignmentContext((1, 2), (2, 3))
    batch.add_leader_and_isr([3], A0, ctx.leadership[A0], [2, 3, 1])
    batch.send_requests(5)
    state = sender.partitions(3, LEADER_AND_ISR)[A0]
    assert state["adding_replicas"] == [3] and state["removing_replicas"] == [1]


def test_a_replica_created_earlier_in_the_round_stays_new() -> None:
    batch, sender, ctx = setup()
    lai = ctx.leadership[A0]
    batch.add_leader_and_isr([2], A0, lai, [1, 2], is_new=True)
    batch.add_leader_and_isr([2], A0, lai, [1, 2])
    batch.send_requests(5)
    assert sender.partitions(2, LEADER_AND_ISR)[A0]["is_new"] is True


def test_new_batch_refuses_to_drop_unsent_requests() -> None:
    batch, _, _ = setup()
    batch.add_stop_replica([1], A0, delete=False)
    with pytest.raises(BatchNotEmptyError):
        batch.new_batch()
    batch.clear()
    batch.new_batch()


def test_requests_to_unknown_or_dead_brokers_are_dropped() -> None:
    batch, sender, _ = setup()
    batch.add_stop_replica([7, -1], A0, delete=False)
    batch.send_requests(5)
    assert sender.sent == []


def test_stop_replica_for_a_topic_being_deleted_carries_the_delete_epoch() -> None:
    batch, sender, ctx = setup()
    ctx.topics_to_be_deleted.add("a")
    batch.add_stop_replica([1], A0, delete=True)
    batch.send_requests(5)
    assert sender.partitions(1, STOP_REPLICA)[A0]["leader_epoch"] == -2


def test_update_metadata_carries_a_brokers_kafka_listener_when_it_has_one() -> None:
    batch, sender, ctx = setup()
    ctx.add_live_brokers([Broker(2, port=9002, kafka_address=("127.0.0.1", 19002))])
    batch.add_update_metadata([1], [A1])
    batch.send_requests(5)
    brokers = {b["id"]: b for b in sender.to(1, UPDATE_METADATA)[0]["live_brokers"]}
    assert (brokers[2]["kafka_host"], brokers[2]["kafka_port"]) == ("127.0.0.1", 19002)
    assert "kafka_host" not in brokers[1]

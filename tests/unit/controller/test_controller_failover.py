"""A controller that takes over while a broker is dead treats it as if it had seen it
die: its replicas go offline and leave the ISRs, and the leaders are told."""

from __future__ import annotations

from minibroker.controller import events as ev
from minibroker.controller.controller import ControllerConfig, KafkaController
from minibroker.controller.request_batch import LEADER_AND_ISR, STOP_REPLICA
from minibroker.controller.state_machines import PartitionReplica, PartitionState, ReplicaState
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.zk.values import LeaderAndIsr
from tests.unit.controller.fakes import Broker, FakeControllerZk, RecordingChannel

T0, T1, T2 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)


def cluster_with_broker_3_dead() -> tuple[KafkaController, FakeControllerZk, RecordingChannel]:
    """Brokers 1 and 2 registered, 3 gone (it was the controller). Topic t: partition 0
    led by 1, partition 1 led by 3, both with the full ISR the dead broker left behind;
    partition 2 had only broker 3 in its ISR."""
    zk = FakeControllerZk(epoch=4)
    for b in (1, 2):
        zk.brokers[b] = Broker(b, port=9000 + b)
    zk.add_topic("t", {0: [1, 2, 3], 1: [3, 1, 2], 2: [3, 2, 1]})
    zk.znodes[T0] = LeaderAndIsr(1, 5, (1, 2, 3), 4, 7)
    zk.znodes[T1] = LeaderAndIsr(3, 5, (3, 1, 2), 4, 7)
    zk.znodes[T2] = LeaderAndIsr(3, 5, (3,), 4, 7)
    channel = RecordingChannel()
    controller = KafkaController(ControllerConfig(broker_id=1), zk, channel)
    return controller, zk, channel


async def test_failover_drops_a_dead_follower_from_the_isr_and_tells_the_live_replicas() -> None:
    controller, zk, channel = cluster_with_broker_3_dead()

    await controller.process(ev.Startup())

    assert controller.is_active
    assert (zk.znodes[T0].leader, zk.znodes[T0].isr) == (1, (1, 2))
    assert zk.znodes[T0].leader_epoch == 6
    assert zk.znodes[T0].controller_epoch == 5
    for broker in (1, 2):
        state = channel.partitions(broker, LEADER_AND_ISR)[T0]
        assert (state["leader"], state["isr"]) == (1, [1, 2])
    assert controller.context.replica_states[PartitionReplica("t", 0, 3)] is ReplicaState.OFFLINE


async def test_failover_elects_a_live_leader_where_the_dead_broker_led_and_drops_it() -> None:
    controller, zk, channel = cluster_with_broker_3_dead()

    await controller.process(ev.Startup())

    assert (zk.znodes[T1].leader, zk.znodes[T1].isr) == (1, (1, 2))
    assert channel.partitions(2, LEADER_AND_ISR)[T1]["leader"] == 1
    assert controller.context.partition_states[T1] is PartitionState.ONLINE
    assert controller.context.replica_states[PartitionReplica("t", 1, 3)] is ReplicaState.OFFLINE


async def test_failover_keeps_a_dead_broker_that_is_the_last_isr_member() -> None:
    controller, zk, _ = cluster_with_broker_3_dead()

    await controller.process(ev.Startup())

    # No clean election is possible; the ISR keeps the one replica that has every
    # acknowledged record, and the partition waits for it (or an unclean election).
    assert (zk.znodes[T2].leader, zk.znodes[T2].isr) == (-1, (3,))
    assert controller.context.partition_states[T2] is PartitionState.OFFLINE
    assert controller.offline_partitions_count == 1


async def test_failover_sends_nothing_to_the_dead_broker() -> None:
    controller, _, channel = cluster_with_broker_3_dead()

    await controller.process(ev.Startup())

    assert 3 not in {s.broker_id for s in channel.sent}
    assert not channel.to(3, STOP_REPLICA)


async def test_failover_leaves_replicas_of_a_topic_being_deleted_to_the_deletion() -> None:
    controller, zk, _ = cluster_with_broker_3_dead()
    zk.delete_marks.add("t")

    await controller.process(ev.Startup())

    for partition in (0, 1, 2):
        replica = PartitionReplica("t", partition, 3)
        assert controller.context.replica_states[replica] is ReplicaState.DELETION_INELIGIBLE
    assert "t" in controller.context.topics_ineligible_for_deletion

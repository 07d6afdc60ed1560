"""A failed log dir on a live broker, as the controller handles it: the
broker's log dir event notification makes the controller resend LeaderAndIsr for that
broker's replicas, and KAFKA_STORAGE_ERROR answers take exactly those replicas offline.

Against the in-memory ZooKeeper and channel of tests/unit/controller/fakes.py; each test
drives ``controller.process(event)`` as the event loop would."""

from __future__ import annotations

import trio

from minibroker.controller import events as ev
from minibroker.controller.controller import KafkaController
from minibroker.controller.request_batch import LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA
from minibroker.controller.state_machines import PartitionReplica, ReplicaState
from minibroker.protocol.errors import KafkaStorageError, StaleControllerEpochError
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.zk.values import LeaderAndIsr
from tests.unit.controller.fakes import Broker
from tests.unit.controller.test_controller import T0, T1, active_cluster

STORAGE_ERROR = KafkaStorageError.code


def answer(errors: dict[TopicPartition, int]) -> dict[str, object]:
    """A broker's LeaderAndIsr response body."""
    return {
        "error_code": 0,
        "partition_errors": [
            {"topic_name": tp.topic, "partition_index": tp.partition, "error_code": code}
            for tp, code in errors.items()
        ],
    }


async def process_queued(controller: KafkaController) -> None:
    """Run the event loop until everything queued so far (and what it queues) is done."""
    async with trio.open_nursery() as nursery:
        await nursery.start(controller.events.run)
        await controller.events.wait_idle()
        nursery.cancel_scope.cancel()


async def test_a_log_dir_event_resends_leader_and_isr_for_every_replica_of_that_broker() -> None:
    controller, zk, channel = await active_cluster()
    zk.log_dir_events["log_dir_event_0000000000"] = 1
    await controller.process(ev.LogDirEventNotification())
    sent = channel.partitions(1, LEADER_AND_ISR)
    assert set(sent) == {T0, T1}
    assert (sent[T0]["leader"], sent[T1]["leader"]) == (1, 2)  # the current state, resent
    assert channel.to(2, LEADER_AND_ISR) == [] and channel.to(3, LEADER_AND_ISR) == []
    assert zk.log_dir_events == {}  # read once, then deleted
    assert zk.znodes[T0].leader_epoch == 0  # asking is not deciding: nothing written


async def test_leader_and_isr_answers_reach_the_controller_only_through_its_event_queue() -> None:
    controller, zk, channel = await active_cluster()
    zk.log_dir_events["log_dir_event_0000000000"] = 1
    await controller.process(ev.LogDirEventNotification())
    [request] = [s for s in channel.sent if s.broker_id == 1 and s.api_key == LEADER_AND_ISR]
    assert request.on_response is not None
    queued = controller.events.queue_size
    request.on_response(1, answer({T0: STORAGE_ERROR, T1: 0}))  # as the sender task would
    assert controller.context.replicas_on_offline_dirs == {}  # untouched until processed
    assert controller.events.queue_size == queued + 1
    await process_queued(controller)
    assert controller.context.replicas_on_offline_dirs == {1: {T0}}
    assert zk.znodes[T0].leader == 2


async def test_a_storage_error_takes_the_replica_offline_and_elects_a_leader_from_the_isr() -> None:
    controller, zk, channel = await active_cluster()
    await controller.process(ev.LeaderAndIsrResponseReceived(1, {T0: STORAGE_ERROR, T1: 0}))
    # t-0 was led by 1: the next live ISR member leads, and 1 leaves the ISR.
    assert (zk.znodes[T0].leader, zk.znodes[T0].isr) == (2, (2, 3))
    assert zk.znodes[T0].leader_epoch == 1
    assert channel.partitions(3, LEADER_AND_ISR)[T0]["leader"] == 2
    assert T0 not in channel.partitions(1, LEADER_AND_ISR)  # not told to follow from a dead dir
    assert channel.partitions(1, STOP_REPLICA)[T0]["delete_partition"] is False
    assert channel.partitions(2, UPDATE_METADATA)[T0]["offline_replicas"] == [1]
    replica = PartitionReplica("t", 0, 1)
    assert controller.context.replica_states[replica] is ReplicaState.OFFLINE
    # Only that replica: broker 1 is still up and keeps the rest (it still follows t-1).
    assert controller.context.live_brokers.keys() >= {1}  # broker 1 is still registered
    assert zk.znodes[T1] == LeaderAndIsr(2, 0, (2, 3, 1), 0, 0)
    assert controller.context.replica_states[PartitionReplica("t", 1, 1)] is ReplicaState.ONLINE
    assert controller.offline_partitions_count == 0


async def test_a_follower_on_a_failed_dir_only_leaves_the_isr() -> None:
    controller, zk, channel = await active_cluster()
    await controller.process(ev.LeaderAndIsrResponseReceived(1, {T1: STORAGE_ERROR}))
    assert (zk.znodes[T1].leader, zk.znodes[T1].isr) == (2, (2, 3))
    assert channel.partitions(2, LEADER_AND_ISR)[T1]["isr"] == [2, 3]
    assert zk.znodes[T0].leader == 1  # its other partition is untouched


async def test_a_replica_on_a_failed_dir_is_never_elected_while_its_broker_lives() -> None:
    controller, zk, _ = await active_cluster()
    await controller.process(ev.LeaderAndIsrResponseReceived(2, {T0: STORAGE_ERROR}))
    assert zk.znodes[T0].isr == (1, 3)
    del zk.brokers[1]
    await controller.process(ev.BrokerChange())
    assert zk.znodes[T0].leader == 3  # not 2, although broker 2 is alive and first in AR


async def test_the_only_isr_member_on_a_failed_dir_leaves_the_partition_offline() -> None:
    controller, zk, _ = await active_cluster()
    zk.znodes[T0] = LeaderAndIsr(1, 0, (1,), 0, 0)
    controller.context.leadership[T0] = zk.znodes[T0]
    await controller.process(ev.LeaderAndIsrResponseReceived(1, {T0: STORAGE_ERROR}))
    assert (zk.znodes[T0].leader, zk.znodes[T0].isr) == (-1, (1,))  # clean election only
    assert controller.offline_partitions_count == 1


async def test_a_log_dir_event_about_a_dead_broker_changes_nothing() -> None:
    controller, zk, channel = await active_cluster()
    del zk.brokers[3]
    await controller.process(ev.BrokerChange())
    channel.sent.clear()
    before = dict(zk.znodes)
    zk.log_dir_events["log_dir_event_0000000004"] = 3
    await controller.process(ev.LogDirEventNotification())
    assert channel.sent == [] and zk.znodes == before
    assert zk.log_dir_events == {}


async def test_answers_other_than_storage_errors_leave_replicas_alone() -> None:
    controller, zk, channel = await active_cluster()
    stale = StaleControllerEpochError.code  # what a broker says to a resent, same-epoch state
    await controller.process(ev.LeaderAndIsrResponseReceived(1, {T0: stale, T1: 0}))
    await controller.process(ev.LeaderAndIsrResponseReceived(2, {}, error_code=stale))
    assert channel.sent == [] and controller.context.replicas_on_offline_dirs == {}
    assert zk.znodes[T0].leader == 1


async def test_a_broker_that_registers_again_may_lead_its_once_failed_replicas() -> None:
    controller, zk, _ = await active_cluster()
    await controller.process(ev.LeaderAndIsrResponseReceived(1, {T0: STORAGE_ERROR}))
    assert controller.context.replicas_on_offline_dirs == {1: {T0}}
    zk.brokers[1] = Broker(1, port=9001, epoch=8)  # restarted: its dirs were rescanned
    await controller.process(ev.BrokerChange())
    assert controller.context.replicas_on_offline_dirs == {}
    assert controller.context.is_replica_online(1, T0)


async def test_a_new_controller_drops_log_dir_events_older_than_its_failover() -> None:
    controller, zk, channel = await active_cluster()
    assert channel.to(1, LEADER_AND_ISR) == []
    zk.log_dir_events["log_dir_event_0000000000"] = 1
    await controller.process(ev.SessionExpired())
    zk.controller_id = None
    await controller.process(ev.Reelect())
    # Failover resends every replica's state anyway; its answers carry the failures.
    assert set(channel.partitions(1, LEADER_AND_ISR)) == {T0, T1}
    assert zk.log_dir_events == {}

"""KafkaController's event handlers against an in-memory ZooKeeper and broker channel.

Each test drives ``controller.process(event)`` directly, as the event loop would, and
checks what was written to ZooKeeper and which requests went to which broker."""

from __future__ import annotations

import pytest
import trio

from minibroker.controller import events as ev
from minibroker.controller.controller import ControllerConfig, KafkaController
from minibroker.controller.controller_zk import event_for_watch
from minibroker.controller.event_manager import ControllerEventManager as EventManagerFor
from minibroker.controller.request_batch import LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA
from minibroker.controller.state_machines import PartitionReplica, PartitionState, ReplicaState
from minibroker.protocol.errors import (
    ElectionNotNeededError,
    EligibleLeadersNotAvailableError,
    NotControllerError,
    StaleBrokerEpochError,
    UnknownTopicOrPartitionError,
)
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.zk.types import StateChange, WatchEvent, WatchType, ZkEvent, ZkState
from minibroker.zk.values import LeaderAndIsr
from tests.unit.controller.fakes import Broker, FakeControllerZk, RecordingChannel

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def cluster(
    brokers: list[int] = [1, 2, 3],  # noqa: B006 - never mutated
    *,
    unclean: bool = False,
) -> tuple[KafkaController, FakeControllerZk, RecordingChannel]:
    """Brokers registered, topic t = {0: [1, 2, 3], 1: [2, 3, 1]} led by AR[0], full ISR."""
    zk = FakeControllerZk()
    for b in brokers:
        zk.brokers[b] = Broker(b, port=9000 + b)
    zk.add_topic("t", {0: [1, 2, 3], 1: [2, 3, 1]})
    zk.znodes[T0] = LeaderAndIsr(1, 0, (1, 2, 3), 0, 0)
    zk.znodes[T1] = LeaderAndIsr(2, 0, (2, 3, 1), 0, 0)
    channel = RecordingChannel()
    config = ControllerConfig(broker_id=1, unclean_leader_election_enable=unclean)
    return KafkaController(config, zk, channel), zk, channel


async def active_cluster(
    brokers: list[int] = [1, 2, 3],  # noqa: B006 - never mutated
    **kwargs: bool,
) -> tuple[KafkaController, FakeControllerZk, RecordingChannel]:
    controller, zk, channel = cluster(brokers, **kwargs)
    await controller.process(ev.Startup())
    channel.sent.clear()
    return controller, zk, channel


async def test_first_broker_becomes_controller_and_tells_every_broker_the_metadata() -> None:
    controller, zk, channel = cluster()
    await controller.process(ev.Startup())
    assert controller.is_active and zk.controller_id == 1
    assert controller.context.epoch == 1
    for b in (1, 2, 3):
        assert set(channel.partitions(b, UPDATE_METADATA)) == {T0, T1}
    assert controller.context.partition_states == {
        T0: PartitionState.ONLINE,
        T1: PartitionState.ONLINE,
    }
    assert controller.offline_partitions_count == 0


async def test_a_broker_that_loses_the_election_only_records_the_winner() -> None:
    controller, zk, channel = cluster()
    zk.controller_id = 2
    await controller.process(ev.Startup())
    assert not controller.is_active and controller.active_controller_id == 2
    assert channel.sent == []


async def test_non_controller_answers_controlled_shutdown_with_not_controller() -> None:
    controller, zk, _ = cluster()
    zk.controller_id = 2
    await controller.process(ev.Startup())
    request = ev.ControlledShutdown(3, 0)
    await controller.process(request)
    with pytest.raises(NotControllerError):
        await request.reply.wait()


async def test_new_topic_gets_leaders_from_its_first_live_replicas() -> None:
    controller, zk, channel = await active_cluster()
    zk.add_topic("n", {0: [3, 1], 1: [1, 2]})
    await controller.process(ev.TopicChange())
    assert zk.znodes[TopicPartition("n", 0)] == LeaderAndIsr(3, 0, (3, 1), 1, 0)
    assert zk.znodes[TopicPartition("n", 1)] == LeaderAndIsr(1, 0, (1, 2), 1, 0)
    state = channel.partitions(3, LEADER_AND_ISR)[TopicPartition("n", 0)]
    assert (state["leader"], state["is_new"]) == (3, True)
    assert TopicPartition("n", 1) in channel.partitions(2, UPDATE_METADATA)


async def test_dead_leader_is_replaced_from_the_isr_and_dropped_from_it() -> None:
    controller, zk, channel = await active_cluster()
    del zk.brokers[1]
    await controller.process(ev.BrokerChange())
    assert (zk.znodes[T0].leader, zk.znodes[T0].isr) == (2, (2, 3))
    assert zk.znodes[T0].leader_epoch == 1
    assert zk.znodes[T1].isr == (2, 3)  # follower 1 dropped from the ISR
    assert channel.partitions(3, LEADER_AND_ISR)[T0]["leader"] == 2
    assert controller.context.replica_states[PartitionReplica("t", 0, 1)] is ReplicaState.OFFLINE
    assert {1}.isdisjoint(channel.brokers)  # no queue left for broker 1


async def test_partition_stays_offline_without_live_isr_unless_unclean_is_enabled() -> None:
    for unclean, expected_leader in ((False, -1), (True, 3)):
        controller, zk, _ = await active_cluster(unclean=unclean)
        zk.znodes[T0] = LeaderAndIsr(1, 0, (1,), 0, 0)
        controller.context.leadership[T0] = zk.znodes[T0]
        del zk.brokers[1]
        del zk.brokers[2]
        await controller.process(ev.BrokerChange())
        assert zk.znodes[T0].leader == expected_leader, unclean
        assert controller.unclean_elections == (1 if unclean else 0)
        assert (T0 in controller.context.offline_partitions()) is not unclean


async def test_returning_broker_gets_full_metadata_and_its_replicas_and_leads_offline_ones() -> (
    None
):
    controller, zk, channel = await active_cluster()
    zk.znodes[T0] = LeaderAndIsr(1, 0, (1,), 0, 0)
    controller.context.leadership[T0] = zk.znodes[T0]
    del zk.brokers[1]
    await controller.process(ev.BrokerChange())
    assert T0 in controller.context.offline_partitions()
    channel.sent.clear()
    zk.brokers[1] = Broker(1, port=9001, epoch=7)
    await controller.process(ev.BrokerChange())
    assert set(channel.partitions(1, UPDATE_METADATA)) == {T0, T1}
    assert zk.znodes[T0].leader == 1
    assert set(channel.partitions(1, LEADER_AND_ISR)) == {T0, T1}
    assert controller.context.offline_partitions() == set()


async def test_controlled_shutdown_of_another_registration_moves_nothing() -> None:
    controller, zk, _ = await active_cluster()
    before = dict(zk.znodes)
    for wrong in (-1, 1, 99):  # -1 is no epoch: always checked, never "don't check"
        request = ev.ControlledShutdown(1, wrong)
        await controller.process(request)
        with pytest.raises(StaleBrokerEpochError):
            await request.reply.wait()
    assert zk.znodes == before
    assert 1 not in controller.context.shutting_down_broker_ids


async def test_controlled_shutdown_moves_leadership_off_and_stops_followers() -> None:
    controller, zk, channel = await active_cluster()
    request = ev.ControlledShutdown(1, 0)
    await controller.process(request)
    assert await request.reply.wait() == set()
    assert (zk.znodes[T0].leader, zk.znodes[T0].isr) == (2, (2, 3))
    assert zk.znodes[T1].isr == (2, 3)
    assert channel.partitions(1, STOP_REPLICA)[T1]["delete_partition"] is False
    assert controller.context.shutting_down_broker_ids >= {1}


async def test_deleting_a_topic_stops_and_deletes_every_replica_then_its_znodes() -> None:
    controller, zk, channel = await active_cluster()
    zk.delete_marks.add("t")
    await controller.process(ev.TopicDeletion())
    assert channel.partitions(2, UPDATE_METADATA)[T0]["leader"] == -2
    for b in (1, 2, 3):
        stops = channel.partitions(b, STOP_REPLICA)
        assert {tp for tp, s in stops.items() if s["delete_partition"]} == {T0, T1}
    assert "t" in zk.topics  # not before every broker confirmed
    async with trio.open_nursery() as nursery:
        await nursery.start(controller.events.run)
        for sent in [s for s in channel.sent if s.api_key == STOP_REPLICA and s.on_response]:
            assert sent.on_response is not None
            sent.on_response(sent.broker_id, {"error_code": 0, "partition_errors": []})
        await controller.events.wait_idle()
        nursery.cancel_scope.cancel()
    assert "t" not in zk.topics and "t" not in zk.delete_marks
    assert T0 not in zk.znodes
    assert controller.context.all_topics == set()


async def test_replica_whose_deletion_failed_blocks_the_topic_until_its_broker_returns() -> None:
    controller, zk, _ = await active_cluster()
    zk.delete_marks.add("t")
    await controller.process(ev.TopicDeletion())
    deleted = frozenset({T0, T1})
    await controller.process(ev.TopicDeletionStopReplicaResponse(1, deleted, {}, error_code=56))
    for b in (2, 3):
        await controller.process(ev.TopicDeletionStopReplicaResponse(b, deleted, {}))
    assert "t" in zk.topics and "t" in controller.context.topics_ineligible_for_deletion
    assert controller.context.replica_states[PartitionReplica("t", 0, 1)] is (
        ReplicaState.DELETION_INELIGIBLE
    )


async def test_reassignment_moves_replicas_and_leadership_in_two_phases() -> None:
    controller, zk, channel = await active_cluster([1, 2, 3, 4])
    zk.reassignments[T0] = (2, 4)
    await controller.process(ev.PartitionReassignment())
    # Phase one: AR = RAR + (OAR - RAR), the new replica starts as a follower.
    assert zk.topics["t"].partitions[0] == (2, 4, 1, 3)
    assert zk.topics["t"].adding_replicas == {0: (4,)}
    assert zk.topics["t"].removing_replicas == {0: (1, 3)}
    assert channel.partitions(4, LEADER_AND_ISR)[T0]["is_new"] is True
    assert T0 in zk.watched_states
    # The leader adds 4 to the ISR once it caught up; the state znode watch fires.
    current = zk.znodes[T0]
    zk.znodes[T0] = LeaderAndIsr(
        current.leader, current.leader_epoch, (1, 2, 3, 4), 1, current.zk_version + 1
    )
    channel.sent.clear()
    await controller.process(ev.PartitionReassignmentIsrChange(T0))
    final: tuple[int, ...] = zk.topics["t"].partitions[0]
    assert final == (2, 4)
    assert zk.topics["t"].adding_replicas == {} and zk.topics["t"].removing_replicas == {}
    assert zk.znodes[T0].leader == 2 and set(zk.znodes[T0].isr) <= {2, 4}
    assert channel.partitions(1, STOP_REPLICA)[T0]["delete_partition"] is True
    assert channel.partitions(3, STOP_REPLICA)[T0]["delete_partition"] is True
    assert zk.reassignments == {}
    assert controller.context.partitions_being_reassigned == {}
    assert controller.context.replicas_for(T0) == (2, 4)


async def test_reassignment_waits_while_the_new_replica_is_not_in_the_isr() -> None:
    controller, zk, _ = await active_cluster([1, 2, 3, 4])
    zk.reassignments[T0] = (2, 4)
    await controller.process(ev.PartitionReassignment())
    await controller.process(ev.PartitionReassignmentIsrChange(T0))  # our own epoch bump
    assert zk.topics["t"].partitions[0] == (2, 4, 1, 3)
    assert T0 in controller.context.partitions_being_reassigned


async def test_list_and_cancel_reassignments() -> None:
    controller, _, _ = await active_cluster([1, 2, 3, 4])
    alter = ev.ApiPartitionReassignment({T0: [2, 4], T1: None})
    await controller.process(alter)
    results = await alter.reply.wait()
    assert results[T0] is None and type(results[T1]).__name__ == "NoReassignmentInProgressError"
    listing = ev.ListPartitionReassignments()
    await controller.process(listing)
    assert (await listing.reply.wait()) == {T0: ([2, 4, 1, 3], [4], [1, 3])}


async def test_preferred_election_returns_leadership_to_the_first_replica() -> None:
    controller, zk, _ = await active_cluster()
    zk.znodes[T0] = LeaderAndIsr(2, 3, (2, 1, 3), 1, 4)
    controller.context.leadership[T0] = zk.znodes[T0]
    request = ev.PreferredReplicaElection(frozenset({T0, T1}), ev.Reply())
    await controller.process(request)
    assert request.reply is not None
    results = await request.reply.wait()
    assert results[T0] is None and isinstance(results[T1], ElectionNotNeededError)
    assert zk.znodes[T0].leader == 1


async def test_preferred_election_requested_in_zookeeper_runs_and_clears_the_request() -> None:
    controller, zk, _ = await active_cluster()
    zk.znodes[T0] = LeaderAndIsr(2, 3, (2, 1, 3), 1, 4)
    controller.context.leadership[T0] = zk.znodes[T0]
    zk.preferred = {T0}
    await controller.process(ev.PreferredReplicaElection(from_zk=True))
    assert zk.znodes[T0].leader == 1 and zk.preferred == set()


async def test_unclean_election_gives_an_offline_partition_a_leader_from_outside_the_isr() -> None:
    controller, zk, channel = await active_cluster()  # unclean.leader.election.enable false
    zk.znodes[T0] = LeaderAndIsr(1, 4, (1,), 1, 6)
    controller.context.leadership[T0] = zk.znodes[T0]
    del zk.brokers[1]
    await controller.process(ev.BrokerChange())
    assert zk.znodes[T0].leader == -1
    channel.sent.clear()
    request = ev.UncleanLeaderElection(frozenset({T0, T1}))
    await controller.process(request)
    results = await request.reply.wait()
    assert results[T0] is None and isinstance(results[T1], ElectionNotNeededError)
    elected = zk.znodes[T0]
    assert (elected.leader, elected.isr) == (2, (2,))
    assert elected.leader_epoch > 4
    assert controller.unclean_elections == 1
    assert T0 not in controller.context.offline_partitions()
    assert channel.partitions(2, LEADER_AND_ISR)[T0]["leader"] == 2
    assert channel.partitions(3, UPDATE_METADATA)[T0]["leader"] == 2


async def test_unclean_election_answers_why_a_partition_got_no_leader() -> None:
    controller, zk, _ = await active_cluster()
    for broker_id in (1, 2, 3):
        del zk.brokers[broker_id]
    await controller.process(ev.BrokerChange())
    request = ev.UncleanLeaderElection(frozenset({T0, TopicPartition("nope", 0)}))
    await controller.process(request)
    results = await request.reply.wait()
    assert isinstance(results[T0], EligibleLeadersNotAvailableError)
    assert isinstance(results[TopicPartition("nope", 0)], UnknownTopicOrPartitionError)


async def test_auto_rebalance_moves_leaders_of_an_imbalanced_broker() -> None:
    controller, zk, _ = await active_cluster()
    zk.znodes[T0] = LeaderAndIsr(2, 3, (2, 1, 3), 1, 4)
    controller.context.leadership[T0] = zk.znodes[T0]
    await controller.process(ev.AutoPreferredLeaderBalance())
    assert zk.znodes[T0].leader == 1


async def test_isr_change_notification_refreshes_metadata_everywhere() -> None:
    controller, zk, channel = await active_cluster()
    zk.znodes[T0] = LeaderAndIsr(1, 0, (1, 2), 1, 1)
    zk.isr_notifications["isr_change_0000000001"] = {T0}
    await controller.process(ev.IsrChangeNotification())
    for b in (1, 2, 3):
        assert channel.partitions(b, UPDATE_METADATA)[T0]["isr"] == [1, 2]
    assert zk.isr_notifications == {}


async def test_fenced_controller_resigns() -> None:
    controller, zk, channel = await active_cluster()
    zk.fenced = True
    zk.controller_id = 2
    del zk.brokers[2]
    await controller.process(ev.BrokerChange())
    assert not controller.is_active
    assert controller.active_controller_id == 2
    assert channel.brokers == set() and controller.context.live_brokers == {}


async def test_losing_the_controller_znode_to_another_broker_resigns() -> None:
    controller, zk, _ = await active_cluster()
    zk.controller_id = 3
    await controller.process(ev.ControllerChange())
    assert not controller.is_active and controller.active_controller_id == 3


async def test_session_expiry_resigns_and_the_new_session_reelects() -> None:
    controller, zk, _ = await active_cluster()
    await controller.process(ev.SessionExpired())
    assert not controller.is_active
    zk.controller_id = None  # the ephemeral went with the session
    await controller.process(ev.Reelect())
    assert controller.is_active and controller.context.epoch == 2


@pytest.mark.parametrize(
    ("kind", "path", "expected"),
    [
        (WatchType.DELETED, "/controller", ev.Reelect()),
        (WatchType.CREATED, "/controller", ev.ControllerChange()),
        (WatchType.CHILD, "/brokers/ids", ev.BrokerChange()),
        (WatchType.CHILD, "/brokers/topics", ev.TopicChange()),
        (WatchType.CHANGED, "/brokers/topics/t", ev.PartitionModifications("t")),
        (
            WatchType.CHANGED,
            "/brokers/topics/t/partitions/3/state",
            ev.PartitionReassignmentIsrChange(TopicPartition("t", 3)),
        ),
        (WatchType.CHILD, "/admin/delete_topics", ev.TopicDeletion()),
        (WatchType.CREATED, "/admin/reassign_partitions", ev.PartitionReassignment()),
        (WatchType.DELETED, "/admin/reassign_partitions", ev.PartitionReassignment()),
        (
            WatchType.DELETED,
            "/admin/preferred_replica_election",
            ev.PreferredReplicaElection(from_zk=True),
        ),
        (WatchType.DELETED, "/brokers/topics/t", None),
        (
            WatchType.CREATED,
            "/admin/preferred_replica_election",
            ev.PreferredReplicaElection(from_zk=True),
        ),
        (WatchType.CHILD, "/isr_change_notification", ev.IsrChangeNotification()),
        (WatchType.CHANGED, "/config/topics/t", None),
        (WatchType.CHILD, "/config/changes", ev.TopicConfigChange()),
        (WatchType.CHILD, "/log_dir_event_notification", ev.LogDirEventNotification()),
    ],
)
def test_watch_firings_become_controller_events(
    kind: WatchType, path: str, expected: ev.ControllerEvent | None
) -> None:
    assert event_for_watch(WatchEvent(kind, path)) == expected


async def test_a_broker_that_re_registers_is_treated_as_failed_then_started() -> None:
    controller, zk, channel = await active_cluster()
    zk.brokers[1] = Broker(1, port=9001, epoch=5)  # same id, new registration
    await controller.process(ev.BrokerChange())
    # Its leadership moved away while it was "down", and it got the full state back.
    assert zk.znodes[T0].leader == 2
    assert set(channel.partitions(1, UPDATE_METADATA)) == {T0, T1}
    assert set(channel.partitions(1, LEADER_AND_ISR)) == {T0, T1}
    assert controller.context.live_broker_ids == {1, 2, 3}


async def test_partitions_added_to_a_topic_are_brought_online() -> None:
    controller, zk, _ = await active_cluster()
    zk.topics["t"].partitions[2] = (3, 1, 2)
    await controller.process(ev.PartitionModifications("t"))
    assert zk.znodes[TopicPartition("t", 2)].leader == 3
    assert controller.context.partition_states[TopicPartition("t", 2)] is PartitionState.ONLINE


async def test_a_reconnect_re_reads_everything_and_catches_up() -> None:
    controller, zk, _ = await active_cluster()
    zk.add_topic("late", {0: [2]})
    await controller.process(ev.ZkReconnected())
    assert controller.events.queue_size > 0
    async with trio.open_nursery() as nursery:
        await nursery.start(controller.events.run)
        await controller.events.wait_idle()
        nursery.cancel_scope.cancel()
    assert zk.znodes[TopicPartition("late", 0)].leader == 2


async def test_failover_resumes_a_reassignment_recorded_in_the_topic_znode() -> None:
    controller, zk, _ = cluster([1, 2, 3, 4])
    # A previous controller had started moving t-0 from [1, 2, 3] to [2, 4].
    zk.topics["t"].partitions[0] = (2, 4, 1, 3)
    zk.topics["t"].adding_replicas[0] = (4,)
    zk.topics["t"].removing_replicas[0] = (1, 3)
    zk.znodes[T0] = LeaderAndIsr(1, 0, (1, 2, 3, 4), 0, 0)
    await controller.process(ev.Startup())
    assert zk.topics["t"].partitions[0] == (2, 4)
    assert zk.topics["t"].adding_replicas == {}
    assert zk.znodes[T0].leader == 2


async def test_topic_deletion_waits_for_a_dead_replica_and_finishes_when_it_returns(
    caplog: pytest.LogCaptureFixture,
) -> None:
    controller, zk, channel = await active_cluster()
    del zk.brokers[3]
    await controller.process(ev.BrokerChange())
    zk.delete_marks.add("t")
    await controller.process(ev.TopicDeletion())
    deleted = frozenset({T0, T1})
    for b in (1, 2):
        await controller.process(ev.TopicDeletionStopReplicaResponse(b, deleted, {}))
    assert "t" in zk.topics  # broker 3 still holds replicas
    zk.brokers[3] = Broker(3, port=9003, epoch=9)
    channel.sent.clear()
    await controller.process(ev.BrokerChange())
    assert {
        tp for tp, s in channel.partitions(3, STOP_REPLICA).items() if s["delete_partition"]
    } == {
        T0,
        T1,
    }
    await controller.process(ev.TopicDeletionStopReplicaResponse(3, deleted, {}))
    assert "t" not in zk.topics and controller.context.all_topics == set()
    assert "illegal transition" not in caplog.text


async def test_a_dropped_zookeeper_connection_mid_event_is_logged_and_survived(
    caplog: pytest.LogCaptureFixture,
) -> None:
    controller, zk, _ = await active_cluster()
    zk.disconnected = True
    request = ev.ControlledShutdown(2, 0)
    await controller.process(ev.BrokerChange())
    assert "ZooKeeper unavailable" in caplog.text
    assert controller.is_active
    zk.disconnected = False
    del zk.brokers[3]
    await controller.process(ev.ZkReconnected())
    await controller.process(ev.BrokerChange())  # what the reconnect queues
    assert 3 not in controller.context.live_brokers
    await controller.process(request)
    assert await request.reply.wait() == set()


async def test_a_leftover_controller_znode_of_our_own_is_given_up_and_won_again() -> None:
    controller, zk, _ = cluster()
    zk.controller_id = 1  # ours, from before a failed failover
    await controller.process(ev.ZkReconnected())
    assert controller.is_active and zk.controller_id == 1


async def test_a_failed_failover_resigns_and_frees_the_controller_znode() -> None:
    controller, zk, _ = cluster()

    async def broken(*, watch: bool) -> set[str]:
        raise ValueError("corrupt znode")

    zk.get_all_topics = broken  # type: ignore[method-assign]
    await controller.process(ev.Startup())
    assert not controller.is_active and zk.controller_id is None


async def test_zookeeper_session_events_become_controller_events() -> None:
    controller, _, _ = cluster()
    seen: list[ev.ControllerEvent] = []

    async def record(event: ev.ControllerEvent) -> None:
        seen.append(event)

    controller.events = EventManagerFor(record)
    send, receive = trio.open_memory_channel[ZkEvent](10)
    for zk_event in (
        WatchEvent(WatchType.CHILD, "/brokers/ids"),
        StateChange(ZkState.SUSPENDED, 7),
        StateChange(ZkState.CONNECTED, 7, new_session=False),
        StateChange(ZkState.EXPIRED, 7),
        StateChange(ZkState.CONNECTED, 8, new_session=True),
    ):
        send.send_nowait(zk_event)
    send.close()
    await controller.dispatch_zk_events(receive)  # queue everything, then process
    async with trio.open_nursery() as nursery:
        await nursery.start(controller.events.run)
        await controller.events.wait_idle()
        nursery.cancel_scope.cancel()
    # The expiry drops what was queued before it (BrokerChange, ZkReconnected).
    assert seen == [ev.SessionExpired(), ev.Reelect()]


async def test_enabling_unclean_election_on_a_topic_elects_its_offline_partitions() -> None:
    controller, zk, _ = await active_cluster()
    zk.znodes[T0] = LeaderAndIsr(1, 0, (1,), 0, 0)
    controller.context.leadership[T0] = zk.znodes[T0]
    zk.config_changes["config_change_0000000000"] = "t"  # a change not about unclean
    del zk.brokers[1]
    await controller.process(ev.BrokerChange())
    assert zk.znodes[T0].leader == -1
    await controller.process(ev.TopicConfigChange())  # nothing new yet
    assert zk.znodes[T0].leader == -1
    zk.unclean_overrides["t"] = True
    zk.config_changes["config_change_0000000001"] = "t"
    await controller.process(ev.TopicConfigChange())
    assert zk.znodes[T0].leader == 2 and controller.unclean_elections == 1

"""KafkaController: election, failover, and the event loop that runs every handler.

How this works: every broker runs one KafkaController. ``run`` starts the event loop
(one queue, one consumer; controller/event_manager.py), the broker channel, and a task
that turns ZooKeeper watch firings into events; then it queues Startup. The first
broker to create /controller (bumping /controller_epoch in the same transaction) is the
active controller: it loads the ControllerContext from ZooKeeper (onControllerFailover)
and from then on reacts to events. The others only watch /controller.

Every handler runs alone (the event loop guarantees it), re-reads what the event names
from ZooKeeper, decides through the state machines (ZooKeeper first, requests second)
and returns. A ControllerMovedError anywhere means another controller fenced us: we
resign (forget the context, drop broker connections) and watch /controller again.

This module holds election, failover and resignation; the handlers live with what they
handle, each given only the pieces it uses (the context, the ZooKeeper view, the request
batch, the state machines, the event queue):

* controller/broker_changes.py: brokers joining, dying, re-registering; controlled
  shutdown;
* controller/topic_changes.py: new topics and partitions, topic config changes;
* controller/topic_deletion.py, controller/reassignment.py;
* controller/leadership.py: ISR change notifications, preferred and unclean elections;
* controller/replica_failure.py: failed log dirs, and the offline-replica path a dead
  broker shares.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import trio

from minibroker.controller import events as ev
from minibroker.controller.broker_changes import BrokerChangeHandler, BrokerChannel
from minibroker.controller.context import ControllerContext
from minibroker.controller.controller_zk import ControllerZk, event_for_watch
from minibroker.controller.event_manager import ControllerEventManager
from minibroker.controller.leadership import LeadershipManager
from minibroker.controller.partition_state_machine import PartitionStateMachine
from minibroker.controller.reassignment import ReassignmentManager
from minibroker.controller.replica_failure import ReplicaFailureHandler
from minibroker.controller.replica_state_machine import ReplicaStateMachine
from minibroker.controller.request_batch import ControllerBrokerRequestBatch
from minibroker.controller.state_machines import PartitionReplica, ReplicaState
from minibroker.controller.topic_changes import TopicChangeHandler, UncleanElectionPolicy
from minibroker.controller.topic_deletion import TopicDeletionManager
from minibroker.protocol.api import Body
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.zk.types import StateChange, WatchEvent, ZkError, ZkEvent, ZkState
from minibroker.zk.values import ControllerMovedError

log = logging.getLogger("minibroker.controller")

ELECTION_ANSWERS_WAIT_S = 3.0
"""How long a failover waits for the brokers to answer its elections before going on
with the rest (taking dead replicas out of ISRs, resending every partition's state)."""


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    broker_id: int
    unclean_leader_election_enable: bool = False
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_s: float = 300.0
    """Kafka's leader.imbalance.check.interval.seconds."""
    leader_imbalance_per_broker_percentage: int = 10
    """Rebalance a broker's partitions once more than this share is led elsewhere."""
    delete_topic_enable: bool = True


class KafkaController:
    def __init__(self, config: ControllerConfig, zk: ControllerZk, channel: BrokerChannel) -> None:
        self.config = config
        self.zk = zk
        self.channel = channel
        self.context = ControllerContext()
        self.events = ControllerEventManager(self.process)
        self.batch = ControllerBrokerRequestBatch(
            self.context,
            config.broker_id,
            channel,
            self._on_stop_replica_response,
            self._on_leader_and_isr_response,
        )
        self.unclean = UncleanElectionPolicy(config.unclean_leader_election_enable)
        self.partition_state_machine = PartitionStateMachine(
            self.context,
            zk,
            self.batch,
            unclean_allowed=self.unclean.allowed,
            on_unclean_election=self._count_unclean_election,
            on_elections=self._count_elections,
        )
        self.replica_state_machine = ReplicaStateMachine(self.context, zk, self.batch)
        ctx, batch = self.context, self.batch
        psm, rsm = self.partition_state_machine, self.replica_state_machine
        self.topic_deletion = TopicDeletionManager(
            ctx, zk, batch, psm, rsm, delete_topic_enable=config.delete_topic_enable
        )
        self.replica_failure = ReplicaFailureHandler(
            ctx,
            zk,
            batch,
            psm,
            rsm,
            fail_replica_deletion=self.topic_deletion.fail_replica_deletion,
        )
        self.reassignment = ReassignmentManager(
            ctx,
            zk,
            batch,
            psm,
            rsm,
            self.events,
            on_reassignment_done=self.topic_deletion.resume_for_topic,
        )
        self.leadership = LeadershipManager(
            ctx,
            zk,
            batch,
            psm,
            imbalance_per_broker_percentage=config.leader_imbalance_per_broker_percentage,
        )
        self.topic_changes = TopicChangeHandler(
            ctx,
            zk,
            psm,
            rsm,
            self.unclean,
            note_recorded_reassignment=self.reassignment.note_recorded_reassignment,
        )
        self.broker_changes = BrokerChangeHandler(
            ctx,
            zk,
            channel,
            batch,
            psm,
            rsm,
            self.replica_failure,
            resume_for_brokers=(
                self.reassignment.resume_for_brokers,
                self.topic_deletion.resume_for_brokers,
            ),
        )
        self.active_controller_id: int | None = None
        self.unclean_elections = 0
        self.leader_elections = 0
        self.leader_election_seconds = 0.0
        self._active = False
        self._nursery: trio.Nursery | None = None
        self._rebalance_scope: trio.CancelScope | None = None
        self._handlers: dict[type[ev.ControllerEvent], Callable[[Any], Awaitable[None]]] = {
            ev.Startup: self._on_startup,
            ev.ControllerChange: self._on_controller_change,
            ev.Reelect: self._on_reelect,
            ev.SessionExpired: self._on_session_expired,
            ev.ZkReconnected: self._on_zk_reconnected,
            ev.BrokerChange: self.broker_changes.on_broker_change,
            ev.TopicChange: self.topic_changes.on_topic_change,
            ev.PartitionModifications: self.topic_changes.on_partition_modifications,
            ev.TopicConfigChange: self.topic_changes.on_topic_config_change,
            ev.TopicDeletion: self.topic_deletion.on_topic_deletion_event,
            ev.TopicDeletionStopReplicaResponse: self.topic_deletion.on_stop_replica_response,
            ev.PartitionReassignment: self.reassignment.on_zk_reassignment,
            ev.ApiPartitionReassignment: self.reassignment.on_api_reassignment,
            ev.ListPartitionReassignments: self.reassignment.on_list_reassignments,
            ev.PartitionReassignmentIsrChange: self.reassignment.on_isr_change,
            ev.IsrChangeNotification: self.leadership.on_isr_change_notification,
            ev.PreferredReplicaElection: self.leadership.on_preferred_replica_election,
            ev.UncleanLeaderElection: self.leadership.on_unclean_leader_election,
            ev.AutoPreferredLeaderBalance: self.leadership.on_auto_leader_balance,
            ev.ControlledShutdown: self.broker_changes.on_controlled_shutdown,
            ev.LogDirEventNotification: self.replica_failure.on_log_dir_event_notification,
            ev.LeaderAndIsrResponseReceived: self.replica_failure.on_leader_and_isr_response,
        }

    # -- running ------------------------------------------------------------------------

    @property
    def is_active(self) -> bool:
        return self._active

    @property
    def offline_partitions_count(self) -> int:
        return len(self.context.offline_partitions()) if self._active else 0

    async def run(
        self,
        *,
        zk_events: trio.MemoryReceiveChannel[ZkEvent] | None = None,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Run until cancelled. ``zk_events`` is the ZooKeeper client's subscription."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await nursery.start(self.channel.run)
            await nursery.start(self.events.run)
            if zk_events is not None:
                nursery.start_soon(self.dispatch_zk_events, zk_events)
            self.events.put(ev.Startup())
            task_status.started()

    async def dispatch_zk_events(self, zk_events: trio.MemoryReceiveChannel[ZkEvent]) -> None:
        """Turn the ZooKeeper client's events into controller events (``run`` starts
        this when given ``zk_events``): watch firings map through event_for_watch; an
        expired session drops everything queued; a new session re-elects; a reconnect
        to the same session re-reads."""
        async for zk_event in zk_events:
            if isinstance(zk_event, WatchEvent):
                event = event_for_watch(zk_event)
                if event is not None:
                    self.events.put(event)
            elif isinstance(zk_event, StateChange):
                if zk_event.state is ZkState.EXPIRED:
                    self.events.clear_and_put(ev.SessionExpired())
                elif zk_event.state is ZkState.CONNECTED:
                    self.events.put(ev.Reelect() if zk_event.new_session else ev.ZkReconnected())

    async def process(self, event: ev.ControllerEvent) -> None:
        """Handle one event (called by the event loop only)."""
        if not self._active and not isinstance(
            event,
            (ev.Startup, ev.ControllerChange, ev.Reelect, ev.SessionExpired, ev.ZkReconnected),
        ):
            event.preempt()
            return
        try:
            await self._handlers[type(event)](event)
        except ControllerMovedError as exc:
            log.warning(
                "controller %d fenced while handling %r: %s", self.config.broker_id, event, exc
            )
            event.preempt()
            self._resign()
            self.active_controller_id = await self.zk.get_controller_id(watch=True)
        except ZkError as exc:
            # The connection dropped mid-handler. Nothing half-done is lost: ZooKeeper
            # holds every decision made so far, and the reconnect replays the watches
            # (ZkReconnected), so the event's work is redone then.
            log.warning("ZooKeeper unavailable while handling %r: %s", event, exc)
            event.preempt()

    # -- election -------------------------------------------------------------------------

    async def _on_startup(self, event: ev.Startup) -> None:
        await self._elect()

    async def _elect(self) -> None:
        me = self.config.broker_id
        self.active_controller_id = await self.zk.get_controller_id(watch=True)
        if self.active_controller_id == me and not self._active:
            # Our own ephemeral from before a reconnect: give it up and compete again.
            await self.zk.resign_controller(me)
            self.active_controller_id = await self.zk.get_controller_id(watch=True)
        if self.active_controller_id is not None:
            return
        try:
            epoch, epoch_zk_version = await self.zk.register_controller(me)
        except ControllerMovedError:
            self.active_controller_id = await self.zk.get_controller_id(watch=True)
            return
        self.active_controller_id = me
        log.info("broker %d is the controller, epoch %d", me, epoch)
        try:
            await self._on_controller_failover(epoch, epoch_zk_version)
        except ControllerMovedError:
            raise
        except Exception:
            log.exception("controller failover failed; resigning so another broker takes over")
            self._resign()
            await self.zk.resign_controller(me)

    async def _on_controller_change(self, event: ev.ControllerChange) -> None:
        me = self.config.broker_id
        self.active_controller_id = await self.zk.get_controller_id(watch=True)
        if self._active and self.active_controller_id != me:
            self._resign()
        elif not self._active and self.active_controller_id in (None, me):
            await self._elect()  # vacant, or a leftover of our own failed failover

    async def _on_reelect(self, event: ev.Reelect) -> None:
        if self._active:
            self._resign()
        await self._elect()

    async def _on_session_expired(self, event: ev.SessionExpired) -> None:
        # The ephemeral /controller is gone with the session; the new session's
        # CONNECTED (new_session) queues a Reelect.
        self._resign()
        self.active_controller_id = None

    async def _on_zk_reconnected(self, event: ev.ZkReconnected) -> None:
        self.active_controller_id = await self.zk.get_controller_id(watch=True)
        if not self._active:
            if self.active_controller_id in (None, self.config.broker_id):
                await self._elect()
            return
        if self.active_controller_id != self.config.broker_id:
            self._resign()
            return
        # Re-arm every watch and catch up with whatever changed while we were away.
        for catch_up in (
            ev.BrokerChange(),
            ev.TopicChange(),
            ev.TopicDeletion(),
            ev.IsrChangeNotification(),
            ev.PartitionReassignment(),
            ev.LogDirEventNotification(),
        ):
            self.events.put(catch_up)
        for topic in self.context.all_topics:
            self.events.put(ev.PartitionModifications(topic))

    async def _on_controller_failover(self, epoch: int, epoch_zk_version: int) -> None:
        ctx = self.context
        marks = [trio.current_time()]  # when each step ended, for the last log line
        ctx.reset()
        ctx.epoch, ctx.epoch_zk_version = epoch, epoch_zk_version
        self._active = True
        brokers = await self.zk.get_live_brokers(watch=True)
        ctx.set_live_brokers(brokers.values())
        for broker in brokers.values():
            self.channel.add_broker(broker)
        topics = await self.zk.get_all_topics(watch=True)
        await self.topic_changes.load_topics(topics)
        ctx.update_leadership(await self.zk.read_partition_states(list(ctx.all_partitions())))
        await self.zk.get_isr_change_notifications(watch=True)
        self.events.put(ev.IsrChangeNotification())  # ones written while nobody was controller
        # Failover sends LeaderAndIsr for every replica below, and the answers report
        # failed log dirs: older notifications carry nothing more (Kafka drops them too).
        await self.zk.delete_log_dir_event_notifications(
            await self.zk.get_log_dir_event_notifications(watch=True)
        )
        await self.topic_changes.skip_config_changes_so_far()
        await self.topic_deletion.initialize(await self.zk.get_topics_to_delete(watch=True))
        self.replica_state_machine.initialize_states()
        self.partition_state_machine.initialize_states()
        marks.append(trio.current_time())
        # Leaders for the partitions whose leader is gone first (their UpdateMetadata
        # names the live brokers), the dead brokers out of the ISRs next, and only then
        # every partition's metadata and every live replica's state again (Kafka sends
        # those first): with 10,000 partitions, each broker's taking in 20,000 partition
        # states it already had, before the elections, held them up by seconds.
        await self.partition_state_machine.trigger_online_partition_state_change()
        # Until the brokers have the new leaders (bounded: a slow broker must not hold
        # the rest back long). This broker's share is handled on this event loop, and the
        # steps below kept it waiting: 2.1 s at 10,000 partitions against 0.2 s for the
        # other broker (see docs/performance.md, "Many partitions").
        with trio.move_on_after(ELECTION_ANSWERS_WAIT_S):
            await self.channel.all_answered()
        marks.append(trio.current_time())
        await self._take_dead_replicas_offline()
        marks.append(trio.current_time())
        self.batch.new_batch()
        self.batch.add_update_metadata(ctx.live_or_shutting_down_broker_ids, ctx.leadership)
        self.batch.send_requests(ctx.epoch)
        online = {r for r, s in ctx.replica_states.items() if s is ReplicaState.ONLINE}
        await self.replica_state_machine.handle_state_changes(online, ReplicaState.ONLINE)
        await self.reassignment.resume_after_failover()
        if await self.zk.get_preferred_replica_election(watch=True):
            self.events.put(ev.PreferredReplicaElection(from_zk=True))
        await self.topic_deletion.resume()
        if self.config.auto_leader_rebalance_enable and self._nursery is not None:
            self._rebalance_scope = trio.CancelScope()
            self._nursery.start_soon(self._rebalance_timer, self._rebalance_scope)
        marks.append(trio.current_time())
        log.info(
            "controller %d failover done: %d brokers, %d topics, %d partitions; %.2f s"
            " (state loaded %.2f, leaders elected %.2f, dead replicas offline %.2f, the"
            " rest %.2f)",
            self.config.broker_id,
            len(ctx.live_brokers),
            len(ctx.assignments),
            len(ctx.leadership),
            marks[-1] - marks[0],
            *(later - earlier for earlier, later in itertools.pairwise(marks)),
        )

    async def _take_dead_replicas_offline(self) -> None:
        """Move the replicas on brokers that are not registered to OfflineReplica, as
        if this controller had seen those brokers die (Kafka's replica state machine
        does this when it starts). Their leaders were just re-elected; here they leave
        the ISR of the partitions they followed (never its last member), and those
        partitions' leaders hear the new ISR, so acks=all writes stop waiting for them
        now instead of after replica.lag.time.max.ms. Replicas of topics being deleted
        stay ReplicaDeletionIneligible: deletion waits for their brokers."""
        ctx = self.context
        live, failed_dirs = ctx.live_brokers, ctx.replicas_on_offline_dirs
        dead = {  # is_replica_online(include_shutting_down=True), inlined: 30,000 of them
            PartitionReplica(topic, partition, replica)
            for topic, partitions in ctx.assignments.items()
            if topic not in ctx.topics_to_be_deleted
            for partition, replicas in partitions.items()
            for replica in replicas
            if replica not in live
            or (replica in failed_dirs and TopicPartition(topic, partition) in failed_dirs[replica])
        }
        await self.replica_state_machine.handle_state_changes(dead, ReplicaState.OFFLINE)

    def _resign(self) -> None:
        if self._active:
            log.info("broker %d resigns as controller", self.config.broker_id)
        self._active = False
        if self._rebalance_scope is not None:
            self._rebalance_scope.cancel()
            self._rebalance_scope = None
        self.channel.remove_all()
        self.batch.clear()
        self.context.reset()
        self.topic_changes.reset()

    async def _rebalance_timer(self, scope: trio.CancelScope) -> None:
        with scope:
            while True:
                await trio.sleep(self.config.leader_imbalance_check_interval_s)
                self.events.put(ev.AutoPreferredLeaderBalance())

    # -- counters (read by the metrics) ---------------------------------------------------

    def _count_unclean_election(self, tp: TopicPartition) -> None:
        self.unclean_elections += 1

    def _count_elections(self, count: int, seconds: float) -> None:
        self.leader_elections += count
        self.leader_election_seconds += seconds

    # -- responses ----------------------------------------------------------------------

    def _on_leader_and_isr_response(self, broker_id: int, response: Body) -> None:
        """Runs in the channel's sender task: hand the answer to the event loop."""
        errors = {
            TopicPartition(e["topic_name"], e["partition_index"]): int(e.get("error_code", 0))
            for e in response.get("partition_errors", [])
        }
        code = int(response.get("error_code", 0))
        self.events.put(ev.LeaderAndIsrResponseReceived(broker_id, errors, code))

    def _on_stop_replica_response(
        self, broker_id: int, request: Mapping[str, Any], response: Body
    ) -> None:
        """Runs in the channel's sender task: hand the answer to the event loop."""
        deleted = frozenset(
            TopicPartition(s["topic_name"], s["partition_index"])
            for s in request["partition_states"]
            if s["delete_partition"]
        )
        if not deleted:
            return
        errors = {
            TopicPartition(e["topic_name"], e["partition_index"]): int(e.get("error_code", 0))
            for e in response.get("partition_errors", [])
        }
        top = int(response.get("error_code", 0))
        self.events.put(ev.TopicDeletionStopReplicaResponse(broker_id, deleted, errors, top))

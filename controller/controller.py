"""KafkaController: election, failover, and the handlers of every controller event.

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

Handlers follow Kafka 2.x's KafkaController, step by step:

* broker change: new brokers -> onBrokerStartup, dead -> onBrokerFailure, re-registered
  (new znode epoch) -> failure then startup;
* controlled shutdown: leadership moves to an ISR member that stays, followers are
  stopped and dropped from the ISR; the reply lists what the broker still leads;
* topic change / partition modifications: new partitions New -> Online.

ISR change notifications and preferred-leader elections live in
controller/leadership.py, topic deletion in controller/topic_deletion.py,
reassignment in controller/reassignment.py, and failed log dirs (with the offline-replica
path a dead broker shares) in controller/replica_failure.py.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import trio

from minibroker.controller import events as ev
from minibroker.controller.context import (
    ControllerContext,
    ControllerMovedError,
    PartitionReplica,
    TopicPartition,
)
from minibroker.controller.controller_zk import ControllerZk, event_for_watch
from minibroker.controller.event_manager import ControllerEventManager
from minibroker.controller.leadership import LeadershipManager
from minibroker.controller.partition_state_machine import PartitionStateMachine
from minibroker.controller.reassignment import ReassignmentManager
from minibroker.controller.replica_failure import ReplicaFailureHandler
from minibroker.controller.replica_state_machine import ReplicaStateMachine
from minibroker.controller.request_batch import Body, ControllerBrokerRequestBatch, RequestSender
from minibroker.controller.state_machines import ElectionStrategy, PartitionState, ReplicaState
from minibroker.controller.topic_deletion import TopicDeletionManager
from minibroker.protocol.errors import (
    BrokerNotAvailableError,
    KafkaError,
)
from minibroker.zk.types import StateChange, WatchEvent, ZkError, ZkEvent, ZkState

log = logging.getLogger("minibroker.controller")


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


class BrokerChannel(RequestSender, Protocol):
    """The ControllerChannelManager as the controller uses it."""

    async def run(self, *, task_status: trio.TaskStatus[None] = ...) -> None: ...
    def add_broker(self, broker: Any) -> None: ...
    def remove_broker(self, broker_id: int) -> None: ...
    def remove_all(self) -> None: ...


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
        self.partition_state_machine = PartitionStateMachine(
            self.context,
            zk,
            self.batch,
            unclean_allowed=self._unclean_allowed,
            on_unclean_election=self._count_unclean_election,
            on_elections=self._count_elections,
        )
        self.replica_state_machine = ReplicaStateMachine(self.context, zk, self.batch)
        machines = (self.context, zk, self.batch, self.partition_state_machine)
        self.topic_deletion = TopicDeletionManager(
            *machines, self.replica_state_machine, delete_topic_enable=config.delete_topic_enable
        )
        self.replica_failure = ReplicaFailureHandler(
            *machines,
            self.replica_state_machine,
            fail_replica_deletion=self.topic_deletion.fail_replica_deletion,
        )
        self.reassignment = ReassignmentManager(
            *machines,
            self.replica_state_machine,
            self.events,
            on_reassignment_done=self.topic_deletion.resume_for_topic,
        )
        self.leadership = LeadershipManager(
            *machines,
            imbalance_per_broker_percentage=config.leader_imbalance_per_broker_percentage,
        )
        self.active_controller_id: int | None = None
        self.unclean_elections = 0
        self.leader_elections = 0
        self.leader_election_seconds = 0.0
        self._active = False
        self._unclean_overrides: dict[str, bool] = {}
        self._last_config_change = ""
        self._nursery: trio.Nursery | None = None
        self._rebalance_scope: trio.CancelScope | None = None
        self._handlers: dict[type[ev.ControllerEvent], Callable[[Any], Awaitable[None]]] = {
            ev.Startup: self._on_startup,
            ev.ControllerChange: self._on_controller_change,
            ev.Reelect: self._on_reelect,
            ev.SessionExpired: self._on_session_expired,
            ev.ZkReconnected: self._on_zk_reconnected,
            ev.BrokerChange: self._on_broker_change,
            ev.TopicChange: self._on_topic_change,
            ev.PartitionModifications: self._on_partition_modifications,
            ev.TopicConfigChange: self._on_topic_config_change,
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
            ev.ControlledShutdown: self._on_controlled_shutdown,
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
        ctx.reset()
        ctx.epoch, ctx.epoch_zk_version = epoch, epoch_zk_version
        self._active = True
        brokers = await self.zk.get_live_brokers(watch=True)
        ctx.set_live_brokers(brokers.values())
        for broker in brokers.values():
            self.channel.add_broker(broker)
        topics = await self.zk.get_all_topics(watch=True)
        await self._load_topics(topics)
        ctx.update_leadership(await self.zk.read_partition_states(list(ctx.all_partitions())))
        await self.zk.get_isr_change_notifications(watch=True)
        self.events.put(ev.IsrChangeNotification())  # ones written while nobody was controller
        # Failover sends LeaderAndIsr for every replica below, and the answers report
        # failed log dirs: older notifications carry nothing more (Kafka drops them too).
        await self.zk.delete_log_dir_event_notifications(
            await self.zk.get_log_dir_event_notifications(watch=True)
        )
        # Topic configs were just read; only later config changes matter.
        self._last_config_change = max(await self.zk.get_config_changes(watch=True), default="")
        await self.topic_deletion.initialize(await self.zk.get_topics_to_delete(watch=True))
        self.batch.new_batch()
        self.batch.add_update_metadata(ctx.live_or_shutting_down_broker_ids, ctx.leadership)
        self.batch.send_requests(ctx.epoch)
        self.replica_state_machine.initialize_states()
        online = {r for r, s in ctx.replica_states.items() if s is ReplicaState.ONLINE}
        await self.replica_state_machine.handle_state_changes(online, ReplicaState.ONLINE)
        self.partition_state_machine.initialize_states()
        await self.partition_state_machine.trigger_online_partition_state_change()
        await self._take_dead_replicas_offline()
        await self.reassignment.resume_after_failover()
        if await self.zk.get_preferred_replica_election(watch=True):
            self.events.put(ev.PreferredReplicaElection(from_zk=True))
        await self.topic_deletion.resume()
        if self.config.auto_leader_rebalance_enable and self._nursery is not None:
            self._rebalance_scope = trio.CancelScope()
            self._nursery.start_soon(self._rebalance_timer, self._rebalance_scope)
        log.info(
            "controller %d failover done: %d brokers, %d topics",
            self.config.broker_id,
            len(ctx.live_brokers),
            len(ctx.assignments),
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
        dead = {
            replica
            for replica in ctx.replicas_for_partitions(ctx.all_partitions())
            if replica.topic not in ctx.topics_to_be_deleted
            and not ctx.is_replica_online(
                replica.replica, replica.topic_partition, include_shutting_down=True
            )
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
        self._unclean_overrides.clear()
        self._last_config_change = ""

    async def _rebalance_timer(self, scope: trio.CancelScope) -> None:
        with scope:
            while True:
                await trio.sleep(self.config.leader_imbalance_check_interval_s)
                self.events.put(ev.AutoPreferredLeaderBalance())

    # -- topics ---------------------------------------------------------------------------

    async def _load_topics(self, topics: Iterable[str]) -> set[TopicPartition]:
        """Read the assignments of ``topics`` (arming their watches) into the context;
        returns their partitions."""
        topics = sorted(topics)
        assignments = await self.zk.get_topic_assignments(topics, watch=True)
        loaded: set[TopicPartition] = set()
        for topic, replicas in assignments.items():
            for partition, ar in replicas.partitions.items():
                tp = TopicPartition(topic, partition)
                self.context.set_assignment(tp, ar)
                loaded.add(tp)
            self.reassignment.note_recorded_reassignment(topic, replicas)
            override = await self.zk.get_unclean_leader_election_override(topic)
            if override is not None:
                self._unclean_overrides[topic] = override
        return loaded

    async def _on_topic_change(self, event: ev.TopicChange) -> None:
        topics = await self.zk.get_all_topics(watch=True)
        known = self.context.all_topics
        for gone in known - topics:
            self.context.remove_topic(gone)
        new_partitions = await self._load_topics(topics - known)
        if new_partitions:
            await self.on_new_partition_creation(new_partitions)

    async def _on_partition_modifications(self, event: ev.PartitionModifications) -> None:
        topic = event.topic
        assignments = await self.zk.get_topic_assignments([topic], watch=True)
        replicas = assignments.get(topic)
        if replicas is None or topic in self.context.topics_to_be_deleted:
            return
        added = {
            TopicPartition(topic, p): ar
            for p, ar in replicas.partitions.items()
            if not self.context.replicas_for(TopicPartition(topic, p))
        }
        for tp, ar in added.items():
            self.context.set_assignment(tp, ar)
        if added:
            await self.on_new_partition_creation(set(added))

    async def on_new_partition_creation(self, partitions: set[TopicPartition]) -> None:
        replicas = self.context.replicas_for_partitions(partitions)
        await self.partition_state_machine.handle_state_changes(partitions, PartitionState.NEW)
        await self.replica_state_machine.handle_state_changes(replicas, ReplicaState.NEW)
        await self.partition_state_machine.handle_state_changes(partitions, PartitionState.ONLINE)
        await self.replica_state_machine.handle_state_changes(replicas, ReplicaState.ONLINE)

    async def _on_topic_config_change(self, event: ev.TopicConfigChange) -> None:
        """A topic that now allows unclean election gets its offline partitions elected
        at once (Kafka's TopicUncleanLeaderElectionEnable)."""
        names = await self.zk.get_config_changes(watch=True)
        fresh = [n for n in names if n > self._last_config_change]
        if not fresh:
            return
        self._last_config_change = fresh[-1]
        newly_unclean: set[str] = set()
        for topic in await self.zk.read_config_change_topics(fresh):
            if topic not in self.context.assignments:
                continue
            override = await self.zk.get_unclean_leader_election_override(topic)
            was_allowed = self._unclean_allowed(topic)
            if override is None:
                self._unclean_overrides.pop(topic, None)
            else:
                self._unclean_overrides[topic] = override
            if self._unclean_allowed(topic) and not was_allowed:
                newly_unclean.add(topic)
        offline = {
            tp
            for tp in self.context.partitions_in_states([PartitionState.OFFLINE])
            if tp.topic in newly_unclean
        }
        if offline:
            await self.partition_state_machine.handle_state_changes(offline, PartitionState.ONLINE)

    def _unclean_allowed(self, topic: str) -> bool:
        return self._unclean_overrides.get(topic, self.config.unclean_leader_election_enable)

    def _count_unclean_election(self, tp: TopicPartition) -> None:
        self.unclean_elections += 1

    def _count_elections(self, count: int, seconds: float) -> None:
        self.leader_elections += count
        self.leader_election_seconds += seconds

    # -- brokers --------------------------------------------------------------------------

    async def _on_broker_change(self, event: ev.BrokerChange) -> None:
        ctx = self.context
        current = await self.zk.get_live_brokers(watch=True)
        known = dict(ctx.live_brokers)
        new = sorted(set(current) - set(known))
        dead = sorted(set(known) - set(current))
        bounced = sorted(
            b
            for b in set(current) & set(known)
            if getattr(known[b], "epoch", -1) != getattr(current[b], "epoch", -1)
        )
        for broker_id in dead + bounced:
            self.channel.remove_broker(broker_id)
        for broker_id in new + bounced:
            self.channel.add_broker(current[broker_id])
        if new:
            ctx.add_live_brokers(current[b] for b in new)
            await self.on_broker_startup(new)
        if bounced:
            ctx.remove_live_brokers(bounced)
            await self.on_broker_failure(bounced)
            ctx.add_live_brokers(current[b] for b in bounced)
            await self.on_broker_startup(bounced)
        if dead:
            ctx.remove_live_brokers(dead)
            await self.on_broker_failure(dead)

    async def on_broker_startup(self, new_brokers: list[int]) -> None:
        ctx = self.context
        log.info("brokers started: %s", new_brokers)
        existing = ctx.live_or_shutting_down_broker_ids - set(new_brokers)
        self.batch.new_batch()
        self.batch.add_update_metadata(existing, [])
        self.batch.add_update_metadata(new_brokers, ctx.leadership)
        self.batch.send_requests(ctx.epoch)
        replicas = {
            r
            for r in ctx.replicas_on_brokers(new_brokers)
            if r.topic not in ctx.topics_to_be_deleted
        }
        await self.replica_state_machine.handle_state_changes(replicas, ReplicaState.ONLINE)
        await self.partition_state_machine.trigger_online_partition_state_change()
        await self.reassignment.resume_for_brokers(set(new_brokers))
        await self.topic_deletion.resume_for_brokers(set(new_brokers))

    async def on_broker_failure(self, dead_brokers: list[int]) -> None:
        ctx = self.context
        log.info("brokers failed: %s", dead_brokers)
        dead = set(dead_brokers)
        ctx.shutting_down_broker_ids -= dead
        await self.replica_failure.on_replicas_become_offline(ctx.replicas_on_brokers(dead))

    async def _on_controlled_shutdown(self, event: ev.ControlledShutdown) -> None:
        try:
            event.reply.set(await self.shutdown_broker(event.broker_id))
        except KafkaError as exc:
            event.reply.fail(exc)

    async def shutdown_broker(self, broker_id: int) -> set[TopicPartition]:
        """Move leadership off ``broker_id`` and stop its follower replicas; returns the
        replicated partitions it still leads (the broker asks again while any remain)."""
        ctx = self.context
        if broker_id not in ctx.live_brokers:
            raise BrokerNotAvailableError(f"broker {broker_id} is not registered")
        ctx.shutting_down_broker_ids.add(broker_id)
        to_act_on = [
            tp
            for tp in sorted(ctx.partitions_on_broker(broker_id))
            if len(ctx.replicas_for(tp)) > 1
            and tp in ctx.leadership
            and tp.topic not in ctx.topics_to_be_deleted
        ]
        led = [tp for tp in to_act_on if ctx.leadership[tp].leader == broker_id]
        followers = [tp for tp in to_act_on if ctx.leadership[tp].leader != broker_id]
        await self.partition_state_machine.handle_state_changes(
            led, PartitionState.ONLINE, ElectionStrategy.CONTROLLED_SHUTDOWN
        )
        self.batch.new_batch()
        for tp in followers:
            self.batch.add_stop_replica([broker_id], tp, delete=False)
        self.batch.send_requests(ctx.epoch)
        await self.replica_state_machine.handle_state_changes(
            [PartitionReplica(tp.topic, tp.partition, broker_id) for tp in followers],
            ReplicaState.OFFLINE,
        )
        return {tp for tp in ctx.partitions_led_by(broker_id) if len(ctx.replicas_for(tp)) > 1}

    # -- responses ----------------------------------------------------------------------

    def _on_leader_and_isr_response(self, broker_id: int, response: Body) -> None:
        """Runs in the channel's sender task: hand the answer to the event loop."""
        errors = {
            TopicPartition(e["topic_name"], e["partition_index"]): int(e.get("error_code", 0))
            for e in response.get("partition_errors", [])
        }
        code = int(response.get("error_code", 0))
        self.events.put(ev.LeaderAndIsrResponseReceived(broker_id, errors, code))

    def _on_stop_replica_response(self, broker_id: int, request: Body, response: Body) -> None:
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

"""Replicas that go offline while their broker may stay up: failed log dirs.

How this works (Kafka 2.x's log dir failure route, KIP-112):

1. A broker whose log dir fails takes it offline itself (its replicas there answer
   KAFKA_STORAGE_ERROR from then on) and writes a sequential znode
   ``/log_dir_event_notification/log_dir_event_<seq>`` naming itself. The broker does
   not know which of its replicas the controller still thinks are healthy, so it only
   says "look at me".
2. The child watch on /log_dir_event_notification becomes a LogDirEventNotification
   event. Its handler reads and deletes the notifications and moves every replica of
   each named live broker to OnlineReplica, which resends that replica's LeaderAndIsr
   (Kafka's onBrokerLogDirFailure). A notification about a broker that is no longer
   registered needs nothing: its replicas went offline with it, and it gets the full
   state again when it registers.
3. Every LeaderAndIsr answer comes back through the channel as a
   LeaderAndIsrResponseReceived event (the channel's sender task only queues it; the
   event loop alone touches the context). KAFKA_STORAGE_ERROR for a partition marks
   that broker's replica as on an offline dir (``ControllerContext.
   replicas_on_offline_dirs``); an answer without error clears the mark (Kafka's
   processLeaderAndIsrResponseReceived). Other codes (a stale epoch for a resent
   state, for instance) say nothing about the replica's dir and change nothing.
4. Newly offline replicas go through ``on_replicas_become_offline``, the same path as
   a dead broker's: partitions they led go OfflinePartition and are elected again
   (the offline selector sees such a replica as not live for that partition only),
   then the replicas go OfflineReplica (StopReplica without delete, out of the ISR).

The mark is cleared when the broker registers again (it rescans its dirs on start-up),
or when a later notification's LeaderAndIsr finds the replica healthy: a corrupt replica
(broker/logdirs/corruption.py) goes through the same route, and reports again once repaired.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable

from minibroker.controller import events as ev
from minibroker.controller.context import ControllerContext
from minibroker.controller.controller_zk import ControllerZk
from minibroker.controller.partition_state_machine import PartitionStateMachine
from minibroker.controller.replica_state_machine import ReplicaStateMachine
from minibroker.controller.request_batch import ControllerBrokerRequestBatch
from minibroker.controller.state_machines import PartitionReplica, PartitionState, ReplicaState
from minibroker.protocol.errors import NONE, KafkaStorageError, error_for_code

log = logging.getLogger("minibroker.controller.state_change")


class ReplicaFailureHandler:
    def __init__(
        self,
        context: ControllerContext,
        zk: ControllerZk,
        batch: ControllerBrokerRequestBatch,
        partition_state_machine: PartitionStateMachine,
        replica_state_machine: ReplicaStateMachine,
        *,
        fail_replica_deletion: Callable[[Iterable[PartitionReplica]], Awaitable[None]],
    ) -> None:
        """``fail_replica_deletion`` takes the offline replicas of topics being deleted
        (their deletion cannot proceed now)."""
        self._ctx = context
        self._zk = zk
        self._batch = batch
        self._psm = partition_state_machine
        self._rsm = replica_state_machine
        self._fail_replica_deletion = fail_replica_deletion

    # -- shared with broker failure -------------------------------------------------------

    async def on_replicas_become_offline(self, replicas: Iterable[PartitionReplica]) -> None:
        """Elect new leaders where ``replicas`` led, then take them offline (Kafka's
        onReplicasBecomeOffline). Replicas of topics being deleted fail their deletion
        instead of going through OfflineReplica."""
        ctx = self._ctx
        offline = set(replicas)
        for_deletion = {r for r in offline if r.topic in ctx.topics_to_be_deleted}
        leaderless = ctx.partitions_with_offline_leader(offline)
        await self._psm.handle_state_changes(leaderless, PartitionState.OFFLINE)
        await self._psm.trigger_online_partition_state_change()
        await self._rsm.handle_state_changes(offline - for_deletion, ReplicaState.OFFLINE)
        await self._fail_replica_deletion(for_deletion)
        if not leaderless:
            # No leadership changed, but every broker must learn what is offline now.
            self._batch.new_batch()
            self._batch.add_update_metadata(ctx.live_or_shutting_down_broker_ids, [])
            self._batch.send_requests(ctx.epoch)

    # -- log dir event notifications ------------------------------------------------------

    async def on_log_dir_event_notification(self, event: ev.LogDirEventNotification) -> None:
        names = await self._zk.get_log_dir_event_notifications(watch=True)
        if not names:
            return
        try:
            brokers = await self._zk.read_log_dir_event_notifications(names)
            await self.on_broker_log_dir_failure(brokers)
        finally:
            # Handled or not, a notification is read once: the LeaderAndIsr answers
            # carry the facts, and a new failure writes a new notification.
            await self._zk.delete_log_dir_event_notifications(names)

    async def on_broker_log_dir_failure(self, broker_ids: Iterable[int]) -> None:
        """Resend LeaderAndIsr for every replica of the live ``broker_ids``; their
        answers say which replicas are on a failed dir."""
        ctx = self._ctx
        live = sorted(set(broker_ids) & ctx.live_or_shutting_down_broker_ids)
        if not live:
            return
        log.info("log dir failure reported by brokers %s", live)
        # Replicas already known to be offline are asked again too: a broker also
        # reports a corrupt replica it has since repaired (broker/logdirs/corruption.py), and
        # a healthy answer brings it back.
        replicas = {
            r for r in ctx.replicas_on_brokers(live) if r.topic not in ctx.topics_to_be_deleted
        }
        await self._rsm.handle_state_changes(replicas, ReplicaState.ONLINE)

    # -- LeaderAndIsr answers -------------------------------------------------------------

    async def on_leader_and_isr_response(self, event: ev.LeaderAndIsrResponseReceived) -> None:
        ctx = self._ctx
        broker_id = event.broker_id
        if event.error_code != NONE:
            log.error(
                "broker %d answered LeaderAndIsr with %s",
                broker_id,
                error_for_code(event.error_code).name,
            )
            return
        if broker_id not in ctx.live_brokers:
            return  # an answer from before the broker died or re-registered
        failed = {
            tp
            for tp, code in event.errors.items()
            if code == KafkaStorageError.code and broker_id in ctx.replicas_for(tp)
        }
        healthy = {tp for tp, code in event.errors.items() if code == NONE}
        previous = ctx.replicas_on_offline_dirs.get(broker_id, set())
        current = (previous - healthy) | failed
        if current:
            ctx.replicas_on_offline_dirs[broker_id] = current
        else:
            ctx.replicas_on_offline_dirs.pop(broker_id, None)
        newly_offline = current - previous
        if previous - current:
            # Replicas back from offline (a repaired corrupt replica) may be the only
            # eligible leader of a partition that has none.
            await self._psm.trigger_online_partition_state_change()
        if newly_offline:
            log.warning(
                "replicas on broker %d are on a failed log dir: %s",
                broker_id,
                ", ".join(map(str, sorted(newly_offline))),
            )
            await self.on_replicas_become_offline(
                PartitionReplica(tp.topic, tp.partition, broker_id) for tp in newly_offline
            )

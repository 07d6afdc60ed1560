"""TopicDeletionManager: deletes topics marked under /admin/delete_topics.

How this works (Kafka's TopicDeletionManager): a marked topic is queued; brokers get
UpdateMetadata with leader -2 for its partitions (clients stop using them), the
partitions go Offline -> NonExistent, and every replica goes Offline ->
ReplicaDeletionStarted, which sends StopReplica(delete=True): the broker renames the log
to ``-delete`` and removes it. Each broker's answer moves its replicas to
ReplicaDeletionSuccessful or, on error, ReplicaDeletionIneligible. When every replica
succeeded, the topic's znodes and deletion mark are removed and the controller forgets
it.

A replica on a dead broker cannot be deleted: it is marked Ineligible and the topic
waits. Deletion resumes when such a broker comes back (onBrokerStartup), and a topic
with a reassignment in progress waits for it to finish. With
``delete.topic.enable=false`` marks are removed and nothing is deleted.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from minibroker.controller.context import PartitionReplica
from minibroker.controller.events import TopicDeletion, TopicDeletionStopReplicaResponse
from minibroker.controller.state_machines import PartitionState, ReplicaState

if TYPE_CHECKING:
    from minibroker.controller.controller import KafkaController

log = logging.getLogger("minibroker.controller.topic_deletion")

R = ReplicaState


class TopicDeletionManager:
    def __init__(self, controller: KafkaController) -> None:
        self._controller = controller

    async def initialize(self, marked: set[str]) -> None:
        """On failover: queue the marked topics that exist; drop marks of the others."""
        ctx = self._controller.context
        zk = self._controller.zk
        if not self._controller.config.delete_topic_enable:
            await zk.delete_topic_deletion_marks(marked)
            return
        await zk.delete_topic_deletion_marks(marked - ctx.all_topics)
        self._queue(marked & ctx.all_topics)

    def _queue(self, topics: set[str]) -> None:
        ctx = self._controller.context
        ctx.topics_to_be_deleted |= topics
        reassigning = {tp.topic for tp in ctx.partitions_being_reassigned}
        ctx.topics_ineligible_for_deletion |= topics & reassigning

    async def on_topic_deletion_event(self, event: TopicDeletion) -> None:
        ctx = self._controller.context
        zk = self._controller.zk
        marked = await zk.get_topics_to_delete(watch=True)
        if not self._controller.config.delete_topic_enable:
            await zk.delete_topic_deletion_marks(marked)
            return
        await zk.delete_topic_deletion_marks(marked - ctx.all_topics)
        new = (marked & ctx.all_topics) - ctx.topics_to_be_deleted
        if new:
            log.info("topics queued for deletion: %s", sorted(new))
            self._queue(new)
            await self.resume()

    async def resume_for_brokers(self, broker_ids: set[int]) -> None:
        ctx = self._controller.context
        topics = {r.topic for r in ctx.replicas_on_brokers(broker_ids)} & ctx.topics_to_be_deleted
        if topics:
            ctx.topics_ineligible_for_deletion -= topics
            await self.resume()

    async def resume_for_topic(self, topic: str) -> None:
        ctx = self._controller.context
        if topic in ctx.topics_to_be_deleted:
            if not any(tp.topic == topic for tp in ctx.partitions_being_reassigned):
                ctx.topics_ineligible_for_deletion.discard(topic)
            await self.resume()

    async def resume(self) -> None:
        """Advance every queued topic as far as it can go now."""
        ctx = self._controller.context
        rsm = self._controller.replica_state_machine
        eligible: list[str] = []
        for topic in sorted(ctx.topics_to_be_deleted):
            states = [rsm.state(r) for r in ctx.replicas_for_topic(topic)]
            if all(s is R.DELETION_SUCCESSFUL for s in states):
                await self._complete(topic)
                continue
            if any(s is R.DELETION_STARTED for s in states):
                continue  # waiting for StopReplica answers
            if topic not in ctx.topics_ineligible_for_deletion:
                eligible.append(topic)
        if eligible:
            await self._start(eligible)

    async def _start(self, topics: list[str]) -> None:
        """Start (or retry) deleting ``topics``: partitions go away once; replicas not
        yet deleted are stopped with delete, those on dead brokers wait (Ineligible)."""
        ctrl = self._controller
        ctx = ctrl.context
        log.info("deleting topics %s", topics)
        partitions = {tp for t in topics for tp in ctx.partitions_for_topic(t)}
        ctrl.batch.new_batch()
        ctrl.batch.add_update_metadata(ctx.live_or_shutting_down_broker_ids, partitions)
        ctrl.batch.send_requests(ctx.epoch)
        psm = ctrl.partition_state_machine
        first_time = {tp for tp in partitions if psm.state(tp) is not PartitionState.NON_EXISTENT}
        not_offline = {tp for tp in first_time if psm.state(tp) is not PartitionState.OFFLINE}
        await psm.handle_state_changes(not_offline, PartitionState.OFFLINE)
        await psm.handle_state_changes(first_time, PartitionState.NON_EXISTENT)
        rsm = ctrl.replica_state_machine
        pending = {
            r for r in ctx.replicas_for_partitions(partitions)
            if rsm.state(r) is not R.DELETION_SUCCESSFUL
        }  # fmt: skip
        dead = {
            r
            for r in pending
            if not ctx.is_replica_online(r.replica, r.topic_partition, include_shutting_down=True)
        }
        await rsm.handle_state_changes(
            {r for r in dead if rsm.state(r) is not R.DELETION_INELIGIBLE}, R.DELETION_INELIGIBLE
        )
        ctx.topics_ineligible_for_deletion |= {r.topic for r in dead}
        retry = pending - dead
        await rsm.handle_state_changes(
            {r for r in retry if rsm.state(r) is not R.OFFLINE}, R.OFFLINE
        )
        await rsm.handle_state_changes(retry, R.DELETION_STARTED)

    async def fail_replica_deletion(self, replicas: Iterable[PartitionReplica]) -> None:
        """Replicas of queued topics that cannot be deleted now (their broker died)."""
        ctx = self._controller.context
        rsm = self._controller.replica_state_machine
        failing = {
            r
            for r in replicas
            if r.topic in ctx.topics_to_be_deleted
            and rsm.state(r) in (R.OFFLINE, R.DELETION_STARTED)
        }
        if failing:
            await rsm.handle_state_changes(failing, R.DELETION_INELIGIBLE)
            ctx.topics_ineligible_for_deletion |= {r.topic for r in failing}
            await self.resume()

    async def on_stop_replica_response(self, event: TopicDeletionStopReplicaResponse) -> None:
        ctx = self._controller.context
        rsm = self._controller.replica_state_machine
        succeeded: set[PartitionReplica] = set()
        failed: set[PartitionReplica] = set()
        for tp in event.deleted:
            replica = PartitionReplica(tp.topic, tp.partition, event.broker_id)
            if (
                tp.topic not in ctx.topics_to_be_deleted
                or rsm.state(replica) is not R.DELETION_STARTED
            ):
                continue
            if event.error_code or event.errors.get(tp, 0):
                failed.add(replica)
            else:
                succeeded.add(replica)
        if failed:
            log.warning("replica deletion failed on broker %d: %s", event.broker_id, sorted(failed))
            await rsm.handle_state_changes(failed, R.DELETION_INELIGIBLE)
            ctx.topics_ineligible_for_deletion |= {r.topic for r in failed}
        await rsm.handle_state_changes(succeeded, R.DELETION_SUCCESSFUL)
        await self.resume()

    async def _complete(self, topic: str) -> None:
        ctrl = self._controller
        replicas = ctrl.context.replicas_for_topic(topic)
        await ctrl.replica_state_machine.handle_state_changes(replicas, R.NON_EXISTENT)
        await ctrl.zk.delete_topic(topic)
        ctrl.context.remove_topic(topic)
        log.info("topic %s deleted", topic)

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

from minibroker.controller.context import ControllerContext
from minibroker.controller.controller_zk import ControllerZk
from minibroker.controller.events import TopicDeletion, TopicDeletionStopReplicaResponse
from minibroker.controller.partition_state_machine import PartitionStateMachine
from minibroker.controller.replica_state_machine import ReplicaStateMachine
from minibroker.controller.request_batch import ControllerBrokerRequestBatch
from minibroker.controller.state_machines import PartitionReplica, PartitionState, ReplicaState

log = logging.getLogger("minibroker.controller.topic_deletion")

R = ReplicaState


class TopicDeletionManager:
    def __init__(
        self,
        context: ControllerContext,
        zk: ControllerZk,
        batch: ControllerBrokerRequestBatch,
        partition_state_machine: PartitionStateMachine,
        replica_state_machine: ReplicaStateMachine,
        *,
        delete_topic_enable: bool,
    ) -> None:
        self._ctx = context
        self._zk = zk
        self._batch = batch
        self._psm = partition_state_machine
        self._rsm = replica_state_machine
        self._enabled = delete_topic_enable

    async def initialize(self, marked: set[str]) -> None:
        """On failover: queue the marked topics that exist; drop marks of the others."""
        if not self._enabled:
            await self._zk.delete_topic_deletion_marks(marked)
            return
        await self._zk.delete_topic_deletion_marks(marked - self._ctx.all_topics)
        self._queue(marked & self._ctx.all_topics)

    def _queue(self, topics: set[str]) -> None:
        self._ctx.topics_to_be_deleted |= topics
        reassigning = {tp.topic for tp in self._ctx.partitions_being_reassigned}
        self._ctx.topics_ineligible_for_deletion |= topics & reassigning

    async def on_topic_deletion_event(self, event: TopicDeletion) -> None:
        marked = await self._zk.get_topics_to_delete(watch=True)
        if not self._enabled:
            await self._zk.delete_topic_deletion_marks(marked)
            return
        await self._zk.delete_topic_deletion_marks(marked - self._ctx.all_topics)
        new = (marked & self._ctx.all_topics) - self._ctx.topics_to_be_deleted
        if new:
            log.info("topics queued for deletion: %s", sorted(new))
            self._queue(new)
            await self.resume()

    async def resume_for_brokers(self, broker_ids: set[int]) -> None:
        topics = {
            r.topic for r in self._ctx.replicas_on_brokers(broker_ids)
        } & self._ctx.topics_to_be_deleted
        if topics:
            self._ctx.topics_ineligible_for_deletion -= topics
            await self.resume()

    async def resume_for_topic(self, topic: str) -> None:
        if topic in self._ctx.topics_to_be_deleted:
            if not any(tp.topic == topic for tp in self._ctx.partitions_being_reassigned):
                self._ctx.topics_ineligible_for_deletion.discard(topic)
            await self.resume()

    async def resume(self) -> None:
        """Advance every queued topic as far as it can go now."""
        eligible: list[str] = []
        for topic in sorted(self._ctx.topics_to_be_deleted):
            states = [self._rsm.state(r) for r in self._ctx.replicas_for_topic(topic)]
            if all(s is R.DELETION_SUCCESSFUL for s in states):
                await self._complete(topic)
                continue
            if any(s is R.DELETION_STARTED for s in states):
                continue  # waiting for StopReplica answers
            if topic not in self._ctx.topics_ineligible_for_deletion:
                eligible.append(topic)
        if eligible:
            await self._start(eligible)

    async def _start(self, topics: list[str]) -> None:
        """Start (or retry) deleting ``topics``: partitions go away once; replicas not
        yet deleted are stopped with delete, those on dead brokers wait (Ineligible)."""
        log.info("deleting topics %s", topics)
        partitions = {tp for t in topics for tp in self._ctx.partitions_for_topic(t)}
        self._batch.new_batch()
        self._batch.add_update_metadata(self._ctx.live_or_shutting_down_broker_ids, partitions)
        self._batch.send_requests(self._ctx.epoch)
        first_time = {
            tp for tp in partitions if self._psm.state(tp) is not PartitionState.NON_EXISTENT
        }
        not_offline = {tp for tp in first_time if self._psm.state(tp) is not PartitionState.OFFLINE}
        await self._psm.handle_state_changes(not_offline, PartitionState.OFFLINE)
        await self._psm.handle_state_changes(first_time, PartitionState.NON_EXISTENT)
        pending = {
            r for r in self._ctx.replicas_for_partitions(partitions)
            if self._rsm.state(r) is not R.DELETION_SUCCESSFUL
        }  # fmt: skip
        dead = {
            r
            for r in pending
            if not self._ctx.is_replica_online(
                r.replica, r.topic_partition, include_shutting_down=True
            )
        }
        await self._rsm.handle_state_changes(
            {r for r in dead if self._rsm.state(r) is not R.DELETION_INELIGIBLE},
            R.DELETION_INELIGIBLE,
        )
        self._ctx.topics_ineligible_for_deletion |= {r.topic for r in dead}
        retry = pending - dead
        await self._rsm.handle_state_changes(
            {r for r in retry if self._rsm.state(r) is not R.OFFLINE}, R.OFFLINE
        )
        await self._rsm.handle_state_changes(retry, R.DELETION_STARTED)

    async def fail_replica_deletion(self, replicas: Iterable[PartitionReplica]) -> None:
        """Replicas of queued topics that cannot be deleted now (their broker died)."""
        failing = {
            r
            for r in replicas
            if r.topic in self._ctx.topics_to_be_deleted
            and self._rsm.state(r) in (R.OFFLINE, R.DELETION_STARTED)
        }
        if failing:
            await self._rsm.handle_state_changes(failing, R.DELETION_INELIGIBLE)
            self._ctx.topics_ineligible_for_deletion |= {r.topic for r in failing}
            await self.resume()

    async def on_stop_replica_response(self, event: TopicDeletionStopReplicaResponse) -> None:
        succeeded: set[PartitionReplica] = set()
        failed: set[PartitionReplica] = set()
        for tp in event.deleted:
            replica = PartitionReplica(tp.topic, tp.partition, event.broker_id)
            if (
                tp.topic not in self._ctx.topics_to_be_deleted
                or self._rsm.state(replica) is not R.DELETION_STARTED
            ):
                continue
            if event.error_code or event.errors.get(tp, 0):
                failed.add(replica)
            else:
                succeeded.add(replica)
        if failed:
            log.warning("replica deletion failed on broker %d: %s", event.broker_id, sorted(failed))
            await self._rsm.handle_state_changes(failed, R.DELETION_INELIGIBLE)
            self._ctx.topics_ineligible_for_deletion |= {r.topic for r in failed}
        await self._rsm.handle_state_changes(succeeded, R.DELETION_SUCCESSFUL)
        await self.resume()

    async def _complete(self, topic: str) -> None:
        replicas = self._ctx.replicas_for_topic(topic)
        await self._rsm.handle_state_changes(replicas, R.NON_EXISTENT)
        await self._zk.delete_topic(topic)
        self._ctx.remove_topic(topic)
        log.info("topic %s deleted", topic)

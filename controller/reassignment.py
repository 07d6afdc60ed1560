"""Partition reassignment: moving a partition from OAR (its replicas now) to RAR.

How this works (Kafka's onPartitionReassignment; OAR = original replicas, RAR = target
replicas, AR = the assignment in ZooKeeper). Phase one, until every RAR member is in the
ISR:

    1. AR := OAR + RAR in ZooKeeper (``adding_replicas`` / ``removing_replicas`` record
       RAR - OAR and OAR - RAR, so a new controller can resume), then in memory;
    2. bump the leader epoch and send LeaderAndIsr with that AR to every replica;
    3. start RAR - OAR as NewReplica (LeaderAndIsr is_new: they fetch from the leader);
       watch the partition state znode: the leader adds them to the ISR as they catch up.

Phase two, once RAR is in the ISR (triggered by that watch):

    4-5. RAR replicas -> OnlineReplica;
    6. AR := RAR in memory;
    7. if the leader is not in RAR (or dead), elect one from RAR; else bump the epoch,
       so every replica hears AR = RAR;
    8. OAR - RAR -> OfflineReplica (out of the ISR; StopReplica);
    9. OAR - RAR -> deletion (StopReplica delete) -> NonExistentReplica;
    10. AR := RAR in ZooKeeper (the last write: until then OAR is recoverable);
    11. drop the partition from /admin/reassign_partitions;
    12. UpdateMetadata for the partition to every broker.

Reassignments come from /admin/reassign_partitions or AlterPartitionReassignments;
ListPartitionReassignments reports the ones in progress. A target of None cancels: the
partition is reassigned back to its original replicas.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence

from minibroker.controller.context import ControllerContext, ReassignmentContext
from minibroker.controller.controller_zk import ControllerZk, TopicReplicas
from minibroker.controller.event_manager import ControllerEventManager
from minibroker.controller.events import (
    ApiPartitionReassignment,
    ListPartitionReassignments,
    PartitionReassignment,
    PartitionReassignmentIsrChange,
)
from minibroker.controller.partition_state_machine import PartitionStateMachine
from minibroker.controller.replica_state_machine import ReplicaStateMachine
from minibroker.controller.request_batch import ControllerBrokerRequestBatch
from minibroker.controller.state_machines import (
    MAX_ZK_CONFLICT_ROUNDS,
    ElectionStrategy,
    PartitionReplica,
    PartitionState,
    ReplicaState,
)
from minibroker.protocol.errors import (
    InvalidReplicaAssignmentError,
    KafkaError,
    NoReassignmentInProgressError,
    UnknownTopicOrPartitionError,
)
from minibroker.protocol.topic_partition import TopicPartition

log = logging.getLogger("minibroker.controller.reassignment")

R = ReplicaState


class ReassignmentManager:
    def __init__(
        self,
        context: ControllerContext,
        zk: ControllerZk,
        batch: ControllerBrokerRequestBatch,
        partition_state_machine: PartitionStateMachine,
        replica_state_machine: ReplicaStateMachine,
        events: ControllerEventManager,
        *,
        on_reassignment_done: Callable[[str], Awaitable[None]],
    ) -> None:
        """``on_reassignment_done(topic)`` runs after a partition of ``topic`` finished
        moving (topic deletion waits for that)."""
        self._ctx = context
        self._zk = zk
        self._batch = batch
        self._psm = partition_state_machine
        self._rsm = replica_state_machine
        self._events = events
        self._on_done = on_reassignment_done

    # -- triggers -------------------------------------------------------------------------

    def note_recorded_reassignment(self, topic: str, replicas: TopicReplicas) -> None:
        """On load: a topic znode with adding/removing replicas is mid-reassignment."""
        for partition, ar in replicas.partitions.items():
            adding = replicas.adding_replicas.get(partition, ())
            removing = replicas.removing_replicas.get(partition, ())
            if adding or removing:
                original = tuple(r for r in ar if r not in adding)
                target = tuple(r for r in ar if r not in removing)
                tp = TopicPartition(topic, partition)
                self._ctx.partitions_being_reassigned[tp] = ReassignmentContext(original, target)

    async def resume_after_failover(self) -> None:
        requested = await self._zk.get_reassignments(watch=True)
        for tp, target in sorted(requested.items()):
            if tp not in self._ctx.partitions_being_reassigned:
                await self.start(tp, target)
        for tp in sorted(self._ctx.partitions_being_reassigned):
            await self._reassign(tp)

    async def on_zk_reassignment(self, event: PartitionReassignment) -> None:
        requested = await self._zk.get_reassignments(watch=True)
        for tp, target in sorted(requested.items()):
            current = self._ctx.partitions_being_reassigned.get(tp)
            if current is None or current.target != tuple(target):
                error = await self.start(tp, target)
                if error is not None:
                    log.warning("reassignment of %s refused: %s", tp, error)
                    await self._forget_request(tp)

    async def on_api_reassignment(self, event: ApiPartitionReassignment) -> None:
        results: dict[TopicPartition, KafkaError | None] = {}
        for tp, target in sorted(event.reassignments.items()):
            if target is None:
                current = self._ctx.partitions_being_reassigned.get(tp)
                if current is None:
                    results[tp] = NoReassignmentInProgressError(f"no reassignment of {tp}")
                else:
                    results[tp] = await self.start(tp, current.original)
            else:
                results[tp] = await self.start(tp, target)
        event.reply.set(results)

    async def on_list_reassignments(self, event: ListPartitionReassignments) -> None:
        event.reply.set(
            {
                tp: (list(self._ctx.replicas_for(tp)), list(r.adding), list(r.removing))
                for tp, r in self._ctx.partitions_being_reassigned.items()
            }
        )

    async def on_isr_change(self, event: PartitionReassignmentIsrChange) -> None:
        """The watched state znode changed: finish if RAR caught up, else watch again
        (our own epoch bumps fire this watch too, so phase one must not rerun here)."""
        tp = event.partition
        if tp not in self._ctx.partitions_being_reassigned:
            return
        if await self._caught_up(tp):
            await self._reassign(tp)
        else:
            await self._watch_until_caught_up(tp)

    async def _caught_up(self, tp: TopicPartition) -> bool:
        self._ctx.update_leadership(await self._zk.read_partition_states([tp]))
        lai = self._ctx.leadership.get(tp)
        r = self._ctx.partitions_being_reassigned[tp]
        return lai is not None and all(replica in lai.isr for replica in r.target)

    async def _watch_until_caught_up(self, tp: TopicPartition) -> None:
        await self._zk.watch_partition_state(tp)
        # The ISR may have grown before the watch was armed: look once more.
        if await self._caught_up(tp):
            self._events.put(PartitionReassignmentIsrChange(tp))

    async def resume_for_brokers(self, broker_ids: set[int]) -> None:
        for tp, r in sorted(self._ctx.partitions_being_reassigned.items()):
            if broker_ids & set(r.target):
                await self._reassign(tp)

    # -- the steps ------------------------------------------------------------------------

    async def start(self, tp: TopicPartition, target: Sequence[int]) -> KafkaError | None:
        """Validate and begin (or redirect) the reassignment of ``tp`` to ``target``."""
        target = tuple(target)
        current = self._ctx.replicas_for(tp)
        if not current or tp.topic in self._ctx.topics_to_be_deleted:
            return UnknownTopicOrPartitionError(f"{tp} does not exist or is being deleted")
        if not target or len(set(target)) != len(target):
            return InvalidReplicaAssignmentError(f"bad target replicas {list(target)} for {tp}")
        unknown = set(target) - self._ctx.live_or_shutting_down_broker_ids
        if unknown:
            return InvalidReplicaAssignmentError(f"brokers {sorted(unknown)} are not registered")
        running = self._ctx.partitions_being_reassigned.get(tp)
        original = running.original if running is not None else current
        if target == current and running is None:
            await self._forget_request(tp)
            return None
        log.info("reassigning %s from %s to %s", tp, list(original), list(target))
        self._ctx.partitions_being_reassigned[tp] = ReassignmentContext(original, target)
        await self._reassign(tp)
        return None

    async def _reassign(self, tp: TopicPartition) -> None:
        r = self._ctx.partitions_being_reassigned[tp]
        lai = self._ctx.leadership.get(tp)
        if lai is None or not all(replica in lai.isr for replica in r.target):
            if self._ctx.replicas_for(tp) != r.union:
                await self._write_assignment(tp, r.union)  # step 1
            await self._bump_leader_epoch(tp, r.union)  # step 2
            new = {
                PartitionReplica(tp.topic, tp.partition, b)
                for b in r.adding
                if self._rsm.state(PartitionReplica(tp.topic, tp.partition, b)) is R.NON_EXISTENT
            }
            await self._rsm.handle_state_changes(new, R.NEW)  # step 3
            await self._watch_until_caught_up(tp)
            return
        targets = {PartitionReplica(tp.topic, tp.partition, b) for b in r.target}
        await self._rsm.handle_state_changes(targets, R.ONLINE)  # steps 4-5
        del self._ctx.partitions_being_reassigned[tp]  # requests from here on carry AR = RAR
        self._ctx.set_assignment(tp, r.target)  # step 6
        if lai.leader not in r.target or not self._ctx.is_replica_online(lai.leader, tp):  # step 7
            await self._psm.handle_state_changes(
                [tp], PartitionState.ONLINE, ElectionStrategy.REASSIGNED
            )
        else:
            await self._bump_leader_epoch(tp, r.target)
        removing = {PartitionReplica(tp.topic, tp.partition, b) for b in r.removing}
        for state in (R.OFFLINE, R.DELETION_STARTED, R.DELETION_SUCCESSFUL, R.NON_EXISTENT):
            await self._rsm.handle_state_changes(removing, state)  # steps 8-9
        self._ctx.set_assignment(tp, r.target)  # step 9 removed them already; keep RAR order
        await self._write_assignment(tp, r.target)  # step 10
        await self._forget_request(tp)  # step 11
        self._batch.new_batch()  # step 12
        self._batch.add_update_metadata(self._ctx.live_or_shutting_down_broker_ids, [tp])
        self._batch.send_requests(self._ctx.epoch)
        log.info("reassignment of %s to %s done", tp, list(r.target))
        await self._on_done(tp.topic)

    async def _write_assignment(self, tp: TopicPartition, replicas: Sequence[int]) -> None:
        """Rewrite the topic znode with ``tp`` -> ``replicas`` and the adding/removing
        lists of every reassignment of the topic still in progress; then memory."""
        partitions: dict[int, Sequence[int]] = {
            p.partition: self._ctx.replicas_for(p) for p in self._ctx.partitions_for_topic(tp.topic)
        }
        partitions[tp.partition] = tuple(replicas)
        adding: dict[int, Sequence[int]] = {}
        removing: dict[int, Sequence[int]] = {}
        for other, r in self._ctx.partitions_being_reassigned.items():
            if other.topic == tp.topic:
                adding[other.partition] = r.adding
                removing[other.partition] = r.removing
        await self._zk.set_topic_assignment(
            tp.topic, partitions, adding, removing, topic_id=self._ctx.topic_ids.get(tp.topic)
        )
        self._ctx.set_assignment(tp, replicas)

    async def _bump_leader_epoch(self, tp: TopicPartition, recipients: Sequence[int]) -> None:
        """Same leader and ISR, next epoch: forces every recipient to take the new AR."""
        for _ in range(MAX_ZK_CONFLICT_ROUNDS):
            current = (await self._zk.read_partition_states([tp])).get(tp)
            if current is None:
                return
            proposal = current.new_leader(current.leader, current.isr, self._ctx.epoch)
            result = await self._zk.update_partition_states({tp: proposal})
            written = result.written.get(tp)
            if written is not None:
                self._ctx.leadership[tp] = written
                self._batch.new_batch()
                self._batch.add_leader_and_isr(recipients, tp, written, self._ctx.replicas_for(tp))
                self._batch.send_requests(self._ctx.epoch)
                return
        log.error("could not bump the leader epoch of %s: kept losing races", tp)

    async def _forget_request(self, tp: TopicPartition) -> None:
        requested: Mapping[TopicPartition, Sequence[int]] = await self._zk.get_reassignments(
            watch=False
        )
        if tp in requested:
            await self._zk.set_reassignments({p: t for p, t in requested.items() if p != tp})

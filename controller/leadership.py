"""Leadership upkeep: ISR change notifications and preferred-leader elections.

ISR changes: a leader that shrinks or grows an ISR writes the partition state znode
itself (conditional on its zkVersion) and then a sequential
``/isr_change_notification/isr_change_<n>`` naming the partitions. The controller reads
the named states, refreshes its context and sends UpdateMetadata for them to every
broker, then deletes the notifications.

Preferred election moves leadership back to AR[0] where AR[0] is alive and in the ISR.
It is asked for by ElectLeaders, by /admin/preferred_replica_election, or by the
auto-rebalance timer, which elects for every broker whose share of partitions led by
someone else exceeds ``leader.imbalance.per.broker.percentage``. Partitions being
deleted or reassigned are left alone (their AR is about to change).

Unclean election (ElectLeaders with election type UNCLEAN) is the operator's way out
of an offline partition: each named partition without a live leader gets one, from the
live ISR if there is one, otherwise from any live replica (which may lose acknowledged
records), through the partition state machine like every other election. A partition
whose leader is alive answers ELECTION_NOT_NEEDED, one with no live replica
ELIGIBLE_LEADERS_NOT_AVAILABLE, one of a topic being deleted INVALID_TOPIC_EXCEPTION.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from minibroker.controller import events as ev
from minibroker.controller.context import ControllerContext
from minibroker.controller.controller_zk import ControllerZk
from minibroker.controller.partition_state_machine import PartitionStateMachine
from minibroker.controller.request_batch import ControllerBrokerRequestBatch
from minibroker.controller.state_machines import ElectionStrategy, PartitionState
from minibroker.protocol.errors import (
    ElectionNotNeededError,
    EligibleLeadersNotAvailableError,
    InvalidTopicError,
    KafkaError,
    PreferredLeaderNotAvailableError,
    UnknownTopicOrPartitionError,
)
from minibroker.protocol.topic_partition import TopicPartition

log = logging.getLogger("minibroker.controller.leadership")


class LeadershipManager:
    def __init__(
        self,
        context: ControllerContext,
        zk: ControllerZk,
        batch: ControllerBrokerRequestBatch,
        partition_state_machine: PartitionStateMachine,
        *,
        imbalance_per_broker_percentage: int,
    ) -> None:
        self._ctx = context
        self._zk = zk
        self._batch = batch
        self._psm = partition_state_machine
        self._imbalance_percentage = imbalance_per_broker_percentage

    async def on_isr_change_notification(self, event: ev.IsrChangeNotification) -> None:
        names = await self._zk.get_isr_change_notifications(watch=True)
        if not names:
            return
        changed = await self._zk.read_isr_change_notifications(names)
        await self._zk.delete_isr_change_notifications(names)
        known = [tp for tp in changed if self._ctx.replicas_for(tp)]
        self._ctx.update_leadership(await self._zk.read_partition_states(known))
        self._batch.new_batch()
        self._batch.add_update_metadata(self._ctx.live_or_shutting_down_broker_ids, known)
        self._batch.send_requests(self._ctx.epoch)

    async def on_preferred_replica_election(self, event: ev.PreferredReplicaElection) -> None:
        if event.from_zk:
            partitions: Iterable[TopicPartition] = await self._zk.get_preferred_replica_election(
                watch=True
            )
        elif event.partitions is None:
            partitions = list(self._ctx.all_partitions())
        else:
            partitions = event.partitions
        results = await self.elect_preferred_leaders(partitions)
        if event.from_zk and results:
            await self._zk.delete_preferred_replica_election()
        if event.reply is not None:
            event.reply.set(results)

    async def elect_preferred_leaders(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, KafkaError | None]:
        ctx = self._ctx
        results: dict[TopicPartition, KafkaError | None] = {}
        candidates: list[TopicPartition] = []
        for tp in partitions:
            replicas = ctx.replicas_for(tp)
            lai = ctx.leadership.get(tp)
            if not replicas:
                results[tp] = UnknownTopicOrPartitionError(f"{tp} does not exist")
            elif tp.topic in ctx.topics_to_be_deleted or tp in ctx.partitions_being_reassigned:
                results[tp] = PreferredLeaderNotAvailableError(f"{tp} is being deleted or moved")
            elif lai is not None and lai.leader == replicas[0]:
                results[tp] = ElectionNotNeededError(f"{tp} is led by its preferred replica")
            else:
                candidates.append(tp)
        elected = await self._elect(
            candidates, ElectionStrategy.PREFERRED, PreferredLeaderNotAvailableError
        )
        return results | elected

    async def on_unclean_leader_election(self, event: ev.UncleanLeaderElection) -> None:
        ctx = self._ctx
        partitions: Iterable[TopicPartition] = (
            [tp for tp in ctx.all_partitions() if tp.topic not in ctx.topics_to_be_deleted]
            if event.partitions is None
            else event.partitions
        )
        event.reply.set(await self.elect_unclean_leaders(partitions))

    async def elect_unclean_leaders(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, KafkaError | None]:
        ctx = self._ctx
        results: dict[TopicPartition, KafkaError | None] = {}
        candidates: list[TopicPartition] = []
        for tp in partitions:
            lai = ctx.leadership.get(tp)
            if not ctx.replicas_for(tp):
                results[tp] = UnknownTopicOrPartitionError(f"{tp} does not exist")
            elif tp.topic in ctx.topics_to_be_deleted:
                results[tp] = InvalidTopicError(f"topic {tp.topic} is being deleted")
            elif lai is not None and ctx.is_replica_online(
                lai.leader, tp, include_shutting_down=True
            ):
                results[tp] = ElectionNotNeededError(f"{tp} is led by live broker {lai.leader}")
            else:
                candidates.append(tp)
        elected = await self._elect(
            candidates, ElectionStrategy.UNCLEAN, EligibleLeadersNotAvailableError
        )
        return results | elected

    async def _elect(
        self,
        candidates: list[TopicPartition],
        strategy: ElectionStrategy,
        failed: type[KafkaError],
    ) -> dict[TopicPartition, KafkaError | None]:
        """Move ``candidates`` ONLINE with ``strategy``: None for each that got its leader,
        a ``failed`` error saying why for each that did not."""
        failures = await self._psm.handle_state_changes(candidates, PartitionState.ONLINE, strategy)
        return {tp: failed(str(failures[tp])) if tp in failures else None for tp in candidates}

    async def on_auto_leader_balance(self, event: ev.AutoPreferredLeaderBalance) -> None:
        ctx = self._ctx
        to_move: list[TopicPartition] = []
        for broker_id, not_led in sorted(ctx.preferred_replica_imbalance().items()):
            preferred_total = sum(
                1 for tp in ctx.all_partitions() if ctx.replicas_for(tp)[:1] == (broker_id,)
            )
            if not preferred_total or broker_id not in ctx.live_broker_ids:
                continue
            ratio = 100 * len(not_led) / preferred_total
            if ratio > self._imbalance_percentage:
                to_move += [tp for tp in sorted(not_led) if broker_id in ctx.leadership[tp].isr]
        if to_move:
            log.info("auto leader rebalance moves %d partitions", len(to_move))
            await self.elect_preferred_leaders(to_move)

"""ReplicaStateMachine: carries out replica transitions (the table, and what each
transition does, are in ``controller.state_machines``)."""

from __future__ import annotations

from collections.abc import Iterable

import trio

from minibroker.controller.context import NO_LEADER, ControllerContext
from minibroker.controller.request_batch import ControllerBrokerRequestBatch
from minibroker.controller.state_machines import (
    MAX_ZK_CONFLICT_ROUNDS,
    Failures,
    PartitionReplica,
    PartitionStateStore,
    ReplicaFailures,
    ReplicaState,
    StateChangeFailed,
    check_replica_transition,
    log,
    log_failure,
    split_legal,
)
from minibroker.protocol.errors import MinibrokerError
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.zk.values import LeaderAndIsr

REPLICAS_PER_TURN = 1000
"""Replicas moved between yields to the event loop the controller shares with its
broker: a failover moves every replica of the cluster (20,000 at 10,000 partitions on
two live brokers), and that broker's clients and its own share of the new leaders
must not wait for all of them."""


class ReplicaStateMachine:
    def __init__(
        self,
        context: ControllerContext,
        store: PartitionStateStore,
        batch: ControllerBrokerRequestBatch,
    ) -> None:
        self._ctx = context
        self._store = store
        self._batch = batch

    def state(self, replica: PartitionReplica) -> ReplicaState:
        return self._ctx.replica_states.get(replica, ReplicaState.NON_EXISTENT)

    def initialize_states(self) -> None:
        """On failover: replicas on live brokers are Online; the others are marked
        Ineligible, which blocks deleting them until their broker is back."""
        ctx = self._ctx
        live, failed_dirs = ctx.live_brokers, ctx.replicas_on_offline_dirs
        states = ctx.replica_states
        online, ineligible = ReplicaState.ONLINE, ReplicaState.DELETION_INELIGIBLE
        for topic, partitions in ctx.assignments.items():
            for partition, replicas in partitions.items():
                for broker_id in replicas:
                    # is_replica_online(include_shutting_down=True), inlined: 30,000 calls
                    # at 10,000 partitions held up a failover.
                    up = broker_id in live and not (
                        broker_id in failed_dirs
                        and TopicPartition(topic, partition) in failed_dirs[broker_id]
                    )
                    states[PartitionReplica(topic, partition, broker_id)] = (
                        online if up else ineligible
                    )

    async def handle_state_changes(
        self, replicas: Iterable[PartitionReplica], target: ReplicaState
    ) -> ReplicaFailures:
        self._batch.new_batch()
        try:
            failures = await self._do_handle(sorted(replicas), target)
        except BaseException:
            self._batch.clear()
            raise
        self._batch.send_requests(self._ctx.epoch)
        return failures

    async def _do_handle(
        self, replicas: list[PartitionReplica], target: ReplicaState
    ) -> ReplicaFailures:
        valid, failures = split_legal(replicas, self.state, target, check_replica_transition)
        if target is ReplicaState.OFFLINE:
            failures |= await self._go_offline(valid)
        for count, replica in enumerate(valid, 1):
            if count % REPLICAS_PER_TURN == 0:
                await trio.lowlevel.checkpoint()
            if replica in failures:
                continue
            if target is ReplicaState.NEW:
                error = self._go_new(replica)
                if error is not None:
                    log_failure(error)
                    failures[replica] = error
                    continue
            elif target is ReplicaState.ONLINE:
                self._go_online(replica)
            elif target is ReplicaState.DELETION_STARTED:
                self._batch.add_stop_replica(
                    [replica.replica], replica.topic_partition, delete=True
                )
            elif target is ReplicaState.NON_EXISTENT:
                tp = replica.topic_partition
                remaining = [r for r in self._ctx.replicas_for(tp) if r != replica.replica]
                self._ctx.set_assignment(tp, remaining)
                self._ctx.replica_states.pop(replica, None)
                log.debug("replica %s: -> %s", replica, target.value)
                continue
            log.debug("replica %s: %s -> %s", replica, self.state(replica).value, target.value)
            self._ctx.replica_states[replica] = target
        return failures

    def _go_new(self, replica: PartitionReplica) -> MinibrokerError | None:
        tp = replica.topic_partition
        lai = self._ctx.leadership.get(tp)
        if lai is None:
            return None  # it will hear about the partition when a leader is elected
        if lai.leader == replica.replica:
            return StateChangeFailed(f"replica {replica} leads its partition; it cannot be new")
        self._batch.add_leader_and_isr(
            [replica.replica], tp, lai, self._ctx.replicas_for(tp), is_new=True
        )
        return None

    def _go_online(self, replica: PartitionReplica) -> None:
        tp = replica.topic_partition
        replicas = self._ctx.replicas_for(tp)
        if self.state(replica) is ReplicaState.NEW:
            if replica.replica not in replicas:
                self._ctx.set_assignment(tp, (*replicas, replica.replica))
            return
        lai = self._ctx.leadership.get(tp)
        if lai is not None:
            self._batch.add_leader_and_isr([replica.replica], tp, lai, replicas)

    async def _go_offline(self, replicas: list[PartitionReplica]) -> ReplicaFailures:
        """Stop the replicas (keeping their data) and take them out of the ISR, so a
        dead broker is never elected from a stale ISR."""
        failures: ReplicaFailures = {}
        by_broker: dict[int, list[PartitionReplica]] = {}
        for replica in replicas:
            self._batch.add_stop_replica([replica.replica], replica.topic_partition, delete=False)
            by_broker.setdefault(replica.replica, []).append(replica)
        for broker_id, on_broker in sorted(by_broker.items()):
            with_leadership = [
                r.topic_partition for r in on_broker if r.topic_partition in self._ctx.leadership
            ]
            updated, failed = await self.remove_replica_from_isr(broker_id, with_leadership)
            for tp, error in failed.items():
                failures[PartitionReplica(tp.topic, tp.partition, broker_id)] = error
            for tp, lai in updated.items():
                if tp.topic in self._ctx.topics_to_be_deleted:
                    continue
                others = [r for r in self._ctx.replicas_for(tp) if r != broker_id]
                self._batch.add_leader_and_isr(others, tp, lai, self._ctx.replicas_for(tp))
            without = [
                r.topic_partition
                for r in on_broker
                if r.topic_partition not in self._ctx.leadership
            ]
            self._batch.add_update_metadata(self._ctx.live_or_shutting_down_broker_ids, without)
        return failures

    async def remove_replica_from_isr(
        self, broker_id: int, partitions: Iterable[TopicPartition]
    ) -> tuple[dict[TopicPartition, LeaderAndIsr], Failures]:
        """Drop ``broker_id`` from the ISR (and leadership) of ``partitions`` in
        ZooKeeper. The last ISR member is kept: it is the one replica an unclean-free
        election may still pick when it returns. Returns (updated, failed)."""
        updated: dict[TopicPartition, LeaderAndIsr] = {}
        failures: Failures = {}
        remaining = list(partitions)
        for _ in range(MAX_ZK_CONFLICT_ROUNDS):
            if not remaining:
                break
            current = await self._store.read_partition_states(remaining)
            proposals: dict[TopicPartition, LeaderAndIsr] = {}
            for tp in remaining:
                lai = current.get(tp)
                if lai is None:
                    continue  # never had a leader: nothing to shrink
                if lai.controller_epoch > self._ctx.epoch:
                    failures[tp] = StateChangeFailed(
                        f"partition {tp}: written by controller epoch {lai.controller_epoch}"
                    )
                elif broker_id not in lai.isr and lai.leader != broker_id:
                    self._ctx.leadership[tp] = lai
                else:
                    leader = NO_LEADER if lai.leader == broker_id else lai.leader
                    isr = (
                        lai.isr
                        if len(lai.isr) == 1
                        else tuple(r for r in lai.isr if r != broker_id)
                    )
                    proposals[tp] = lai.new_leader(leader, isr, self._ctx.epoch)
            if not proposals:
                remaining = []
                break
            result = await self._store.update_partition_states(proposals)
            for tp, written in result.written.items():
                self._ctx.leadership[tp] = written
                updated[tp] = written
            remaining = sorted(result.conflicts)
        for tp in remaining:
            failures[tp] = StateChangeFailed(f"partition {tp}: kept losing conditional updates")
        for error in failures.values():
            log_failure(error)
        return updated, failures

"""PartitionStateMachine: carries out partition transitions (the table, and what each
transition does, are in ``controller.state_machines``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import trio

from minibroker.controller import leader_selectors as selectors
from minibroker.controller.context import INITIAL_LEADER_EPOCH, ControllerContext
from minibroker.controller.request_batch import ControllerBrokerRequestBatch
from minibroker.controller.state_machines import (
    MAX_ZK_CONFLICT_ROUNDS,
    ElectionStrategy,
    Failures,
    PartitionState,
    PartitionStateStore,
    StateChangeFailed,
    check_partition_transition,
    log,
    log_failure,
    split_legal,
)
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.zk.values import LeaderAndIsr


class PartitionStateMachine:
    def __init__(
        self,
        context: ControllerContext,
        store: PartitionStateStore,
        batch: ControllerBrokerRequestBatch,
        *,
        unclean_allowed: Callable[[str], bool] = lambda topic: False,
        on_unclean_election: Callable[[TopicPartition], None] = lambda tp: None,
        on_elections: Callable[[int, float], None] = lambda count, seconds: None,
    ) -> None:
        self._ctx = context
        self._store = store
        self._batch = batch
        self._unclean_allowed = unclean_allowed
        self._on_unclean_election = on_unclean_election
        self._on_elections = on_elections

    def state(self, tp: TopicPartition) -> PartitionState:
        return self._ctx.partition_states.get(tp, PartitionState.NON_EXISTENT)

    def initialize_states(self) -> None:
        """On failover: Online if the recorded leader is alive, Offline if it is not,
        New if the partition never had a leader."""
        for tp in self._ctx.all_partitions():
            lai = self._ctx.leadership.get(tp)
            if lai is None:
                self._ctx.partition_states[tp] = PartitionState.NEW
            elif self._ctx.is_replica_online(lai.leader, tp, include_shutting_down=True):
                self._ctx.partition_states[tp] = PartitionState.ONLINE
            else:
                self._ctx.partition_states[tp] = PartitionState.OFFLINE

    async def trigger_online_partition_state_change(self) -> Failures:
        """Try to bring every New or Offline partition online (topics being deleted stay
        as they are)."""
        candidates = {
            tp
            for tp in self._ctx.partitions_in_states([PartitionState.NEW, PartitionState.OFFLINE])
            if tp.topic not in self._ctx.topics_to_be_deleted
        }
        return await self.handle_state_changes(candidates, PartitionState.ONLINE)

    async def handle_state_changes(
        self,
        partitions: Iterable[TopicPartition],
        target: PartitionState,
        strategy: ElectionStrategy = ElectionStrategy.OFFLINE,
    ) -> Failures:
        """Move ``partitions`` to ``target``; returns the ones that failed, with why.
        Requests are sent when all are handled; ControllerMovedError propagates and
        sends nothing."""
        self._batch.new_batch()
        try:
            failures = await self._do_handle(list(partitions), target, strategy)
        except BaseException:
            self._batch.clear()
            raise
        self._batch.send_requests(self._ctx.epoch)
        return failures

    async def _do_handle(
        self, partitions: list[TopicPartition], target: PartitionState, strategy: ElectionStrategy
    ) -> Failures:
        valid, failures = split_legal(partitions, self.state, target, check_partition_transition)
        if target is PartitionState.ONLINE:
            new = [tp for tp in valid if self.state(tp) is PartitionState.NEW]
            existing = [tp for tp in valid if self.state(tp) is not PartitionState.NEW]
            started = trio.current_time()
            failures |= await self._initialize_leadership(new)
            failures |= await self._elect_leaders(existing, strategy)
            elected = sum(1 for tp in new + existing if tp not in failures)
            if elected:
                # Kafka's LeaderElectionRateAndTimeMs: elections and the time they took.
                self._on_elections(elected, trio.current_time() - started)
        for tp in valid:
            if tp not in failures:
                log.debug("partition %s: %s -> %s", tp, self.state(tp).value, target.value)
                self._ctx.partition_states[tp] = target
        return failures

    def _record_election(
        self, tp: TopicPartition, written: LeaderAndIsr, election: selectors.Election
    ) -> None:
        self._ctx.leadership[tp] = written
        if election.unclean:
            log.warning(
                "partition %s: unclean election of %d, data may be lost", tp, election.leader
            )
            self._on_unclean_election(tp)
        self._batch.add_leader_and_isr(election.recipients, tp, written, self._ctx.replicas_for(tp))

    async def _initialize_leadership(self, partitions: list[TopicPartition]) -> Failures:
        failures: Failures = {}
        proposals: dict[TopicPartition, tuple[LeaderAndIsr, selectors.Election]] = {}
        for tp in partitions:
            election = selectors.elect_for_new_partition(
                self._ctx.replicas_for(tp), self._ctx.online_replica_brokers(tp)
            )
            if election is None:
                failures[tp] = StateChangeFailed(
                    f"partition {tp}: no live replica among {list(self._ctx.replicas_for(tp))}"
                )
                continue
            lai = LeaderAndIsr(
                election.leader, INITIAL_LEADER_EPOCH, election.isr, self._ctx.epoch, 0
            )
            proposals[tp] = (lai, election)
        if proposals:
            result = await self._store.create_partition_states(
                {tp: lai for tp, (lai, _) in proposals.items()}
            )
            for tp in result.conflicts:
                failures[tp] = StateChangeFailed(f"partition {tp}: state znode already exists")
            for tp, written in result.written.items():
                self._ctx.leadership[tp] = written
                recipients = proposals[tp][1].recipients
                self._batch.add_leader_and_isr(
                    recipients, tp, written, self._ctx.replicas_for(tp), is_new=True
                )
        for error in failures.values():
            log_failure(error)
        return failures

    def _elect(
        self, tp: TopicPartition, lai: LeaderAndIsr, strategy: ElectionStrategy
    ) -> selectors.Election | None:
        ctx = self._ctx
        replicas = ctx.replicas_for(tp)
        # "Live" is per partition: a replica on a failed log dir of a live broker is out.
        live = ctx.online_replica_brokers(tp)
        if strategy is ElectionStrategy.OFFLINE:
            return selectors.elect_for_offline_partition(
                replicas, lai.isr, live, unclean_allowed=self._unclean_allowed(tp.topic)
            )
        if strategy is ElectionStrategy.REASSIGNED:
            reassignment = ctx.partitions_being_reassigned.get(tp)
            target = reassignment.target if reassignment is not None else replicas
            return selectors.elect_for_reassigned_partition(target, lai.isr, live)
        if strategy is ElectionStrategy.PREFERRED:
            return selectors.elect_preferred_leader(replicas, lai.isr, live)
        if strategy is ElectionStrategy.UNCLEAN:
            return selectors.elect_unclean_leader(replicas, lai.isr, live)
        return selectors.elect_for_controlled_shutdown(
            replicas,
            lai.isr,
            ctx.online_replica_brokers(tp, include_shutting_down=True),
            ctx.shutting_down_broker_ids,
        )

    async def _elect_leaders(
        self, partitions: list[TopicPartition], strategy: ElectionStrategy
    ) -> Failures:
        """Elect and write, re-reading what lost a race. The first round decides from
        the context's copy of each state (saving a ZooKeeper read on the failover
        path): a stale copy cannot do harm, because its write is conditional on the
        znode version it was read with, and a copy that seems to forbid the election
        is re-read before the partition is reported as failed."""
        failures: Failures = {}
        remaining = list(partitions)
        for round_no in range(MAX_ZK_CONFLICT_ROUNDS):
            if not remaining:
                break
            cached = round_no == 0 and all(tp in self._ctx.leadership for tp in remaining)
            if cached:
                current = {tp: self._ctx.leadership[tp] for tp in remaining}
            else:
                current = await self._store.read_partition_states(remaining)
            proposals: dict[TopicPartition, tuple[LeaderAndIsr, selectors.Election]] = {}
            reread: set[TopicPartition] = set()
            for tp in remaining:
                lai = current.get(tp)
                election = None
                if lai is None:
                    error = StateChangeFailed(f"partition {tp}: no state znode to elect from")
                elif lai.controller_epoch > self._ctx.epoch:
                    error = StateChangeFailed(
                        f"partition {tp}: written by controller epoch {lai.controller_epoch}"
                        f" > ours {self._ctx.epoch}"
                    )
                elif (election := self._elect(tp, lai, strategy)) is None:
                    self._ctx.leadership[tp] = lai
                    error = StateChangeFailed(
                        f"partition {tp}: {strategy.value} election found no eligible leader"
                        f" (AR {list(self._ctx.replicas_for(tp))}, ISR {list(lai.isr)},"
                        f" online {sorted(self._ctx.online_replica_brokers(tp))})"
                    )
                if lai is not None and election is not None:
                    proposals[tp] = (
                        lai.new_leader(election.leader, election.isr, self._ctx.epoch),
                        election,
                    )
                elif cached:
                    reread.add(tp)
                else:
                    failures[tp] = error
            conflicts: set[TopicPartition] = set()
            if proposals:
                result = await self._store.update_partition_states(
                    {tp: lai for tp, (lai, _) in proposals.items()}
                )
                conflicts = result.conflicts
                for tp, written in result.written.items():
                    self._record_election(tp, written, proposals[tp][1])
            remaining = sorted(conflicts | reread)
        for tp in remaining:
            failures[tp] = StateChangeFailed(f"partition {tp}: kept losing conditional updates")
        for failure in failures.values():
            log_failure(failure)
        return failures

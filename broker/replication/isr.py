"""The leader's side of replication: follower progress, ISR expand / shrink, propagation.

Follower progress (``record_follower_fetch``, Kafka's Replica.updateLogReadResult). A
follower's fetch at offset F tells the leader the follower's LEO is F. It also says how
recently the follower was caught up: F >= the leader's LEO at this read means "caught
up now"; F >= the leader's LEO at the *previous* read means "caught up as of the
previous read" (a follower always fetches one round behind the newest appends, so
judging by the current read alone would call a busy partition's followers lagging).

ISR changes (the leader owns the ISR between leader elections):

- expand: a follower outside the ISR whose LEO reached the leader's HW, and the start
  of the leader's current epoch (so it has truncated against this leader), joins;
- shrink: a follower in the ISR not caught up for ``replica.lag.time.max.ms`` leaves;
  checked every half of that period (``IsrManager.run``).

A change is written first, to ``/brokers/topics/T/partitions/P/state`` with a
conditional update on the zkVersion this leader knows, and applied in memory only once
ZooKeeper has it. Changes are queued and one writer task sends every queued change in
one pipelined batch (a broker back from an outage expands thousands of ISRs at once:
one ZooKeeper round trip each, in sequence or in a thread apiece, took seconds); what
is queued while a batch is in flight goes in the next. While a write is in flight the
HW keeps using the old ISR, which is the safe side for both directions (a shrinking ISR
still waits for the slow follower, an expanding one does not count the new member
yet). A lost race (BadVersion) re-reads the znode; if it still names this leader at
this epoch the leader adopts its ISR and version and the next check decides again,
otherwise a LeaderAndIsr is on its way.

Changed partitions are also reported under ``/isr_change_notification`` in batches, as
Kafka does: at most every ``ISR_PROPAGATION_CHECK_S``, once no change came for
``ISR_PROPAGATION_BLACKOUT_S`` or the last report is ``ISR_PROPAGATION_MAX_DELAY_S``
old; the controller turns them into UpdateMetadata.

Without a ZooKeeper store (a standalone broker driven by a test playing the controller)
changes apply in memory at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

import trio

from minibroker.broker.replication.partition import Partition
from minibroker.broker.replication.summaries import some_of
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.zk.values import LeaderAndIsr, WriteResult

log = logging.getLogger(__name__)

ISR_PROPAGATION_CHECK_S = 2.5
"""Kafka's isr-change-propagation period: how often pending changes are looked at."""
ISR_PROPAGATION_BLACKOUT_S = 5.0
"""Wait for this much quiet before reporting, so a burst of changes is one notification."""
ISR_PROPAGATION_MAX_DELAY_S = 60.0
"""...but never hold changes back longer than this under constant churn."""


class IsrStore(Protocol):
    """What the ISR writer needs of ZooKeeper (zk/data.py's KafkaZkClient has it)."""

    async def update_partition_states(
        self, states: Mapping[TopicPartition, LeaderAndIsr]
    ) -> WriteResult: ...
    async def read_partition_states(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, LeaderAndIsr]: ...
    async def create_isr_change_notification(self, partitions: Iterable[TopicPartition]) -> str: ...


# -- follower progress and the ISR rules (pure, on a Partition) --------------------------


def record_follower_fetch(
    partition: Partition, replica_id: int, fetch_offset: int, leader_leo: int, now_ms: int
) -> None:
    """Note a follower's fetch at ``fetch_offset`` read while the leader's LEO was
    ``leader_leo`` (see the module docstring for the caught-up rule)."""
    replica = partition.remote_replicas.get(replica_id)
    if replica is None:
        return
    if fetch_offset >= leader_leo:
        replica.last_caught_up_time_ms = max(replica.last_caught_up_time_ms, now_ms)
    elif fetch_offset >= replica.last_fetch_leader_log_end_offset:
        replica.last_caught_up_time_ms = max(
            replica.last_caught_up_time_ms, replica.last_fetch_time_ms
        )
    replica.log_end_offset = fetch_offset
    replica.last_fetch_leader_log_end_offset = leader_leo
    replica.last_fetch_time_ms = now_ms


def leader_epoch_start_offset(partition: Partition) -> int:
    """Where the leader's current epoch starts in its log (its LEO if not recorded)."""
    for entry in reversed(partition.log.leader_epoch_cache.entries):
        if entry.epoch == partition.leader_epoch:
            return entry.start_offset
        if entry.epoch < partition.leader_epoch:
            break
    return partition.log.log_end_offset


def can_join_isr(partition: Partition, replica_id: int) -> bool:
    """A follower outside the ISR that caught up with the HW of this leadership."""
    if not partition.is_leader or replica_id in partition.isr:
        return False
    if replica_id not in partition.assigned_replicas:
        return False
    replica = partition.remote_replicas.get(replica_id)
    if replica is None:
        return False
    leo = replica.log_end_offset
    return leo >= partition.high_watermark and leo >= leader_epoch_start_offset(partition)


def out_of_sync_replicas(partition: Partition, now_ms: int, max_lag_ms: int) -> set[int]:
    """ISR followers not caught up within ``max_lag_ms`` (the leader never is)."""
    lagging = set()
    for replica_id in partition.isr:
        if replica_id == partition.local_broker_id:
            continue
        replica = partition.remote_replicas.get(replica_id)
        if replica is None or now_ms - replica.last_caught_up_time_ms > max_lag_ms:
            lagging.add(replica_id)
    return lagging


# -- the ISR writer --------------------------------------------------------------------------


def _describe(partition: Partition, new_isr: frozenset[int], expand: bool) -> str:
    how = "expands" if expand else "shrinks"
    return f"{partition.tp} {how} from {sorted(partition.isr)} to {sorted(new_isr)}"


@dataclass(frozen=True, slots=True)
class _IsrChange:
    """One queued ISR change, with the leadership (epoch) and znode version it was
    decided under."""

    partition: Partition
    new_isr: frozenset[int]
    expand: bool
    epoch: int = field(init=False)
    version: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "epoch", self.partition.leader_epoch)
        object.__setattr__(self, "version", self.partition.zk_version)

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.partition.tp.topic, self.partition.tp.partition)

    def state(self) -> LeaderAndIsr:
        partition = self.partition
        return LeaderAndIsr(
            leader=partition.local_broker_id,
            leader_epoch=self.epoch,
            isr=tuple(sorted(self.new_isr)),
            controller_epoch=partition.controller_epoch,
            zk_version=self.version,
        )

    def still_current(self) -> bool:
        """This broker still leads the partition in the epoch the change was made in."""
        return self.partition.leader_epoch == self.epoch and self.partition.is_leader


class IsrManager:
    """Writes ISR changes and reports them; see the module docstring."""

    def __init__(
        self,
        *,
        partitions: Callable[[], Iterable[Partition]],
        store: IsrStore | None,
        on_isr_changed: Callable[[Partition, bool], None],
        clock: Callable[[], int],
        replica_lag_time_max_ms: int,
    ) -> None:
        self._partitions = partitions
        self._store = store
        self._on_isr_changed = on_isr_changed
        self._clock = clock
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self._nursery: trio.Nursery | None = None
        self._in_flight: set[TopicPartition] = set()  # queued or being written
        self._queued: list[_IsrChange] = []
        self._wake_writer = trio.Event()
        self._changed: set[TopicPartition] = set()
        self._last_change = 0.0
        self._last_propagation = 0.0
        self.expands = 0
        self.shrinks = 0

    # -- triggers ---------------------------------------------------------------------

    def maybe_expand(self, partition: Partition, replica_id: int) -> None:
        """After a follower fetch: start adding it to the ISR if it caught up."""
        if can_join_isr(partition, replica_id):
            self._change(partition, partition.isr | {replica_id}, expand=True)

    def maybe_shrink_all(self) -> None:
        now = self._clock()
        for partition in list(self._partitions()):
            if not partition.is_leader:
                continue
            lagging = out_of_sync_replicas(partition, now, self.replica_lag_time_max_ms)
            if lagging:
                self._change(partition, partition.isr - lagging, expand=False)

    def _change(self, partition: Partition, new_isr: frozenset[int], *, expand: bool) -> None:
        tp = partition.tp
        if tp in self._in_flight or new_isr == partition.isr:
            return
        if self._store is None or self._nursery is None:
            self._apply(partition, new_isr, partition.zk_version, expand)
            return
        self._in_flight.add(tp)
        self._queued.append(_IsrChange(partition, new_isr, expand))
        self._wake_writer.set()

    async def _write_queued(self, store: IsrStore) -> None:
        """The writer task: every change queued so far, in one batch, until cancelled."""
        while True:
            await self._wake_writer.wait()
            self._wake_writer = trio.Event()
            batch, self._queued = self._queued, []
            try:
                await self._write(store, batch)
            finally:
                for change in batch:
                    self._in_flight.discard(change.partition.tp)

    async def _write(self, store: IsrStore, batch: list[_IsrChange]) -> None:
        states = {change.tp: change.state() for change in batch}
        try:
            result = await store.update_partition_states(states)
            lost = [change for change in batch if change.tp not in result.written]
            current = await store.read_partition_states([c.tp for c in lost]) if lost else {}
        except Exception as exc:  # ZooKeeper trouble: the next check tries again
            log.warning("cannot write the ISR of %d partitions: %r", len(batch), exc)
            for change in batch:
                partition = change.partition
                if change.expand and change.still_current():
                    # The write may have reached ZooKeeper before the connection
                    # dropped; the controller may then elect the new member, so the HW
                    # waits for it from now on (only slower if it did not). The version
                    # stays the one we know: the next write re-reads the state if
                    # ZooKeeper's moved on.
                    log.info(
                        "%s: counting %s as in sync until its ISR is known",
                        change.tp,
                        sorted(change.new_isr),
                    )
                    partition.isr = change.new_isr
                    self._on_isr_changed(partition, True)
            return
        applied: list[str] = []
        for change in batch:
            written = result.written.get(change.tp)
            if written is not None:
                if change.still_current():
                    applied.append(_describe(change.partition, change.new_isr, change.expand))
                    self._apply(
                        change.partition,
                        change.new_isr,
                        written.zk_version,
                        change.expand,
                        logged=False,
                    )
            else:
                self._adopt(change, current.get(change.tp))
        if applied:  # one line per batch: a broker back from an outage rejoins thousands
            log.info(
                "ISR of %d partitions changed: %s", len(applied), some_of(applied, len(applied))
            )

    def _adopt(self, change: _IsrChange, current: LeaderAndIsr | None) -> None:
        """After a lost race: take the stored ISR if the state still names this
        leadership (the next check decides again), else a LeaderAndIsr is coming."""
        partition = change.partition
        if (
            current is not None
            and current.leader == partition.local_broker_id
            and current.leader_epoch == partition.leader_epoch
            and partition.is_leader
        ):
            log.info(
                "%s: ISR update lost a race; adopting %s from ZooKeeper", change.tp, current.isr
            )
            partition.zk_version = current.zk_version
            partition.isr = frozenset(current.isr)
            self._on_isr_changed(partition, True)
        else:
            log.info("%s: ISR update skipped, the partition state moved on: %s", change.tp, current)

    def _apply(
        self,
        partition: Partition,
        new_isr: frozenset[int],
        version: int,
        expand: bool,
        *,
        logged: bool = True,
    ) -> None:
        if logged:
            log.info("ISR of %s", _describe(partition, new_isr, expand))
        partition.isr = new_isr
        partition.zk_version = version
        if expand:
            self.expands += 1
        else:
            self.shrinks += 1
        self._changed.add(partition.tp)
        self._last_change = trio.current_time()
        self._on_isr_changed(partition, expand)

    # -- periodic work ----------------------------------------------------------------

    async def maybe_propagate(self, *, force: bool = False) -> None:
        """Report batched ISR changes under /isr_change_notification (Kafka's rule)."""
        store = self._store
        if store is None:
            self._changed.clear()  # standalone: no controller to tell
            return
        if not self._changed:
            return
        now = trio.current_time()
        if not (
            force
            or now - self._last_change > ISR_PROPAGATION_BLACKOUT_S
            or now - self._last_propagation > ISR_PROPAGATION_MAX_DELAY_S
        ):
            return
        changed, self._changed = self._changed, set()
        try:
            await store.create_isr_change_notification(
                sorted(TopicPartition(tp.topic, tp.partition) for tp in changed)
            )
        except Exception as exc:
            log.warning("cannot report ISR changes of %s: %r", sorted(changed), exc)
            self._changed |= changed
            return
        self._last_propagation = now

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Shrink checks every half lag period, propagation every few seconds."""
        self._last_change = self._last_propagation = trio.current_time()
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._shrink_loop)
            if self._store is not None:
                nursery.start_soon(self._write_queued, self._store)
            task_status.started()
            while True:
                await trio.sleep(ISR_PROPAGATION_CHECK_S)
                await self.maybe_propagate()

    async def _shrink_loop(self) -> None:
        interval = max(self.replica_lag_time_max_ms / 2000, 0.01)
        while True:
            await trio.sleep(interval)
            self.maybe_shrink_all()

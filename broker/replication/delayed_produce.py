"""Delayed produce: an acks=all answer waits until the ISR has every appended batch.

Kafka's DelayedProduce, as the request's own Trio task parked in the ReplicaManager's
``produce_waiters`` (a ``DelayedProducePurgatory``), which is notified whenever a
partition's HW moves, its ISR changes or its leadership changes. Per partition the
append is *acknowledged* when, on a check:

- this broker no longer leads the partition -> NOT_LEADER_OR_FOLLOWER (the client
  retries on the new leader; the batch may or may not survive there);
- the HW reached the batch's end (HW > its last offset):
  - the offset's leader epoch is no longer the one we wrote it in -> the batch was
    truncated away by a newer leader and something else sits there:
    NOT_LEADER_OR_FOLLOWER;
  - the ISR is smaller than ``min.insync.replicas`` -> NOT_ENOUGH_REPLICAS_AFTER_APPEND
    (the ISR shrank under the batch: it is written, but on fewer replicas than asked);
  - otherwise success;
- else not yet: wait for the next wake-up, until ``timeout_ms`` (REQUEST_TIMED_OUT).

Why not the plain purgatory: waking every parked request of a partition on each HW move
costs O(parked) per move, and under load (hundreds of acks=all requests in flight, a
move per follower fetch) that quadratic work is what keeps the backlog from draining.
Waiters are kept per partition in a heap by last offset instead; a notify completes
waiters from the smallest offset up and stops at the first the HW has not reached (the
HW only grows, so no later one is ready either): O(completed) per notify. A waiter that
times out is marked done and dropped lazily.

Register first, then check, with no await between: no HW move can slip between the
check and the wait.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import trio

from minibroker.broker.replication.partition import Partition
from minibroker.broker.replication.purgatory import Purgatory
from minibroker.protocol.errors import (
    KafkaError,
    NotEnoughReplicasAfterAppendError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
)
from minibroker.protocol.topic_partition import TopicPartition


@dataclass(frozen=True, slots=True)
class PendingAck:
    """One partition's appended batches awaiting replication."""

    tp: TopicPartition
    last_offset: int
    leader_epoch: int


def check_acknowledged(
    partition: Partition | None, pending: PendingAck
) -> tuple[bool, KafkaError | None]:
    """(done, error): done with error None is acknowledged; not done: keep waiting."""
    if partition is None or not partition.is_leader:
        return True, NotLeaderOrFollowerError(f"{pending.tp}: leadership moved before replication")
    if partition.high_watermark <= pending.last_offset:
        return False, None
    if partition.epoch_for_offset(pending.last_offset) != pending.leader_epoch:
        return True, NotLeaderOrFollowerError(
            f"{pending.tp}: offset {pending.last_offset} was replaced by a newer leader"
        )
    min_isr = partition.config.min_insync_replicas
    if len(partition.isr) < min_isr:
        return True, NotEnoughReplicasAfterAppendError(
            f"{pending.tp}: ISR {sorted(partition.isr)} shrank below min.insync.replicas {min_isr}"
        )
    return True, None


class AckWaiter:
    """One partition of one acks=all request: done once answered (or abandoned)."""

    __slots__ = ("done", "error", "event", "pending")

    def __init__(self, pending: PendingAck) -> None:
        self.pending = pending
        self.done = False
        self.error: KafkaError | None = None
        self.event = trio.Event()

    def finish(self, error: KafkaError | None) -> None:
        self.done, self.error = True, error
        self.event.set()


class DelayedProducePurgatory(Purgatory[TopicPartition]):
    """The produce purgatory: plain ``watch`` waiters plus offset-ordered acks=all
    waiters (see the module docstring); ``notify(tp)`` serves both."""

    def __init__(self, partition_of: Callable[[TopicPartition], Partition | None]) -> None:
        super().__init__("produce")
        self._partition_of = partition_of
        self._acks: dict[TopicPartition, list[tuple[int, int, AckWaiter]]] = {}
        self._order = itertools.count()  # heap tie-break: never compare waiters
        self._parked = 0

    def add(self, pending: PendingAck) -> AckWaiter:
        """Park an acks=all wait (answered at once if already acknowledged)."""
        waiter = AckWaiter(pending)
        heap = self._acks.setdefault(pending.tp, [])
        heapq.heappush(heap, (pending.last_offset, next(self._order), waiter))
        self._parked += 1
        self._complete(pending.tp)
        return waiter

    def abandon(self, waiter: AckWaiter) -> None:
        """A timed-out waiter: done, dropped from its heap at the next notify."""
        if not waiter.done:
            waiter.done = True
            self._parked -= 1

    def notify(self, key: TopicPartition) -> int:
        # Every acks=1 append to a single-replica leader moves the HW and lands here,
        # usually with nobody waiting: that case costs no further call.
        woken = super().notify(key) if key in self._watchers else 0
        return woken + self._complete(key) if key in self._acks else woken

    def notify_all(self) -> None:
        super().notify_all()
        for tp in list(self._acks):
            self._complete(tp)

    @property
    def watched(self) -> int:
        return super().watched + self._parked

    def _complete(self, tp: TopicPartition) -> int:
        heap = self._acks.get(tp)
        if not heap:
            return 0
        partition = self._partition_of(tp)
        completed = 0
        while heap:
            waiter = heap[0][2]
            if not waiter.done:
                done, error = check_acknowledged(partition, waiter.pending)
                if not done:
                    break  # the HW has not reached the smallest offset: nor any later one
                waiter.finish(error)
                self._parked -= 1
                completed += 1
            heapq.heappop(heap)
        if not heap:
            del self._acks[tp]
        return completed


async def await_replication(
    pending: Sequence[PendingAck], *, waiters: DelayedProducePurgatory, timeout_ms: int
) -> dict[TopicPartition, KafkaError | None]:
    """Wait until every pending append is acknowledged or answered; one outcome each."""
    parked = [waiters.add(p) for p in pending]
    if not all(waiter.done for waiter in parked):  # else (a single replica): no wait at all
        with trio.move_on_after(max(timeout_ms, 0) / 1000):
            for waiter in parked:
                await waiter.event.wait()
    outcomes: dict[TopicPartition, KafkaError | None] = {}
    for waiter in parked:
        tp = waiter.pending.tp
        if waiter.done:
            outcomes[tp] = waiter.error
        else:
            waiters.abandon(waiter)
            outcomes[tp] = RequestTimedOutError(
                f"{tp}: not replicated to the ISR within {timeout_ms} ms"
            )
    return outcomes

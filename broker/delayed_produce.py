"""Delayed produce: an acks=all answer waits until the ISR has every appended batch.

Kafka's DelayedProduce, as the request's own Trio task parked in the ReplicaManager's
``produce_waiters`` purgatory (woken whenever a partition's HW moves or its leadership
changes). Per partition the append is *acknowledged* when, on a check:

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

Register first, then check, with no await between (see broker/purgatory.py): no HW
move can slip between the check and the wait.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import trio

from broker.partition import Partition
from broker.purgatory import Purgatory
from protocol.errors import (
    KafkaError,
    NotEnoughReplicasAfterAppendError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
)
from storage.names import TopicPartition


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


async def await_replication(
    pending: Sequence[PendingAck],
    *,
    partition_of: Callable[[TopicPartition], Partition | None],
    waiters: Purgatory[TopicPartition],
    timeout_ms: int,
) -> dict[TopicPartition, KafkaError | None]:
    """Wait until every pending append is acknowledged or answered; one outcome each."""
    outcomes: dict[TopicPartition, KafkaError | None] = {}
    remaining = {p.tp: p for p in pending}
    deadline = trio.current_time() + max(timeout_ms, 0) / 1000

    def check_all() -> None:
        for tp, item in list(remaining.items()):
            done, error = check_acknowledged(partition_of(tp), item)
            if done:
                outcomes[tp] = error
                del remaining[tp]

    while remaining:
        with waiters.watch(remaining) as waiter:
            check_all()
            if remaining and not await waiter.wait_until(deadline):
                check_all()  # a last look: a wake-up may have raced the deadline
                break
    for tp in remaining:
        outcomes[tp] = RequestTimedOutError(
            f"{tp}: not replicated to the ISR within {timeout_ms} ms"
        )
    return outcomes

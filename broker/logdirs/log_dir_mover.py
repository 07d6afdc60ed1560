"""Moving replicas between the log dirs of this broker (Kafka's ReplicaAlterLogDirsThread).

How this works. A move *is* a future log: AlterReplicaLogDirs creates
``<topic>-<partition>.<uuid>-future`` in the target dir (``LogManager`` keeps it among
its future logs), and this mover copies the partition's current log into it, then
swaps the two. Because the state lives on disk, a broker restarted mid-move finds the
future dir at start-up and resumes where the copy stopped; a future log whose
partition has no current log any more (deleted meanwhile) is discarded.

- One partition at a time, the first in (topic, partition) order: finishing one move
  frees its old dir sooner than advancing all of them a little.
- The copy reads whole batches from the LOCAL current log (never from the leader) and
  appends them to the future log keeping their offsets and leader epochs, in chunks of
  at most ``MOVE_CHUNK_BYTES``. Each chunk is one synchronous step on the Trio thread,
  so no produce, follower fetch or truncation can interleave with it.
- Throttle: every chunk is paid for in a token bucket refilled at
  ``replica.alter.log.dirs.io.max.bytes.per.second``; the bucket starts empty, so over
  any long move the rate holds from the first byte.
- The current log may change under the copy: appends (copied by the next chunks),
  truncation by a follower (``Log.truncation_count`` moves: the future log is cut back
  at the last epoch both logs agree on, KIP-279's rule, or restarted when they agree on
  nothing) and retention (the future log restarts at the new log start when it fell
  behind it).
- The swap: once a chunk finds nothing left to copy, the future log is fsynced in a
  worker thread, then - holding the LogManager lock so no worker thread touches the
  logs - the last bytes are copied and ``LogManager.replace_current_with_future`` runs,
  and ``Partition.log`` is rebound, all in one synchronous step. A record acknowledged
  before the step is in the copy; one produced after it goes to the new log; none is
  lost or written twice. The old dir, renamed ``-delete``, is removed in a thread.
- Cancelling (a new AlterReplicaLogDirs naming another dir) deletes the future log;
  the mover notices that its log is gone at its next step.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

import trio

from minibroker.protocol.records import read_header
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.storage.errors import CorruptRecordError
from minibroker.storage.log import Log
from minibroker.storage.log_manager import LogManager

log = logging.getLogger(__name__)

MOVE_CHUNK_BYTES = 1024 * 1024
"""Largest copy step (Kafka's replica.fetch.max.bytes default); a batch larger than this
still goes whole. Each step holds the Trio thread for about a millisecond per MiB."""
MIN_CHUNK_BYTES = 4096
"""Smallest step under a very low throttle: smaller reads cost more in syscalls."""
CHUNKS_PER_SECOND = 10
"""Under a throttle a step is at most a tenth of a second's budget, so the rate is smooth."""
RESCAN_INTERVAL_S = 1.0
"""How often an idle mover looks for future logs whose partition appeared meanwhile
(after a restart the LeaderAndIsr that recreates the partition comes later)."""


class MoverReplicas(Protocol):
    """What the mover needs of the ReplicaManager."""

    @property
    def partitions(self) -> Mapping[TopicPartition, HasLog]: ...

    @property
    def log_manager(self) -> LogManager: ...

    @property
    def log_manager_lock(self) -> trio.Lock: ...


class HasLog(Protocol):
    log: Log


class TokenBucket:
    """``rate`` bytes per second, paid after the fact: ``debit(n)`` returns how long to
    wait before the next step. The bucket starts empty and holds at most ``burst_s``
    seconds of idle credit, so a long transfer averages ``rate`` from its start."""

    def __init__(
        self, rate: float, *, burst_s: float = 0.1, clock: Callable[[], float] = trio.current_time
    ) -> None:
        if rate <= 0:
            raise ValueError(f"rate must be positive, not {rate}")
        self.rate = float(rate)
        self.burst_s = burst_s
        self._clock = clock
        self._tokens = 0.0
        self._last: float | None = None

    def set_rate(self, rate: float) -> None:
        if rate <= 0:
            raise ValueError(f"rate must be positive, not {rate}")
        self.rate = float(rate)

    def debit(self, nbytes: int) -> float:
        now = self._clock()
        if self._last is not None:
            self._tokens = min(
                self.rate * self.burst_s, self._tokens + (now - self._last) * self.rate
            )
        self._last = now
        self._tokens -= nbytes
        return max(0.0, -self._tokens / self.rate)

    async def pay(self, nbytes: int) -> None:
        delay = self.debit(nbytes)
        if delay > 0:
            await trio.sleep(delay)


class LogDirMover:
    """Copies current logs into their future logs, one partition at a time."""

    def __init__(
        self,
        replicas: MoverReplicas,
        *,
        rate_bytes_per_s: float,
        clock: Callable[[], float] = trio.current_time,
    ) -> None:
        self.replicas = replicas
        self.bucket = TokenBucket(rate_bytes_per_s, clock=clock)
        self.moving: TopicPartition | None = None
        self.completed = 0  # moves finished since start (tests and metrics read it)
        self.bytes_copied = 0
        self._wakeup = trio.Event()
        self._seen_truncations: dict[TopicPartition, int] = {}

    @property
    def log_manager(self) -> LogManager:
        return self.replicas.log_manager

    def wake(self) -> None:
        """A move was requested or cancelled: look again now."""
        self._wakeup.set()

    def chunk_bytes(self) -> int:
        return int(
            max(MIN_CHUNK_BYTES, min(MOVE_CHUNK_BYTES, self.bucket.rate / CHUNKS_PER_SECOND))
        )

    def future_dir(self, tp: TopicPartition) -> Path | None:
        future = self.log_manager.get_log(tp, is_future=True)
        return None if future is None else future.dir.parent

    # -- the task ----------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        await self.discard_orphans()
        task_status.started()
        while True:
            tp = self._next_move()
            if tp is None:
                self._wakeup = trio.Event()
                with trio.move_on_after(RESCAN_INTERVAL_S):
                    await self._wakeup.wait()
                await self.discard_orphans()
                continue
            self.moving = tp
            try:
                await self.move(tp)
            except (OSError, ValueError, CorruptRecordError) as exc:
                # ValueError: a file closed under us. CorruptRecordError: a corrupt
                # batch is never copied; reads or the scrubber get the replica repaired.
                # A failing disk: leave the future dir for the next attempt (or for the
                # restart that marks the dir offline) and do not spin on it.
                log.error("moving %s failed: %s", tp, exc)
                await trio.sleep(RESCAN_INTERVAL_S)
            finally:
                self.moving = None

    def _next_move(self) -> TopicPartition | None:
        hosted = self.replicas.partitions
        ready = [tp for tp in self.log_manager.future_logs if tp in hosted]
        return min(ready) if ready else None

    async def discard_orphans(self) -> None:
        """Delete future logs whose partition has no current log here (deleted, or never
        created because the move was cancelled by a restart in between)."""
        manager = self.log_manager
        orphans = [tp for tp in manager.future_logs if manager.get_log(tp) is None]
        if not orphans:
            return
        async with self.replicas.log_manager_lock:

            def delete() -> None:
                for tp in orphans:
                    if manager.get_log(tp) is None and manager.delete_log(tp, is_future=True):
                        log.info("discarded the future log of %s: no current log", tp)
                manager.remove_deleted_logs()

            await trio.to_thread.run_sync(delete)

    async def move(self, tp: TopicPartition) -> bool:
        """Copy until caught up, then swap; False if the move was cancelled or its
        partition went away before the end."""
        while True:
            source = self._source(tp)
            future = self.log_manager.get_log(tp, is_future=True)
            if source is None or future is None:
                return False
            if not self.log_manager.is_log_dir_online(source.dir.parent):
                return False  # its replica went offline with its dir
            copied = self.copy_step(tp, source, future, self.chunk_bytes())
            if copied:
                self.bytes_copied += copied
                await self.bucket.pay(copied)
                await trio.lowlevel.checkpoint()
                continue
            return await self._swap(tp)

    def _source(self, tp: TopicPartition) -> Log | None:
        partition = self.replicas.partitions.get(tp)
        return None if partition is None else partition.log

    def copy_step(self, tp: TopicPartition, current: Log, future: Log, max_bytes: int) -> int:
        """One synchronous step: reconcile ``future`` with changes to ``current`` and
        append the next batches (at most ``max_bytes``, at least one batch); the number
        of bytes copied (0: caught up)."""
        truncations = current.truncation_count
        if (
            self._seen_truncations.get(tp) != truncations
            or future.log_end_offset > current.log_end_offset
        ):
            self._reconcile(current, future)
            self._seen_truncations[tp] = truncations
        if future.log_end_offset < current.log_start_offset:
            future.truncate_fully_and_start_at(first_batch_offset(current))
        if future.log_end_offset >= current.log_end_offset:
            return 0
        # The log start may lie inside the batch the future log ends before.
        position = max(future.log_end_offset, current.log_start_offset)
        data = current.read(position, max_bytes, min_one_batch=True)
        if not len(data.records):
            return 0
        future.append_as_follower(data.records)
        start = current.log_start_offset
        if future.log_start_offset < start <= future.log_end_offset:
            future.maybe_increment_log_start_offset(start)
        return len(data.records)

    @staticmethod
    def _reconcile(current: Log, future: Log) -> None:
        """Cut the future log back to where it agrees with the current one."""
        if future.log_end_offset == 0 and future.log_start_offset == 0:
            return  # nothing copied yet
        latest = future.leader_epoch_cache.latest_epoch
        epoch, end = current.leader_epoch_cache.end_offset_for(latest)
        if latest < 0 or end < 0 or epoch < 0:
            future.truncate_fully_and_start_at(current.log_start_offset)
            return
        future.truncate_to(min(end, current.log_end_offset))

    async def _swap(self, tp: TopicPartition) -> bool:
        manager = self.log_manager
        future = manager.get_log(tp, is_future=True)
        if future is None:
            return False
        await trio.to_thread.run_sync(future.flush)  # the bulk of the fsync, off the loop
        async with self.replicas.log_manager_lock:
            # From here to the rebinding nothing awaits: no append can slip between the
            # last copied batch and the swap.
            partition = self.replicas.partitions.get(tp)
            future = manager.get_log(tp, is_future=True)
            if partition is None or future is None:
                return False
            current = partition.log
            while self.copy_step(tp, current, future, MOVE_CHUNK_BYTES):
                pass
            for entry in current.leader_epoch_cache.entries:  # epochs that hold no batch yet
                future.leader_epoch_cache.assign(entry.epoch, entry.start_offset)
            old_dir = current.dir.parent
            partition.log = manager.replace_current_with_future(tp)
            self._seen_truncations.pop(tp, None)
            self.completed += 1
            log.info("moved %s from %s to %s", tp, old_dir, partition.log.dir.parent)
            await trio.to_thread.run_sync(manager.remove_deleted_logs)
        return True

    # -- requests ------------------------------------------------------------------------------

    async def cancel(self, tp: TopicPartition) -> None:
        """Drop the future log of ``tp`` (a move to another dir replaces this one)."""
        manager = self.log_manager
        async with self.replicas.log_manager_lock:

            def delete() -> None:
                if manager.delete_log(tp, is_future=True) is not None:
                    manager.remove_deleted_logs()

            await trio.to_thread.run_sync(delete)
        self._seen_truncations.pop(tp, None)
        log.info("cancelled the move of %s", tp)

    async def start(self, tp: TopicPartition, target: Path) -> None:
        """Create the future log of ``tp`` in ``target`` (if not there yet) and wake the
        mover. The future log starts where the current log starts."""
        manager = self.log_manager
        current = self._source(tp)
        assert current is not None
        start = current.log_start_offset
        async with self.replicas.log_manager_lock:

            def create() -> None:
                future = manager.get_or_create_log(
                    tp, is_future=True, preferred_dir=target, config=current.config
                )
                if future.log_end_offset == 0 and start > 0:
                    future.truncate_fully_and_start_at(first_batch_offset(current))

            await trio.to_thread.run_sync(create)
        self.wake()


def first_batch_offset(log: Log) -> int:
    """The base offset of the batch holding ``log``'s start offset: the log start may lie
    inside a batch, and a copy must begin with whole batches."""
    data = log.read(log.log_start_offset, 1, min_one_batch=True)
    if not len(data.records):
        return log.log_start_offset
    return read_header(data.records).base_offset

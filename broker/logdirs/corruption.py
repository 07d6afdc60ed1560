"""A corrupt replica: taken out of service, repaired from the leader, back in sync.

How this works. Corruption in a replica's log is found by a read (``Log.read`` raises
CorruptRecordError: the corrupt batch is never served) or by the ``Scrubber``, which
re-reads every closed segment at a throttled rate. Either hands it to
``CorruptReplicas.found``, on the Trio thread:

1. The replica is marked corrupt (``Partition.corruption``): every request on it,
   LeaderAndIsr included, is answered KAFKA_STORAGE_ERROR; it leaves the fetcher and
   its parked requests wake. The WARNING names the file, position and offsets.
2. The controller is told through the failed-log-dir route (controller/
   replica_failure.py): a ``/log_dir_event_notification`` znode naming this broker.
   It resends LeaderAndIsr, reads KAFKA_STORAGE_ERROR for this replica, elects another
   leader from the ISR if this one led, takes this replica out of the ISR and sends it
   StopReplica (keeping its data).
3. That StopReplica (``stopped``) repairs the log: ``Log.repair_corruption`` cuts it at
   the first bad batch. The mark is cleared and the controller told again; its
   LeaderAndIsr now finds the replica healthy and makes it a follower, which fetches
   what was cut from the leader and rejoins the ISR once caught up.

Standalone (no ZooKeeper) nobody can take over: the log is repaired at once, keeping
every batch before the corruption.
"""

from __future__ import annotations

import logging
import os

import trio

from minibroker.broker.config.broker_config import BrokerConfig
from minibroker.broker.replication.hosted_replicas import HostedReplicas
from minibroker.broker.replication.partition import Partition
from minibroker.storage.errors import CorruptRecordError
from minibroker.storage.scrubber import SegmentScan
from minibroker.storage.segment import LogSegment
from minibroker.zk.data import KafkaZkClient

log = logging.getLogger(__name__)

NOTIFY_RETRY_S = 1.0
"""Pause before writing the controller notification again after ZooKeeper failed."""
SCRUB_CHUNK_BYTES = 1024 * 1024
"""One read of the scrubber: big enough for few syscalls, small enough to throttle."""


class CorruptReplicas:
    """Steps 1-3 of the module docstring."""

    def __init__(self, replicas: HostedReplicas, *, zk: KafkaZkClient | None) -> None:
        """``zk`` is None on a standalone broker."""
        self.replicas = replicas
        self.zk = zk
        self._unreported = trio.Event()

    def found(
        self,
        partition: Partition,
        error: CorruptRecordError,
        source: str,
        *,
        counted: bool = False,
    ) -> None:
        """``partition``'s log holds a corrupt batch (found by ``source``; already
        ``counted`` in the stats, or not), or lost records below its high watermark
        when loaded (source "recovery")."""
        if partition.corruption is not None:
            return
        if not counted:
            stats = self.replicas.log_manager.corruption_stats
            stats.record(source, where=(error.path, error.position))
        partition.corruption = error
        role = "leader" if partition.is_leader else "follower"
        log.warning(
            "%s: corrupt %s replica, found by %s: %s; taking it out of service",
            partition.tp,
            role,
            source,
            error,
        )
        rm = self.replicas
        if rm.fetcher is not None:
            rm.fetcher.remove_partitions([partition.tp])
        rm.fetch_waiters.notify(partition.tp)
        rm.produce_waiters.notify(partition.tp)
        if self.zk is None:
            self.stopped(partition)  # standalone: no other replica to hand over to
        else:
            self._unreported.set()

    def stopped(self, partition: Partition) -> None:
        """The controller stopped the corrupt replica: cut its log before the
        corruption and let the controller make it a follower again."""
        error = partition.corruption
        if error is None:
            return
        size = partition.log.size
        # Revalidates from the segment holding the offset and cuts at the first bad
        # batch: a false alarm (a read racing a segment deletion) cuts nothing.
        partition.log.repair_corruption(error.offset)
        if error.lost_from >= 0:
            # A segment that recovery cut short leaves its later segments behind a
            # hole: nothing from the cut on stays (it comes back from the leader).
            partition.log.truncate_to(error.lost_from)
        removed = size - partition.log.size
        self.replicas.log_manager.corruption_stats.record_repair(removed)
        partition.high_watermark = min(partition.high_watermark, partition.log_end_offset)
        partition.corruption = None
        replicated = self.zk is not None
        log.warning(
            "%s: corrupt replica repaired: %d bytes cut, its log now ends at offset %d%s",
            partition.tp,
            removed,
            partition.log_end_offset,
            "; the rest is fetched again from the leader" if replicated else "",
        )
        if replicated:
            self._unreported.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Tell the controller whenever a replica went corrupt or was repaired."""
        task_status.started()
        while True:
            await self._unreported.wait()
            self._unreported = trio.Event()
            while not await self._notify_controller():
                await trio.sleep(NOTIFY_RETRY_S)

    async def _notify_controller(self) -> bool:
        data = self.zk
        if data is None:
            return True
        try:
            await data.create_log_dir_event_notification(self.replicas.broker_id)
        except Exception as exc:  # ZooKeeper trouble: retried
            log.warning("cannot report a corrupt replica to the controller: %r", exc)
            return False
        return True


class Scrubber:
    """Re-reads every closed segment of every replica, ``log.scrubber.io.max.bytes.
    per.second`` at most, one pass every ``log.scrubber.interval.ms``; a corrupt batch
    goes to ``CorruptReplicas.found``. Reads run in worker threads on a descriptor of
    its own; the Log is only looked at on the Trio thread, and a finding is reported
    only if the segment is still in its log, untruncated, after the read."""

    def __init__(self, config: BrokerConfig, replicas: HostedReplicas) -> None:
        self.replicas = replicas
        self.enabled = config.log_scrubber_enable
        self.rate = config.log_scrubber_io_max_bytes_per_second
        self.interval_s = config.log_scrubber_interval_ms / 1000
        self.passes = 0
        self.bytes_checked = 0

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        if not self.enabled:
            return
        while True:
            await self.scrub_once()
            self.passes += 1
            await trio.sleep(self.interval_s)

    async def scrub_once(self) -> None:
        """One pass over the closed segments of every replica."""
        rm = self.replicas
        for tp in list(rm.partitions):
            partition = rm.partitions.get(tp)
            if partition is None or partition.corruption is not None:
                continue
            for segment in partition.log.segments[:-1]:
                if partition.corruption is not None:
                    break
                await self._scrub_segment(partition, segment)

    async def _scrub_segment(self, partition: Partition, segment: LogSegment) -> None:
        log_ = partition.log
        truncations = log_.truncation_count
        size, path = segment.size, segment.log_path
        scan = SegmentScan(segment.base_offset, size)
        try:
            fd = await trio.to_thread.run_sync(os.open, path, os.O_RDONLY)
        except OSError:
            return  # deleted meanwhile (retention, a move)
        try:
            position = 0
            while position < size:
                want = min(SCRUB_CHUNK_BYTES, size - position)
                chunk = await trio.to_thread.run_sync(os.pread, fd, want, position)
                if not chunk:
                    break  # truncated meanwhile: checked below
                position += len(chunk)
                self.bytes_checked += len(chunk)
                if not scan.feed(chunk):
                    break
                await trio.sleep(len(chunk) / self.rate)
            else:
                scan.finish()
        except OSError as exc:
            log.warning("scrubber: cannot read %s: %s", path, exc)
            return
        finally:
            os.close(fd)
        if scan.problem is None and position >= size:
            return
        still_there = any(s is segment for s in log_.segments[:-1])
        if (
            not still_there
            or log_.truncation_count != truncations
            or self.replicas.partitions.get(partition.tp) is not partition
        ):
            return  # the log changed under the read: nothing to conclude
        error = CorruptRecordError(
            f"{path}: {scan.problem or 'the file ended early'}"
            f" (offsets from {scan.next_offset} on)",
            path=str(path),
            position=scan.position,
            offset=scan.next_offset,
        )
        if self.replicas.corruption is not None:
            self.replicas.corruption.found(partition, error, "scrub")

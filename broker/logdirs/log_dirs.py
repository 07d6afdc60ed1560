"""AlterReplicaLogDirs (API 34) and DescribeLogDirs (API 35) on the broker.

AlterReplicaLogDirs, per partition, in Kafka's order (ReplicaManager.alterReplicaLogDirs):

1. a future dir name longer than 255 bytes -> INVALID_TOPIC_EXCEPTION (the file system
   limit; the name is ``<topic>-<partition>.<32 hex>-future``);
2. the path must be absolute and one of ``log.dirs`` -> else LOG_DIR_NOT_FOUND; that dir
   must be online -> else KAFKA_STORAGE_ERROR;
3. a move of this partition to another dir is cancelled (its future log deleted);
4. no replica here yet: the dir is remembered as the partition's preferred dir (the
   LeaderAndIsr that creates it will put it there) and the answer is
   REPLICA_NOT_AVAILABLE, which Kafka's reassignment tool retries on;
5. the replica is already in that dir: nothing to do; otherwise the future log is
   created there and the mover (broker/logdirs/log_dir_mover.py) copies into it.

Requests are applied one at a time (a lock), as Kafka's replicaStateChangeLock does.

A failed log dir (``LogDirFailures``): an append that hits an OSError, or the periodic
probe (the dir is gone, or a file cannot be created in it), takes the dir offline
(``LogManager.mark_log_dir_offline``): its replicas leave the fetchers, parked requests
on them wake, and from then on every request on them is answered KAFKA_STORAGE_ERROR
(``ReplicaManager.partition_or_error``), LeaderAndIsr included. The broker stays up and
keeps serving its other dirs. The controller is told as Kafka's brokers tell it: a
sequential znode ``/log_dir_event_notification/log_dir_event_<seq>`` holding
``{"version":1,"broker":N,"event":1}``; the controller re-sends LeaderAndIsr to the
broker, reads KAFKA_STORAGE_ERROR for the failed replicas and elects other leaders.

DescribeLogDirs answers every configured dir: offline ones with KAFKA_STORAGE_ERROR and
no partitions; online ones with each replica's size, ``offset_lag`` (for a future log,
how far its end is behind the current log's; 0 for a current log) and ``is_future``,
plus the file system's total and usable bytes.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path

import trio

from minibroker.broker.logdirs.log_dir_mover import LogDirMover
from minibroker.broker.replication.hosted_replicas import HostedReplicas
from minibroker.broker.requests.dispatcher import Deferred, RequestDispatcher
from minibroker.protocol.api import RequestHeader
from minibroker.protocol.errors import (
    NONE,
    InvalidTopicError,
    KafkaError,
    KafkaStorageError,
    ReplicaNotAvailableError,
)
from minibroker.protocol.messages import bodies
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.storage.log import Log
from minibroker.storage.log_manager import LogManager
from minibroker.zk.data import KafkaZkClient

log = logging.getLogger(__name__)

MAX_DIR_NAME_BYTES = 255
"""NAME_MAX of the usual Linux file systems: a longer future dir name cannot be created."""
FUTURE_NAME_EXTRA = len(".") + 32 + len("-future")
"""What the future dir name adds to ``<topic>-<partition>``: a dot, a uuid, the suffix."""


def future_name_too_long(tp: TopicPartition) -> bool:
    return len(str(tp).encode()) + FUTURE_NAME_EXTRA > MAX_DIR_NAME_BYTES


class LogDirApis:
    def __init__(
        self,
        replicas: HostedReplicas,
        mover: LogDirMover,
        dirty_ratio: Callable[[TopicPartition, Log], float] = lambda _tp, _log: -1.0,
    ) -> None:
        """``dirty_ratio``: the cleaner's view of a compacted log (-1: not one)."""
        self.replicas = replicas
        self.mover = mover
        self.dirty_ratio = dirty_ratio
        self._alter_lock = trio.Lock()

    def install(self, dispatcher: RequestDispatcher) -> None:
        dispatcher.register(bodies.ALTER_REPLICA_LOG_DIRS, self.handle_alter_replica_log_dirs)
        dispatcher.register(bodies.DESCRIBE_LOG_DIRS, self.handle_describe_log_dirs)

    # -- AlterReplicaLogDirs -------------------------------------------------------------------

    def handle_alter_replica_log_dirs(
        self, header: RequestHeader, request: bodies.AlterReplicaLogDirsRequest
    ) -> Deferred[bodies.AlterReplicaLogDirsResponse]:
        moves = [
            (TopicPartition(topic["name"], partition), entry["path"])
            for entry in request["dirs"]
            for topic in entry["topics"]
            for partition in topic["partitions"]
        ]

        async def apply() -> bodies.AlterReplicaLogDirsResponse:
            results: dict[str, list[bodies.AlterReplicaLogDirsResponseResultPartition]] = {}
            async with self._alter_lock:
                for tp, path in moves:
                    code = await self.alter(tp, path)
                    results.setdefault(tp.topic, []).append(
                        {"partition_index": tp.partition, "error_code": code}
                    )
            return {
                "throttle_time_ms": 0,
                "results": [{"topic_name": t, "partitions": ps} for t, ps in results.items()],
            }

        return Deferred(apply)

    async def alter(self, tp: TopicPartition, path: str) -> int:
        """Steps 1-5 of the module docstring for one partition; the error code."""
        manager = self.replicas.log_manager
        try:
            if future_name_too_long(tp):
                raise InvalidTopicError(f"{tp}: the future dir name would pass 255 bytes")
            target = manager.log_dir_for_path(path)
            if not manager.is_log_dir_online(target):
                raise KafkaStorageError(f"log dir {target} is offline")
            partition = self.replicas.partitions.get(tp)
            moving_to = self.mover.future_dir(tp)
            if moving_to is not None and moving_to != target:
                await self.mover.cancel(tp)
            if manager.get_log(tp) is None:
                manager.set_preferred_log_dir(tp, target)
            if partition is None:
                raise ReplicaNotAvailableError(f"broker has no replica of {tp} yet")
            if not manager.is_log_dir_online(partition.log.dir.parent):
                raise KafkaStorageError(f"{tp} is in an offline log dir")
            if partition.log.dir.parent == target or self.mover.future_dir(tp) == target:
                return NONE
            await self.mover.start(tp, target)
        except KafkaError as exc:
            return exc.code
        except OSError:
            return KafkaStorageError.code
        return NONE

    # -- DescribeLogDirs -----------------------------------------------------------------------

    def handle_describe_log_dirs(
        self, header: RequestHeader, request: bodies.DescribeLogDirsRequest
    ) -> bodies.DescribeLogDirsResponse:
        wanted: set[TopicPartition] | None = None
        requested = request["topics"]
        if requested is not None:
            wanted = {TopicPartition(t["topic"], p) for t in requested for p in t["partitions"]}
        return {"throttle_time_ms": 0, "error_code": NONE, "results": self.describe(wanted)}

    def describe(
        self, wanted: set[TopicPartition] | None
    ) -> list[bodies.DescribeLogDirsResponseResult]:
        manager = self.replicas.log_manager
        current = manager.logs
        futures = manager.future_logs
        results: list[bodies.DescribeLogDirsResponseResult] = []
        for log_dir in manager.log_dirs:
            if not manager.is_log_dir_online(log_dir):
                results.append(
                    {"error_code": KafkaStorageError.code, "log_dir": str(log_dir), "topics": []}
                )
                continue
            entries: list[
                tuple[TopicPartition, bodies.DescribeLogDirsResponseResultTopicPartition]
            ] = []
            for tp, log_ in _in_dir(current.items(), log_dir, wanted):
                entry = _replica(tp, log_, lag=0, is_future=False)
                entry["dirty_ratio"] = self.dirty_ratio(tp, log_)
                entries.append((tp, entry))
            for tp, log_ in _in_dir(futures.items(), log_dir, wanted):
                source = current.get(tp)
                lag = 0 if source is None else source.log_end_offset - log_.log_end_offset
                entries.append((tp, _replica(tp, log_, lag=max(0, lag), is_future=True)))
            topics: dict[str, list[bodies.DescribeLogDirsResponseResultTopicPartition]] = {}
            for tp, entry in sorted(entries, key=lambda e: (e[0], e[1]["is_future"])):
                topics.setdefault(tp.topic, []).append(entry)
            total, usable = _disk_space(log_dir)
            results.append(
                {
                    "error_code": NONE,
                    "log_dir": str(log_dir),
                    "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()],
                    "total_bytes": total,
                    "usable_bytes": usable,
                }
            )
        return results


def _in_dir(
    logs: Iterable[tuple[TopicPartition, Log]], log_dir: Path, wanted: set[TopicPartition] | None
) -> list[tuple[TopicPartition, Log]]:
    return [
        (tp, log_)
        for tp, log_ in logs
        if log_.dir.parent == log_dir and (wanted is None or tp in wanted)
    ]


def _replica(
    tp: TopicPartition, log_: Log, *, lag: int, is_future: bool
) -> bodies.DescribeLogDirsResponseResultTopicPartition:
    return {
        "partition_index": tp.partition,
        "partition_size": log_.size,
        "offset_lag": lag,
        "is_future": is_future,
    }


def _disk_space(log_dir: Path) -> tuple[int, int]:
    try:
        stat = os.statvfs(log_dir)
    except OSError:
        return -1, -1
    return stat.f_blocks * stat.f_frsize, stat.f_bavail * stat.f_frsize


LOG_DIR_PROBE_INTERVAL_S = 1.0
"""How often every online log dir is checked (exists, a file can be created in it)."""
PROBE_FILE = ".log_dir_probe"


class LogDirFailures:
    """Takes failed log dirs offline and tells the controller (module docstring)."""

    def __init__(
        self, log_manager: LogManager, broker_id: int, *, zk: KafkaZkClient | None
    ) -> None:
        self.log_manager = log_manager
        self.broker_id = broker_id
        self.zk = zk
        self._unreported = trio.Event()

    def failed(self, log_dir: Path) -> set[TopicPartition]:
        """An I/O error in ``log_dir``: take it offline now (on the Trio thread); the
        partitions it held (none if it was offline already)."""
        manager = self.log_manager
        if log_dir not in manager.log_dirs or log_dir in manager.offline_log_dirs:
            return set()
        lost = manager.mark_log_dir_offline(log_dir)
        log.error(
            "log dir %s failed: %d replica(s) offline (%s)",
            log_dir,
            len(lost),
            ", ".join(map(str, sorted(lost))) or "none",
        )
        self._unreported.set()
        return set(lost)

    def probe(self) -> list[Path]:
        """The online dirs that cannot be used any more (blocking: run in a thread)."""
        manager = self.log_manager
        broken = []
        for log_dir in manager.log_dirs:
            if log_dir in manager.offline_log_dirs:
                continue
            try:
                fd = os.open(log_dir / PROBE_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.close(fd)
                os.unlink(log_dir / PROBE_FILE)
            except OSError:
                broken.append(log_dir)
        return broken

    async def run(
        self,
        on_failure: Callable[[Path], object],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Probe the online dirs and report failures until cancelled; a dir found broken
        goes to ``on_failure`` (the replica manager's ``log_dir_failed``, which calls
        ``failed`` and stops what used the dir's partitions)."""
        task_status.started()
        while True:
            with trio.move_on_after(LOG_DIR_PROBE_INTERVAL_S):
                await self._unreported.wait()
            for log_dir in await trio.to_thread.run_sync(self.probe):
                on_failure(log_dir)
            if self._unreported.is_set() and await self._notify_controller():
                self._unreported = trio.Event()

    async def _notify_controller(self) -> bool:
        """Write the log-dir event znode; False to try again later (True standalone)."""
        if self.zk is None:
            return True
        try:
            await self.zk.create_log_dir_event_notification(self.broker_id)
        except Exception as exc:  # ZooKeeper trouble: retried at the next probe
            log.warning("cannot report the failed log dir to the controller: %r", exc)
            return False
        return True

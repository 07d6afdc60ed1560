"""Periodic log housekeeping, Kafka's LogManager scheduler jobs as one Trio task.

- every ``log.retention.check.interval.ms``: retention (``retention.ms`` /
  ``retention.bytes`` / log start) on every log, expired ``.deleted`` segment files
  removed, then removed partition dirs (``-delete``) erased;
- every ``log.flush.offset.checkpoint.interval.ms``: ``recovery-point-offset-checkpoint``;
- every ``log.flush.start.offset.checkpoint.interval.ms``: ``log-start-offset-checkpoint``.

Every job holds the ReplicaManager's ``log_manager_lock``: the LogManager is not
thread-safe and log creation / deletion use it from worker threads too.

Where each job runs: a Log is not thread-safe and the event loop appends to it, so
anything that changes a Log's segment list (retention renames segments to
``.deleted`` and drops them from the list) runs on the Trio thread; it only renames
and unlinks a few files per pass. Work that touches no live Log state - erasing
already-detached ``-delete`` dirs, writing checkpoint files with fsync - runs in
``trio.to_thread``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable

import trio

from minibroker.broker.config.broker_config import BrokerConfig
from minibroker.storage.log_manager import LogManager

log = logging.getLogger(__name__)


class LogMaintenance:
    def __init__(self, config: BrokerConfig, log_manager: LogManager, lock: trio.Lock) -> None:
        self.config = config
        self.log_manager = log_manager
        self.lock = lock  # shared with the ReplicaManager: see its log_manager_lock
        self.segments_deleted = 0

    def retention_pass(self) -> int:
        """Apply retention to every log (on the Trio thread); returns segments deleted."""
        deleted = self.log_manager.cleanup_logs()
        self.segments_deleted += deleted
        if deleted:
            log.info("retention deleted %d segment(s)", deleted)
        return deleted

    async def run_retention(self) -> None:
        async with self.lock:
            self.retention_pass()
            await trio.to_thread.run_sync(self.log_manager.remove_deleted_logs)

    async def checkpoint_recovery_points(self) -> None:
        async with self.lock:
            await trio.to_thread.run_sync(self.log_manager.checkpoint_recovery_points)

    async def checkpoint_log_start_offsets(self) -> None:
        async with self.lock:
            await trio.to_thread.run_sync(self.log_manager.checkpoint_log_start_offsets)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        config = self.config
        jobs: list[tuple[str, float, Callable[[], Awaitable[None]]]] = [
            ("retention", config.log_retention_check_interval_ms, self.run_retention),
            (
                "recovery-point checkpoint",
                config.log_flush_offset_checkpoint_interval_ms,
                self.checkpoint_recovery_points,
            ),
            (
                "log-start-offset checkpoint",
                config.log_flush_start_offset_checkpoint_interval_ms,
                self.checkpoint_log_start_offsets,
            ),
        ]
        async with trio.open_nursery() as nursery:
            for name, interval_ms, job in jobs:
                if interval_ms > 0:
                    nursery.start_soon(_every, name, interval_ms / 1000, job)
            task_status.started()


async def _every(name: str, interval_s: float, job: Callable[[], Awaitable[None]]) -> None:
    """Run ``job`` every ``interval_s``; a failure is logged and retried next period."""
    if math.isinf(interval_s):
        return
    while True:
        await trio.sleep(interval_s)
        try:
            await job()
        except Exception as exc:  # one bad pass must not stop the schedule
            log.error("%s failed: %r", name, exc)

"""New leaderships' leader-epoch checkpoints, written after LeaderAndIsr is answered.

A LeaderAndIsr that makes this broker lead thousands of partitions records each new
epoch in memory at once (``LeaderEpochCache.assign(..., defer_write=True)``: the next
append is stamped with it); ``EpochCheckpointWriter`` writes the files afterwards, in a
worker thread, one batch for everything queued meanwhile. The answer used to wait for
them: 0.2-1 ms of file creation and rename per partition, seconds for a failover's
elections, while the controller held back the UpdateMetadata naming the new leaders
until the answer came.

Nothing is lost to a crash meanwhile: ``Log.flush`` writes a pending checkpoint before
it moves the recovery point, and recovery re-derives the epochs of the batches past it
(storage/leader_epoch.py). A write that fails is logged and stays pending for the same
reason.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

import trio

from minibroker.storage.leader_epoch import LeaderEpochCache

log = logging.getLogger(__name__)


def write_epoch_checkpoints(caches: Sequence[LeaderEpochCache]) -> None:
    """Write the checkpoints new leaderships left pending (worker thread); a failure is
    only logged (see the module doc)."""
    for cache in caches:
        try:
            cache.write_pending()
        except OSError as exc:
            log.warning("cannot write %s yet: %r", cache.path, exc)


class EpochCheckpointWriter:
    """Writes queued leader-epoch checkpoints while ``run`` runs."""

    def __init__(self) -> None:
        self._queued: list[LeaderEpochCache] = []
        self._wake = trio.Event()
        self.idle = trio.Event()
        """Set while nothing is queued or being written (tests wait on it)."""
        self.idle.set()

    def write_soon(self, caches: Iterable[LeaderEpochCache]) -> None:
        self._queued.extend(caches)
        if self._queued:
            self.idle = trio.Event()
            self._wake.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            batch, self._queued = self._queued, []
            await trio.to_thread.run_sync(write_epoch_checkpoints, batch)
            if not self._queued:
                self.idle.set()

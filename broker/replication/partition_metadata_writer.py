"""Each partition directory's ``partition.metadata`` (storage/partition_metadata.py),
written after LeaderAndIsr is answered, as the leader-epoch checkpoints are
(broker/replication/epoch_checkpoints.py): a LeaderAndIsr naming thousands of partitions must not
wait for thousands of small fsynced files.

A directory whose file names another id (left by a deleted topic of the same name) is
logged and left alone: Kafka refuses such a replica (INCONSISTENT_TOPIC_ID); here the
controller's deletion of the old topic removes the directory first.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

import trio

from minibroker.protocol.topic_ids import topic_id_str
from minibroker.storage.checkpoint import sync_filesystem
from minibroker.storage.partition_metadata import read_partition_metadata, write_partition_metadata

log = logging.getLogger(__name__)


def write_missing(entries: list[tuple[Path, bytes]]) -> None:
    """Write the file of each directory that has none (worker thread), unsynced, then
    sync each log dir's filesystem once: two fsyncs per file made a LeaderAndIsr of
    10,000 new partitions cost every broker 20,000 of them."""
    written: set[Path] = set()  # the log dirs written to
    for partition_dir, topic_id in entries:
        try:
            found = read_partition_metadata(partition_dir)
            if found is None:
                write_partition_metadata(partition_dir, topic_id, sync=False)
                written.add(partition_dir.parent)
            elif found != topic_id:
                log.error(
                    "%s holds topic id %s, the controller names %s: left as it is",
                    partition_dir,
                    topic_id_str(found),
                    topic_id_str(topic_id),
                )
        except (OSError, ValueError) as exc:
            log.warning("cannot write the partition.metadata of %s: %r", partition_dir, exc)
    for log_dir in written:
        try:
            sync_filesystem(log_dir)
        except OSError as exc:
            log.warning("cannot sync the partition.metadata files under %s: %r", log_dir, exc)


class PartitionMetadataWriter:
    """Writes queued ``partition.metadata`` files while ``run`` runs."""

    def __init__(self) -> None:
        self._queued: list[tuple[Path, bytes]] = []
        self._wake = trio.Event()

    def write_soon(self, entries: Iterable[tuple[Path, bytes]]) -> None:
        self._queued.extend(entries)
        if self._queued:
            self._wake.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            batch, self._queued = self._queued, []
            await trio.to_thread.run_sync(write_missing, batch)

"""The broker's high-watermark checkpoint: replication-offset-checkpoint, one file per
log dir, holding each partition's high watermark (Kafka's highWatermarkCheckpoints).

It is read once, lazily, when the first partition is created after start-up: a new
Partition starts from the HW checkpointed for it, and a log that loading cut below
that HW lost committed records. It is written periodically and at shutdown from the
live partitions; logs loaded at start-up that no LeaderAndIsr has made partitions of
yet keep the HW read before, and offline log dirs are skipped.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path

import trio

from minibroker.broker.replication.partition import Partition
from minibroker.protocol.errors import MinibrokerError
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.storage.log_manager import LogManager

log = logging.getLogger(__name__)


class HighWatermarkCheckpoint:
    """Reads and writes the replication-offset-checkpoint files of ``log_manager``."""

    def __init__(self, log_manager: LogManager) -> None:
        self.log_manager = log_manager
        self._checkpointed: dict[TopicPartition, int] | None = None

    def initial(self, tp: TopicPartition) -> int:
        """The HW this broker checkpointed for ``tp`` (0 if none): read once, lazily."""
        if self._checkpointed is None:
            hws: dict[TopicPartition, int] = {}
            for log_dir in self.log_manager.log_dirs:
                try:
                    hws.update(self.log_manager.read_replication_offsets(log_dir))
                except MinibrokerError as exc:
                    log.warning("ignoring %s: %s", log_dir, exc)
            self._checkpointed = hws
        return self._checkpointed.get(tp, 0)

    def by_log_dir(
        self, partitions: Mapping[TopicPartition, Partition]
    ) -> dict[Path, dict[TopicPartition, int]]:
        """Each log dir's partitions and their HWs (what replication-offset-checkpoint holds)."""
        by_dir: dict[Path, dict[TopicPartition, int]] = {d: {} for d in self.log_manager.log_dirs}
        # Grouped by the parent's name: ``Path.parent`` and a Path's hash per partition
        # stalled every client each checkpoint interval (docs/performance.md, "Figures
        # behind the code").
        by_name = {str(d): hws for d, hws in by_dir.items()}
        for tp, partition in partitions.items():
            parent = os.path.dirname(str(partition.log.dir))
            hws = by_name.get(parent)
            if hws is None:
                hws = by_name[parent] = by_dir.setdefault(Path(parent), {})
            hws[tp] = partition.high_watermark
        # A log loaded at start-up whose partition no LeaderAndIsr has created yet
        # keeps the HW checkpointed before: writing without it would forget it.
        for tp, log_ in self.log_manager.logs.items():
            if tp not in partitions and (hw := self.initial(tp)):
                by_dir.setdefault(log_.dir.parent, {})[tp] = hw
        for offline in self.log_manager.offline_log_dirs:
            by_dir.pop(offline, None)
        return by_dir

    async def write(self, partitions: Mapping[TopicPartition, Partition]) -> None:
        """Write replication-offset-checkpoint in every log dir (fsync in a thread)."""
        by_dir = self.by_log_dir(partitions)

        def write() -> None:
            for log_dir, hws in by_dir.items():
                self.log_manager.write_replication_offsets(log_dir, hws)

        await trio.to_thread.run_sync(write)

"""Helpers for the log cleaner tests: keyed batches, one cleaning, the log as a model."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from minibroker.protocol.records import Record, decode_records, encode_batch
from minibroker.storage.cleaner.clean import CleanResult, clean_log
from minibroker.storage.cleaner.manager import CleanerConfig, CleanerManager
from minibroker.storage.cleaner.offset_map import OffsetMap
from minibroker.storage.log import Log
from minibroker.storage.log_config import LogConfig

COMPACT = LogConfig(
    segment_bytes=2048,
    index_interval_bytes=256,
    segment_index_bytes=4096,
    retention_ms=-1,
    file_delete_delay_ms=0,
    cleanup_policy="compact",
    min_cleanable_dirty_ratio=0.01,
)
"""Small segments so a few hundred records make many; every bit of dirt is cleanable."""

KV = tuple[bytes | None, bytes | None]


def keyed(
    pairs: list[KV],
    *,
    timestamp: int = 1_000,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytearray:
    records = [Record(value, key, timestamp=timestamp) for key, value in pairs]
    return bytearray(
        encode_batch(
            records,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
        )
    )


def contents(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record, read through Log.read."""
    out: list[tuple[int, bytes | None, bytes | None]] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        read = log.read(offset, 1 << 20)
        if not len(read.records):
            break
        out += [
            (r.offset, r.key, r.value) for r in decode_records(read.records) if r.offset >= offset
        ]
        offset = read.next_offset
    return out


def latest(
    records: list[tuple[int, bytes | None, bytes | None]],
) -> dict[bytes | None, tuple[int, bytes | None]]:
    """Per key, the (offset, value) of its last record."""
    return {key: (offset, value) for offset, key, value in records}


def age_segments(log: Log, seconds: float) -> None:
    """Make every segment file look ``seconds`` old (the delete horizon reads mtimes)."""
    for segment in log.segments:
        stat = segment.log_path.stat()
        os.utime(segment.log_path, (stat.st_atime - seconds, stat.st_mtime - seconds))


def new_manager(log: Log, **config: int) -> CleanerManager:
    return CleanerManager(
        [log.dir.parent],
        CleanerConfig(**config),
        clock=lambda: 10**13,  # type: ignore[arg-type]
    )


def clean_once(
    manager: CleanerManager,
    log: Log,
    *,
    offset_map: OffsetMap | None = None,
    on_step: Callable[[str], None] = lambda _step: None,
) -> CleanResult | None:
    """One choose + clean + swap of ``log`` in this thread; None when nothing to do."""
    assert log.topic_partition is not None
    pending = manager.choose({log.topic_partition: log})
    if pending is None:
        return None
    result = clean_log(pending.job, offset_map)
    assert manager.finish(pending, result, on_step)
    return result


def dir_files(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir())

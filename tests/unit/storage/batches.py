"""Helpers shared by the storage tests: build batches, read a log back as a model."""

from __future__ import annotations

from pathlib import Path

from minibroker.protocol.records import Record, decode_records, encode_batch, iter_headers
from minibroker.storage.log import Log
from minibroker.storage.log_config import LogConfig

SMALL = LogConfig(
    segment_bytes=4096,
    index_interval_bytes=256,
    segment_index_bytes=4096,
    retention_ms=-1,
    file_delete_delay_ms=0,
)
"""Tiny segments and a short index interval so a few hundred records exercise rolls
and sparse entries."""


def batch(
    values: list[bytes],
    *,
    timestamp: int = 1_000,
    timestamps: list[int] | None = None,
    base_offset: int = 0,
    epoch: int = -1,
) -> bytearray:
    """One writable batch of ``values`` (timestamps default to ``timestamp``)."""
    stamps = timestamps or [timestamp] * len(values)
    records = [Record(value, timestamp=ts) for value, ts in zip(values, stamps, strict=True)]
    return bytearray(encode_batch(records, base_offset=base_offset, partition_leader_epoch=epoch))


def values_of(data: bytes | bytearray | memoryview) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record in whole batches of ``data``."""
    return [(r.offset, r.value) for r in decode_records(data)]


def read_all(
    log: Log, start: int | None = None, max_bytes: int = 1 << 20
) -> list[tuple[int, bytes | None]]:
    """Every record from ``start`` (default: log start) to the log end, via Log.read."""
    offset = log.log_start_offset if start is None else start
    out: list[tuple[int, bytes | None]] = []
    while offset < log.log_end_offset:
        read = log.read(offset, max_bytes)
        assert len(read.records) > 0, f"no progress at {offset}"
        out += [r for r in values_of(read.records) if r[0] >= offset]
        assert read.next_offset == [h for _, h in iter_headers(read.records)][-1].next_offset
        offset = read.next_offset
    return out


def open_log(directory: Path, config: LogConfig = SMALL, **kwargs: object) -> Log:
    return Log(directory, config, clock=lambda: 1_000, **kwargs)  # type: ignore[arg-type]

"""Corrupt batches in segments: how they are recognised and what they cost.

How this works. A batch on disk is corrupt when its header is malformed, its bytes fail
their CRC-32C, or its baseOffset (outside the CRC) does not follow the batch before
it. Three paths look for that, all through ``check_batches``:

- recovery at load (``storage.log_loader``) after an unclean stop, or when an index
  fails its sanity check: the segment is truncated at the first bad batch;
- every read (``Log.read``): a corrupt batch is never served. Good batches before it
  are; a read that would start with it raises CorruptRecordError;
- the scrubber (``storage.scrubber``) walks closed segments in the background.

Whatever finds it logs a WARNING naming the file, the offsets and the bytes lost, and
counts it in the LogManager's ``CorruptionStats`` (exported as Prometheus counters by
the broker). The broker takes a corrupt replica out of service and repairs it
(``Log.repair_corruption``; broker/logdirs/corruption.py).
"""

from __future__ import annotations

import logging
import re
import threading
from typing import NamedTuple

from minibroker.protocol.crc32c import crc32c
from minibroker.protocol.errors import CorruptMessageError
from minibroker.protocol.records import Buffer, Compression, validate_batch
from minibroker.protocol.records.layout import (
    BATCH_HEADER_SIZE,
    COMPRESSION_MASK,
    CRC_START,
    LOG_OVERHEAD,
    MAGIC,
    MIN_BATCH_LENGTH,
    header_struct,
)

log = logging.getLogger("minibroker.storage.corruption")

_CLAIMED = header_struct("base_offset", "batch_length", "magic", "last_offset_delta")
_CHECKED_FIELDS = header_struct(
    "base_offset",
    "batch_length",
    "magic",
    "crc",
    "attributes",
    "last_offset_delta",
    "record_count",
)
_LAST_CODEC = max(Compression)  # codecs this broker can decode
_WHERE = re.compile(r"^batch (header )?at \d+")  # how validate_batch names a batch

SOURCES = ("recovery", "read", "scrub")
"""What found a corrupt batch: load-time recovery, a read, the background scrubber."""


class CorruptionStats:
    """Corruption found in this broker's logs (one per LogManager). Recovery runs in
    worker threads, hence the lock."""

    def __init__(self) -> None:
        self.corrupt = dict.fromkeys(SOURCES, 0)
        self.truncated_bytes = 0
        self.repairs = 0
        self._seen: set[tuple[str, int]] = set()
        self._lock = threading.Lock()

    def record(
        self, source: str, *, truncated_bytes: int = 0, where: tuple[str, int] | None = None
    ) -> bool:
        """One corruption (a bad batch or a torn tail) found by ``source``. With
        ``where`` (file, position) a batch found again is not counted again; returns
        whether this one was counted."""
        with self._lock:
            if where is not None:
                if where in self._seen:
                    return False
                self._seen.add(where)
            self.corrupt[source] += 1
            self.truncated_bytes += truncated_bytes
            return True

    def record_lost_bytes(self, size: int) -> None:
        """Bytes dropped because they followed a corrupt batch (later segments)."""
        with self._lock:
            self.truncated_bytes += size

    def record_repair(self, truncated_bytes: int) -> None:
        with self._lock:
            self.repairs += 1
            self.truncated_bytes += truncated_bytes


class BatchCheck(NamedTuple):
    """What ``check_batches`` found: the bytes of whole valid batches from the start,
    the offset after the last of them (-1 when none), and why it stopped (None: the
    buffer is all valid batches)."""

    valid_bytes: int
    next_offset: int
    problem: str | None


def check_batches(
    buf: Buffer, expected_base: int | None = None, *, file_position: int = 0
) -> BatchCheck:
    """Validate every batch of ``buf`` (header, length, CRC-32C) and that each one's
    baseOffset follows the previous one (the first's equals ``expected_base`` when
    given). Stops at the first that fails; the problem names the batch by its
    position in the file, ``buf`` starting at ``file_position``.

    Every read runs this, so a good batch costs one unpack and one CRC call; only a
    bad one goes through ``validate_batch`` for its precise reason."""
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    position = 0
    total = len(view)
    next_offset = -1 if expected_base is None else expected_base
    unpack = _CHECKED_FIELDS.unpack_from
    while position < total:
        if total - position >= BATCH_HEADER_SIZE:
            base, length, magic, crc, attributes, delta, count = unpack(view, position)
            end = position + length + LOG_OVERHEAD
            if (
                magic == MAGIC
                and length >= MIN_BATCH_LENGTH
                and end <= total
                and attributes & COMPRESSION_MASK <= _LAST_CODEC
                and 0 <= count <= delta + 1
                and crc32c(view[position + CRC_START : end]) == crc
            ):
                if next_offset >= 0 and base != next_offset:
                    where = f"batch at position {file_position + position}"
                    problem = f"{where} has baseOffset {base}, not {next_offset}"
                    return BatchCheck(position, next_offset, problem)
                next_offset = base + delta + 1
                position = end
                continue
        return BatchCheck(position, next_offset, _why(view, position, file_position))
    return BatchCheck(position, next_offset, None)


def _why(view: memoryview, position: int, file_position: int) -> str:
    """What is wrong with the batch at ``position`` (which failed a check)."""
    where = f"batch at position {file_position + position}"
    try:
        validate_batch(view, position)
    except CorruptMessageError as exc:
        return where + _WHERE.sub("", str(exc), count=1)
    return f"{where} fails its checks"


def last_offset_claimed(buf: Buffer) -> int:
    """The last offset the headers in ``buf`` claim, walking batch lengths without
    checking CRCs, until a header is malformed (-1 if none parses). After a corrupt
    batch this tells how far the lost data probably went: a best effort for the log
    line, never for offsets the log relies on."""
    last = -1
    position = 0
    total = len(buf)
    while total - position >= BATCH_HEADER_SIZE:
        base, length, magic, delta = _CLAIMED.unpack_from(buf, position)
        if magic != MAGIC or length < MIN_BATCH_LENGTH or delta < 0:
            break
        last = max(last, base + delta)
        position += length + LOG_OVERHEAD
    return last

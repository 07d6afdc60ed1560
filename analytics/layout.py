"""Finding segment files in log dirs and cutting them into scan slices (driver side).

A log dir holds one directory per partition replica, named ``<topic>-<partition>``
(docs/architecture.md, "On disk"). Inside, ``<20-digit base offset>.log`` files hold
RecordBatch v2 batches back to back; ``.index`` / ``.timeindex`` and checkpoint files
are ignored here, and so are ``<topic>-<partition>.<uuid>-future`` (a log-dir move in
progress: a partial copy) and ``...-delete`` (a replica being removed): neither is the
partition's live data.

A ``SegmentSlice`` is one Spark task: a byte range ``[start, end)`` of one ``.log`` file.
Small segments are one slice. A segment larger than ``split_bytes`` is cut into
near-equal slices at batch boundaries found by walking the 12-byte (baseOffset,
batchLength) prefixes, so no batch is ever split between two tasks. A prefix that makes
no sense (a corrupt length) stops the walk: the rest of the file stays one slice and the
executor reports the corruption precisely.

``balanced_groups`` deals the slices of a scan into a few groups of near-equal bytes,
one Spark task each (one per core): a Python data source task has a fixed cost (its
command shipped, its worker fed, its result sent back) that ten 128 MiB tasks on two
cores pay five times over. Groups are cut at batch boundaries the same way.

Nothing here imports Spark: the planning is a plain function the data source calls.
"""

from __future__ import annotations

import bisect
import mmap
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from minibroker.protocol.records.layout import BATCH_HEADER_SIZE, LOG_OVERHEAD, header_struct

SPLIT_BYTES = 256 * 1024 * 1024
"""Largest slice one task scans when the scan is one task per slice (the data source's
default): a 1 GiB segment still keeps 4 tasks (2 cores) busy, while each task's fixed
cost (~0.1 s of JVM and Python CPU to start a Python data source task) stays small next
to its scan. Task memory does not grow with it: a task streams its slice as bounded
Arrow batches."""
UNSPLIT_BYTES = 1 << 62
"""A split size no segment reaches: one slice per segment file."""

_PARTITION_DIR = re.compile(r"^(?P<topic>[a-zA-Z0-9._-]{1,249})-(?P<partition>\d+)$")
_SEGMENT_FILE = re.compile(r"^(?P<base>\d{20})\.log$")
_IGNORED_DIR_SUFFIXES = ("-future", "-delete")
_PREFIX = header_struct("base_offset", "batch_length")


@dataclass(frozen=True, slots=True)
class SegmentSlice:
    """Bytes ``[start, end)`` of one segment file of one partition replica."""

    log_dir: str
    broker_id: int | None
    topic: str
    partition: int
    segment: str  # absolute path of the .log file
    base_offset: int
    start: int
    end: int


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """``"orders-3"`` -> ("orders", 3); None for anything that is not a live replica."""
    if name.endswith(_IGNORED_DIR_SUFFIXES):
        return None
    match = _PARTITION_DIR.match(name)
    if match is None or match["topic"] in (".", ".."):
        return None
    return match["topic"], int(match["partition"])


def read_broker_id(log_dir: Path) -> int | None:
    """broker.id from the log dir's ``meta.properties`` (as Kafka writes it), if any."""
    try:
        text = (log_dir / "meta.properties").read_text(encoding="utf-8")
    except OSError:
        return None
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == "broker.id":
            try:
                return int(value.strip())
            except ValueError:
                return None
    return None


def _boundary_at_or_after(mapped: mmap.mmap, pos: int, size: int, target: int) -> int | None:
    """The first batch boundary at or after ``target``, walking the 12-byte prefixes
    from ``pos`` (itself a boundary); None when the data ends first or a prefix makes no
    sense (a corrupt length: the rest stays whole and its task reports it precisely)."""
    unpack = _PREFIX.unpack_from
    while pos < target and pos + BATCH_HEADER_SIZE <= size:
        _, batch_length = unpack(mapped, pos)
        if batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD:
            return None
        pos += LOG_OVERHEAD + batch_length
    if pos >= size or pos < target:
        return None
    return pos


def _cut_at(path: str, start: int, size: int, targets: Sequence[int]) -> list[int]:
    """``start`` and the first batch boundary at or after each of the ascending
    ``targets`` (all in ``(start, size)``), up to the first that cannot be found.

    The walk reads the prefixes from a memory map and stops at the last cut."""
    cuts = [start]
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        size = min(size, len(mapped))
        for target in targets:
            pos = _boundary_at_or_after(mapped, cuts[-1], size, target)
            if pos is None:
                break
            if pos > cuts[-1]:
                cuts.append(pos)
    return cuts


def batch_boundaries(path: Path, size: int, split_bytes: int) -> list[int]:
    """Start positions of the slices of one segment: 0, then the first batch boundary
    at or after each of the ``ceil(size / split_bytes) - 1`` points that cut the file
    into equal parts (equal tasks, no sliver of a slice for a file just over the limit).
    It runs once per query, before any task starts.
    """
    parts = -(-size // split_bytes)
    if parts <= 1:
        return [0]
    return _cut_at(str(path), 0, size, [size * k // parts for k in range(1, parts)])


def balanced_groups(pieces: Sequence[SegmentSlice], parts: int) -> list[list[SegmentSlice]]:
    """``pieces`` (in plan order) dealt into at most ``parts`` runs of near-equal bytes.

    Laid end to end, the pieces are cut at the first batch boundary at or after each
    ``k / parts`` of their bytes (a piece is split there into two slices), and each
    slice joins the group its first byte falls in. A cut that cannot be placed (a
    corrupt length) leaves its piece whole, in the group where it starts.
    """
    total = sum(p.end - p.start for p in pieces)
    if parts <= 1 or total == 0:
        return [list(pieces)] if pieces else []
    targets = [total * k // parts for k in range(1, parts)]
    groups: list[list[SegmentSlice]] = [[] for _ in range(parts)]
    done = 0  # bytes of the pieces before this one
    for piece in pieces:
        size = piece.end - piece.start
        inside = [piece.start + t - done for t in targets if done < t < done + size]
        cuts = _cut_at(piece.segment, piece.start, piece.end, inside) if inside else [piece.start]
        for start, end in zip(cuts, [*cuts[1:], piece.end], strict=True):
            group = bisect.bisect_right(targets, done + start - piece.start)
            groups[group].append(replace(piece, start=start, end=end))
        done += size
    return [group for group in groups if group]


def plan_slices(
    log_dirs: list[str],
    topics: frozenset[str] | None = None,
    split_bytes: int = SPLIT_BYTES,
) -> list[SegmentSlice]:
    """Every slice of every live segment in ``log_dirs`` (optionally only ``topics``).

    Ordered by log dir, topic, partition, base offset and position, so plans are stable.
    Raises FileNotFoundError naming the first log dir that does not exist.
    """
    slices: list[SegmentSlice] = []
    for raw in log_dirs:
        log_dir = Path(raw).resolve()
        if not log_dir.is_dir():
            raise FileNotFoundError(f"log dir {raw} does not exist or is not a directory")
        broker_id = read_broker_id(log_dir)
        for entry in sorted(os.scandir(log_dir), key=lambda e: e.name):
            parsed = parse_partition_dir(entry.name) if entry.is_dir() else None
            if parsed is None or (topics is not None and parsed[0] not in topics):
                continue
            topic, partition = parsed
            for seg in sorted(os.scandir(entry.path), key=lambda e: e.name):
                match = _SEGMENT_FILE.match(seg.name)
                if match is None or not seg.is_file():
                    continue
                size = seg.stat().st_size
                path = Path(seg.path)
                cuts = batch_boundaries(path, size, split_bytes)
                ends = [*cuts[1:], size]
                for start, end in zip(cuts, ends, strict=True):
                    slices.append(
                        SegmentSlice(
                            log_dir=str(log_dir),
                            broker_id=broker_id,
                            topic=topic,
                            partition=partition,
                            segment=str(path),
                            base_offset=int(match["base"]),
                            start=start,
                            end=end,
                        )
                    )
    return slices

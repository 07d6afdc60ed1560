"""File and directory names of the on-disk log, in one place.

- Partition dir: ``<topic>-<partition>``. Topic names may contain ``-`` and ``.``,
  so the partition is whatever follows the LAST ``-``.
- Renamed partition dirs: ``<topic>-<partition>.<32 hex uuid>-delete`` (being
  deleted) and ``<topic>-<partition>.<32 hex uuid>-future`` (a replica being moved to
  this log dir). Kafka's uuid is a random UUID without dashes.
- Segment files: ``<base offset, 20 digits, zero padded>`` + ``.log`` / ``.index`` /
  ``.timeindex``; ``.deleted`` is appended to a segment file awaiting deletion and
  ``.tmp`` marks a half-written file (both are removed on load); the log cleaner writes a
  new segment's files with ``.cleaned`` then ``.swap`` appended (storage/segment_swap.py
  says what loading does with them).
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import NamedTuple

from minibroker.protocol.topic_partition import TopicPartition  # re-exported

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
DELETED_SUFFIX = ".deleted"
TMP_SUFFIX = ".tmp"
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"

_RENAMED_DIR = re.compile(r"^(?P<tp>.+)\.(?P<uuid>[0-9a-f]{32})(?P<suffix>-delete|-future)$")
_SEGMENT_FILE = re.compile(r"^(?P<base>\d{20})\.(?P<kind>log|index|timeindex|txnindex)$")


class PartitionDirName(NamedTuple):
    """A parsed partition directory name. ``suffix`` is "", "-delete" or "-future"."""

    tp: TopicPartition
    suffix: str


def parse_topic_partition(name: str) -> TopicPartition | None:
    """``orders-3`` -> TopicPartition("orders", 3); None when the name is not one."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit() or not partition.isascii():
        return None
    return TopicPartition(topic, int(partition))


def parse_partition_dir(name: str) -> PartitionDirName | None:
    """Parse a plain, ``-delete`` or ``-future`` partition dir name (None if neither)."""
    match = _RENAMED_DIR.match(name)
    if match is not None:
        tp = parse_topic_partition(match["tp"])
        return None if tp is None else PartitionDirName(tp, match["suffix"])
    tp = parse_topic_partition(name)
    return None if tp is None else PartitionDirName(tp, "")


def partition_dir_name(tp: TopicPartition, suffix: str = "") -> str:
    """The dir name of ``tp``; with a suffix, a fresh random uuid makes it unique."""
    if not suffix:
        return str(tp)
    return f"{tp}.{uuid.uuid4().hex}{suffix}"


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


def segment_path(directory: Path, base_offset: int, suffix: str) -> Path:
    return directory / segment_file_name(base_offset, suffix)


def parse_segment_file(name: str) -> tuple[int, str] | None:
    """``00000000000000000042.index`` -> (42, ".index"); None if not a segment file."""
    match = _SEGMENT_FILE.match(name)
    if match is None:
        return None
    return int(match["base"]), "." + match["kind"]

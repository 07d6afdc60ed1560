"""Kafka's text checkpoint files, written atomically.

Format (Kafka's CheckpointFile, version 0), UTF-8, ``\\n`` line ends::

    0                      version
    2                      number of entries
    orders 0 1234          one entry per line, fields separated by one space
    orders 1 977

Offset checkpoints (``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint``, ``replication-offset-checkpoint``, one of each per log
dir) hold "topic partition offset" entries; ``leader-epoch-checkpoint`` (one per
partition dir) holds "epoch startOffset" entries and uses the same reader and writer.

Crash safety: the new content goes to ``<name>.tmp``, is fsynced, renamed over the old
file and the directory is fsynced. A crash at any point leaves either the old or the
new file complete; a stale ``.tmp`` is simply overwritten by the next write. A file
that does not parse raises CorruptCheckpointError naming the file and line: a broker
must not guess offsets.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from minibroker.protocol.topic_partition import TopicPartition
from minibroker.storage.errors import CorruptCheckpointError
from minibroker.storage.names import TMP_SUFFIX

CHECKPOINT_VERSION = 0

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"


def fsync_dir(directory: Path) -> None:
    """Make a rename or a new file in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_syncfs = getattr(ctypes.CDLL(None, use_errno=True), "syncfs", None)


def sync_filesystem(directory: Path) -> None:
    """Make every write so far on ``directory``'s filesystem durable, in one call
    (Linux's syncfs(2); ``os.sync()`` where it is missing). Thousands of small files
    written unsynced and then this cost one journal commit instead of two fsyncs each:
    a LeaderAndIsr creating 10,000 partitions wrote 10,000 ``partition.metadata`` files
    with 20,000 fsyncs, and the other replicas' log creation waited behind them."""
    if _syncfs is None:
        os.sync()
        return
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if _syncfs(fd) != 0:
            error = ctypes.get_errno()
            raise OSError(error, os.strerror(error), str(directory))
    finally:
        os.close(fd)


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, content: bytes, *, sync: bool = True, mode: int = 0o666) -> None:
    """Replace ``path`` with ``content`` so that a crash leaves the old or new file.

    ``sync=False`` skips both fsyncs: still atomic against a process crash (rename),
    not yet against power loss until the caller fsyncs the file and its directory.
    ``mode``: the new file's permissions (before the umask); 0o600 for secrets.
    """
    tmp = path.with_name(path.name + TMP_SUFFIX)
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode), "wb") as f:
        f.write(content)
        f.flush()
        if sync:
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if sync:
        fsync_dir(path.parent)


def write_checkpoint(path: Path, entries: Iterable[Sequence[object]], *, sync: bool = True) -> None:
    """Write entries (each a sequence of fields) in the checkpoint format."""
    lines = [" ".join(str(field) for field in entry) for entry in entries]
    text = f"{CHECKPOINT_VERSION}\n{len(lines)}\n" + "".join(line + "\n" for line in lines)
    write_atomically(path, text.encode(), sync=sync)


def read_checkpoint(path: Path, fields: int) -> list[list[str]] | None:
    """Entries of the checkpoint at ``path`` as lists of ``fields`` strings.

    None when the file does not exist. Raises CorruptCheckpointError when the version is
    unknown, the count does not match or an entry has the wrong number of fields.
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        lines = raw.decode().split("\n")
    except UnicodeDecodeError as exc:
        raise CorruptCheckpointError(f"{path}: not UTF-8 text") from exc
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 2:
        raise CorruptCheckpointError(f"{path}: missing version or count line")
    version = _parse_int(path, 1, lines[0])
    if version != CHECKPOINT_VERSION:
        raise CorruptCheckpointError(f"{path}: unknown checkpoint version {version}")
    count = _parse_int(path, 2, lines[1])
    if count != len(lines) - 2:
        raise CorruptCheckpointError(
            f"{path}: count line says {count} entries, found {len(lines) - 2}"
        )
    entries = []
    for number, line in enumerate(lines[2:], start=3):
        parts = line.split(" ")
        if len(parts) != fields or not all(parts):
            raise CorruptCheckpointError(f"{path}:{number}: expected {fields} fields: {line!r}")
        entries.append(parts)
    return entries


def _parse_int(path: Path, number: int, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise CorruptCheckpointError(f"{path}:{number}: not an integer: {text!r}") from None


class OffsetCheckpointFile:
    """A per-log-dir "topic partition offset" checkpoint (recovery points, log start
    offsets, high watermarks)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        write_checkpoint(
            self.path, [(tp.topic, tp.partition, offset) for tp, offset in offsets.items()]
        )

    def read(self) -> dict[TopicPartition, int]:
        """The checkpointed offsets; empty when the file does not exist yet."""
        entries = read_checkpoint(self.path, 3)
        result: dict[TopicPartition, int] = {}
        for number, (topic, partition, offset) in enumerate(entries or (), start=3):
            tp = TopicPartition(topic, _parse_int(self.path, number, partition))
            result[tp] = _parse_int(self.path, number, offset)
        return result

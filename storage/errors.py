"""Local errors of the storage layer.

These never travel on the wire. The broker maps a storage failure that a client must
hear about to a Kafka code itself (usually KAFKA_STORAGE_ERROR); errors a client caused
(a corrupt batch, an offset out of range) are raised as the Kafka error classes from
``protocol.errors`` directly.
"""

from __future__ import annotations

from minibroker.protocol.errors import MinibrokerError


class StorageError(MinibrokerError):
    """Base class of local storage failures (bad files, locked or unusable log dirs)."""


class CorruptIndexError(StorageError):
    """An index file fails its sanity check; the owner rebuilds it from the log."""


class CorruptCheckpointError(StorageError):
    """A checkpoint file cannot be parsed; the message names the file and the line."""


class LogDirError(StorageError):
    """A log dir cannot be used: missing and not creatable, locked by another broker."""


class DumpLogError(StorageError):
    """``minibroker dump-log`` was given a file it cannot read as a segment or index."""


class CorruptRecordError(StorageError):
    """A batch stored in a segment fails its checks (CRC-32C, header, offsets): the
    bytes on disk are not what was written. Carries where, so that the owner can log
    it, refuse to serve it and repair the replica. ``lost_from`` is set when every
    offset from there on is known lost (a recovery cut): the repair then truncates
    there even if no bad batch remains to be found."""

    def __init__(
        self, message: str, *, path: str, position: int, offset: int, lost_from: int = -1
    ) -> None:
        super().__init__(message)
        self.path = path
        self.position = position
        self.offset = offset
        self.lost_from = lost_from

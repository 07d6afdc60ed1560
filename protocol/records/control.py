"""Control records: the transaction markers a transaction coordinator writes (KIP-98).

A control batch (attribute bit 5) holds one record whose key says what it marks and
whose value the marker's coordinator epoch::

    key    version: int16 (0)   type: int16 (0 = ABORT, 1 = COMMIT)
    value  version: int16 (0)   coordinatorEpoch: int32

The marker closes the producer's open transaction in that partition: its batches since
the last marker are committed or aborted together. Sans-IO: bytes in, values out.
"""

from __future__ import annotations

import struct
from enum import IntEnum

_KEY = struct.Struct(">hh")  # version, type


class ControlRecordType(IntEnum):
    ABORT = 0
    COMMIT = 1


def control_record_type(key: bytes | None) -> ControlRecordType | None:
    """The marker type of a control record's ``key``; None when the key is too short or
    names a type this code does not know (Kafka skips those too)."""
    if key is None or len(key) < _KEY.size:
        return None
    _version, kind = _KEY.unpack_from(key)
    try:
        return ControlRecordType(kind)
    except ValueError:
        return None


def control_record_key(kind: ControlRecordType) -> bytes:
    """The key of a version-0 marker of ``kind``."""
    return _KEY.pack(0, kind)

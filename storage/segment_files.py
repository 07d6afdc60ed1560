"""What a log segment's scans read of its files: the header fields, where a batch lies,
and the largest offset a segment holds.

``LogSegment`` (storage/segment.py) is the segment: its files, the state derived from
them, append, read, checks, recovery and truncation. These facts are shared with the
recovery walk (storage/segment_recovery.py) and the cleaner, which writes segments.
"""

from __future__ import annotations

from typing import NamedTuple

from minibroker.protocol.records.layout import header_struct

HEADER_SCAN = header_struct("base_offset", "batch_length", "last_offset_delta", "max_timestamp")
"""baseOffset, batchLength, lastOffsetDelta, maxTimestamp: all a segment needs of a
batch header."""
SCAN_CHUNK_BYTES = 16 * 1024
"""Header scans read this much per pread: one syscall covers a whole index interval of
small batches."""
MAX_RELATIVE_OFFSET = 2**31 - 1
"""The largest offset - base offset a segment holds: index entries store it as int32."""


class BatchPosition(NamedTuple):
    """Where one batch lies in a segment file."""

    base_offset: int
    last_offset: int
    position: int
    size: int

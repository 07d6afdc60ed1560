"""Checking a closed segment file batch by batch, fed in chunks (the scrubber's core).

How this works. ``SegmentScan`` is given the file's bytes in order, in chunks of any
size (the caller reads them at a throttled rate, broker/logdirs/corruption.py). It keeps the
tail of a chunk that ends inside a batch and checks each whole batch as
``check_batches`` does: header, length, CRC-32C, and a baseOffset that follows the
previous batch, the first one equal to the segment's base offset. A batch whose length
runs past the file's end is corrupt as soon as its header is read, so the tail kept
never exceeds one real batch. It does no I/O.
"""

from __future__ import annotations

from minibroker.protocol.records import Buffer
from minibroker.protocol.records.layout import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    header_struct,
)
from minibroker.storage.corruption import check_batches

_LENGTH_AND_MAGIC = header_struct("batch_length", "magic")


class SegmentScan:
    def __init__(self, base_offset: int, file_size: int) -> None:
        self.file_size = file_size
        self.position = 0
        """Bytes of whole valid batches checked so far (the file position of the tail)."""
        self.next_offset = base_offset
        """The offset the next batch must start with."""
        self.problem: str | None = None
        self._tail = b""

    def feed(self, chunk: Buffer) -> bool:
        """Check the whole batches that ``chunk`` completes; False once a corrupt one
        is found (``problem`` says why, ``position`` / ``next_offset`` where)."""
        if self.problem is not None:
            return False
        buf = self._tail + bytes(chunk) if self._tail else bytes(chunk)
        whole, length_problem = self._whole_batches(buf)
        with memoryview(buf) as view, view[:whole] as batches:
            checked = check_batches(batches, self.next_offset, file_position=self.position)
        if checked.problem is not None:
            self.position += checked.valid_bytes
            self.problem = checked.problem
            self.next_offset = checked.next_offset
            return False
        self.position += whole
        if whole:
            self.next_offset = checked.next_offset
        self.problem = length_problem
        self._tail = buf[whole:]
        return length_problem is None

    def finish(self) -> bool:
        """The file is fed whole: False if it ends inside a batch."""
        if self.problem is None and self._tail:
            self.problem = f"the file ends inside the batch at position {self.position}"
        return self.problem is None

    def _whole_batches(self, buf: bytes) -> tuple[int, str | None]:
        """Bytes of ``buf`` made of whole batches by their lengths, and the problem of
        a length that cannot be right (past the end of the file). A malformed header
        is included, for check_batches to name its problem."""
        at = 0
        while len(buf) - at >= BATCH_HEADER_SIZE:
            length, magic = _LENGTH_AND_MAGIC.unpack_from(buf, at)
            size = length + LOG_OVERHEAD
            if magic != MAGIC or size < BATCH_HEADER_SIZE:
                return at + BATCH_HEADER_SIZE, None
            if self.position + at + size > self.file_size:
                return at, (
                    f"batch at position {self.position + at} claims {size} bytes, "
                    f"past the end of the file ({self.file_size})"
                )
            if at + size > len(buf):
                break
            at += size
        return at, None

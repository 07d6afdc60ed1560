"""SegmentScan: a segment fed in chunks of any size is checked batch by batch."""

from __future__ import annotations

import pytest

from minibroker.storage.scrubber import SegmentScan
from tests.unit.storage.batches import batch


def segment_bytes(base: int = 100, batches: int = 20) -> tuple[bytes, list[int]]:
    """A segment's file: ``batches`` contiguous batches from ``base``; their positions."""
    data = bytearray()
    positions = []
    offset = base
    for i in range(batches):
        positions.append(len(data))
        values = [b"value-%d" % i] * (1 + i % 3)
        data += batch(values, base_offset=offset)
        offset += len(values)
    return bytes(data), positions


def scan(data: bytes, chunk: int, base: int = 100) -> SegmentScan:
    scanner = SegmentScan(base, len(data))
    for at in range(0, len(data), chunk):
        if not scanner.feed(data[at : at + chunk]):
            return scanner
    scanner.finish()
    return scanner


@pytest.mark.parametrize("chunk", [1, 7, 61, 100, 4096, 1 << 20])
def test_a_valid_segment_passes_in_chunks_of_any_size(chunk: int) -> None:
    data, _ = segment_bytes()
    scanner = scan(data, chunk)
    assert scanner.problem is None
    assert scanner.position == len(data)


@pytest.mark.parametrize("chunk", [1, 61, 4096])
def test_flipped_bytes_are_found_at_their_batch(chunk: int) -> None:
    data, positions = segment_bytes()
    broken = bytearray(data)
    target = positions[11]
    broken[target + 70] ^= 0xFF
    scanner = scan(bytes(broken), chunk)
    assert scanner.problem is not None and "CRC" in scanner.problem
    assert scanner.position == target
    assert scanner.next_offset == int.from_bytes(data[target : target + 8], "big")


def test_a_base_offset_that_does_not_follow_is_found() -> None:
    data, positions = segment_bytes()
    broken = bytearray(data)
    broken[positions[5] + 7] ^= 0x01  # baseOffset is outside the CRC
    scanner = scan(bytes(broken), 4096)
    assert scanner.problem is not None and "baseOffset" in scanner.problem
    assert scanner.position == positions[5]


def test_a_first_batch_not_at_the_base_offset_is_found() -> None:
    data, _ = segment_bytes(base=100)
    scanner = scan(data, 4096, base=90)
    assert scanner.problem is not None and scanner.position == 0


def test_a_length_past_the_end_of_the_file_is_found_without_reading_on() -> None:
    data, positions = segment_bytes()
    broken = bytearray(data)
    broken[positions[3] + 8 : positions[3] + 12] = (10**8).to_bytes(4, "big")
    scanner = SegmentScan(100, len(broken))
    assert not scanner.feed(bytes(broken[: positions[3] + 100]))
    assert scanner.problem is not None and "past the end of the file" in scanner.problem
    assert scanner.position == positions[3]


def test_a_file_that_ends_inside_a_batch_fails_at_finish() -> None:
    data, positions = segment_bytes()
    cut = data[: positions[-1] + 30]
    scanner = SegmentScan(100, len(cut))
    assert scanner.feed(cut)
    assert not scanner.finish()
    assert scanner.position == positions[-1]

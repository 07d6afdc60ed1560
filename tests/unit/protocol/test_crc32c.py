"""CRC-32C: both backends compute the same function, and it is the right one."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from minibroker.protocol.crc32c import crc32c, crc32c_crcmod

# The CRC catalogue's check value and the iSCSI vectors of RFC 3720 appendix B.4.
KNOWN_ANSWERS = [
    (b"123456789", 0xE3069283),
    (bytes(32), 0x8A9136AA),
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(reversed(range(32))), 0x113FDB5C),
    (b"", 0),
]


def test_both_backends_give_the_published_answers() -> None:
    for data, expected in KNOWN_ANSWERS:
        assert crc32c(data) == expected, data
        assert crc32c_crcmod(data) == expected, data


@given(st.binary(max_size=4096), st.integers(min_value=0, max_value=4096))
def test_backends_agree_and_can_continue_a_running_crc(data: bytes, cut: int) -> None:
    cut = min(cut, len(data))
    whole = crc32c(data)
    assert crc32c_crcmod(data) == whole
    assert crc32c(data[cut:], crc32c(data[:cut])) == whole
    assert crc32c_crcmod(memoryview(data)[cut:], crc32c_crcmod(data[:cut])) == whole


def test_accepts_bytearray_and_memoryview() -> None:
    data = bytes(range(256)) * 3
    assert crc32c(bytearray(data)) == crc32c(memoryview(data)) == crc32c(data)

"""The frame codec, fed whole, byte by byte, in random splits and with trailing bytes."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minibroker.protocol.frames import (
    DEFAULT_MAX_FRAME_BYTES,
    NEED_DATA,
    FrameDecoder,
    FrameError,
    encode_frame,
    frame_prefix,
)

NO_DEADLINE = settings(deadline=None)
"""Timing belongs to bench/; shared CI machines are slow and busy."""

payloads = st.lists(st.binary(max_size=300), max_size=20)


def drain(decoder: FrameDecoder) -> list[bytes]:
    frames = []
    while (frame := decoder.next_frame()) is not NEED_DATA:
        assert isinstance(frame, bytes)
        frames.append(frame)
    return frames


def test_encode_frame_is_big_endian_length_then_payload() -> None:
    assert encode_frame(b"abc") == b"\x00\x00\x00\x03abc"
    assert frame_prefix(258) == b"\x00\x00\x01\x02"
    assert encode_frame(b"") == b"\x00\x00\x00\x00"


@NO_DEADLINE
@given(payloads)
def test_frames_fed_whole_come_out_in_order(frames: list[bytes]) -> None:
    decoder = FrameDecoder()
    decoder.feed(b"".join(encode_frame(f) for f in frames))
    assert drain(decoder) == frames
    assert decoder.buffered == 0


@NO_DEADLINE
@given(payloads)
def test_frames_fed_byte_by_byte_come_out_in_order(frames: list[bytes]) -> None:
    decoder = FrameDecoder()
    out: list[bytes] = []
    for byte in b"".join(encode_frame(f) for f in frames):
        decoder.feed(bytes([byte]))
        out.extend(drain(decoder))
    assert out == frames


@NO_DEADLINE
@given(payloads, st.lists(st.integers(min_value=1, max_value=50), min_size=1))
def test_frames_fed_in_arbitrary_splits_come_out_in_order(
    frames: list[bytes], sizes: list[int]
) -> None:
    stream = b"".join(encode_frame(f) for f in frames)
    decoder = FrameDecoder()
    out: list[bytes] = []
    pos, i = 0, 0
    while pos < len(stream):
        size = sizes[i % len(sizes)]
        decoder.feed(bytearray(stream[pos : pos + size]))  # bytearray: caller may reuse it
        pos += size
        i += 1
        out.extend(drain(decoder))
    assert out == frames


@NO_DEADLINE
@given(payloads, st.binary(min_size=1, max_size=3))
def test_trailing_partial_prefix_is_kept_for_later(frames: list[bytes], tail: bytes) -> None:
    decoder = FrameDecoder()
    decoder.feed(b"".join(encode_frame(f) for f in frames) + tail)
    assert drain(decoder) == frames
    assert decoder.buffered == len(tail)
    assert decoder.bytes_needed == 4 - len(tail)


def test_trailing_partial_payload_waits_for_the_rest() -> None:
    decoder = FrameDecoder()
    decoder.feed(encode_frame(b"one") + encode_frame(b"two-long")[:7])
    assert decoder.next_frame() == b"one"
    assert decoder.next_frame() is NEED_DATA
    assert decoder.bytes_needed == 5
    decoder.feed(b"-long")
    assert decoder.next_frame() == b"two-long"


def test_large_frame_in_many_chunks_is_reassembled_exactly() -> None:
    payload = bytes(range(256)) * 4096  # 1 MiB
    stream = encode_frame(payload) + encode_frame(b"after")
    decoder = FrameDecoder()
    for pos in range(0, len(stream), 65536):
        decoder.feed(stream[pos : pos + 65536])
    assert decoder.next_frame() == payload
    assert decoder.next_frame() == b"after"


@NO_DEADLINE
@given(st.integers(min_value=-(2**31), max_value=-1))
def test_negative_length_is_a_frame_error(length: int) -> None:
    decoder = FrameDecoder()
    decoder.feed(struct.pack(">i", length) + b"xx")
    with pytest.raises(FrameError):
        decoder.next_frame()


@NO_DEADLINE
@given(st.integers(min_value=1, max_value=2**31 - 1), st.integers(min_value=0, max_value=4096))
def test_length_above_max_frame_bytes_is_a_frame_error(excess: int, limit: int) -> None:
    length = min(limit + excess, 2**31 - 1)
    decoder = FrameDecoder(max_frame_bytes=limit)
    decoder.feed(struct.pack(">i", length))
    with pytest.raises(FrameError):
        decoder.next_frame()


def test_length_equal_to_the_limit_is_accepted() -> None:
    decoder = FrameDecoder(max_frame_bytes=5)
    decoder.feed(encode_frame(b"12345"))
    assert decoder.next_frame() == b"12345"


def test_decoder_stays_failed_after_a_frame_error() -> None:
    decoder = FrameDecoder(max_frame_bytes=4)
    decoder.feed(encode_frame(b"too long") + encode_frame(b"ok"))
    with pytest.raises(FrameError):
        decoder.next_frame()
    with pytest.raises(FrameError):
        decoder.next_frame()


def test_default_limit_is_kafkas_socket_request_max_bytes() -> None:
    assert DEFAULT_MAX_FRAME_BYTES == 104_857_600
    assert FrameDecoder().max_frame_bytes == DEFAULT_MAX_FRAME_BYTES


def test_empty_feed_is_not_end_of_stream() -> None:
    decoder = FrameDecoder()
    decoder.feed(b"")
    assert decoder.next_frame() is NEED_DATA
    decoder.feed(encode_frame(b""))
    assert decoder.next_frame() == b""


@NO_DEADLINE
@given(st.binary(max_size=300))
def test_a_read_that_is_exactly_one_frame_is_cut_without_buffering(payload: bytes) -> None:
    decoder = FrameDecoder()
    assert decoder.whole_frame(encode_frame(payload)) == payload
    assert decoder.buffered == 0
    decoder.feed(encode_frame(b"next"))  # the decoder goes on as if it had been fed
    assert drain(decoder) == [b"next"]


@pytest.mark.parametrize(
    ("data", "frames"),
    [
        (encode_frame(b"one") + encode_frame(b"two"), [b"one", b"two"]),  # two frames
        (encode_frame(b"one")[:-1], []),  # a frame cut short
        (encode_frame(b"one") + b"\x00", [b"one"]),  # a frame and the next one's start
        (b"\x00\x00", []),  # not even a length prefix
    ],
)
def test_a_read_that_is_not_exactly_one_frame_is_left_to_the_buffer(
    data: bytes, frames: list[bytes]
) -> None:
    decoder = FrameDecoder()
    assert decoder.whole_frame(data) is None
    assert decoder.buffered == 0  # nothing was taken: the caller feeds it
    decoder.feed(data)
    assert drain(decoder) == frames


def test_a_whole_frame_after_buffered_bytes_is_left_to_the_buffer() -> None:
    decoder = FrameDecoder()
    decoder.feed(encode_frame(b"first")[:3])
    assert decoder.whole_frame(encode_frame(b"second")) is None
    decoder.feed(encode_frame(b"first")[3:])
    assert drain(decoder) == [b"first"]


def test_a_whole_frame_over_the_limit_is_left_to_next_frame_to_refuse() -> None:
    decoder = FrameDecoder(max_frame_bytes=4)
    data = encode_frame(b"too long")
    assert decoder.whole_frame(data) is None
    decoder.feed(data)
    with pytest.raises(FrameError):
        decoder.next_frame()
    assert decoder.whole_frame(encode_frame(b"ok")) is None  # a failed decoder takes none


def test_a_large_frame_received_into_its_own_buffer_comes_out_whole() -> None:
    payload = bytes(range(256)) * 4096  # 1 MiB
    stream = encode_frame(payload)
    decoder = FrameDecoder()
    decoder.feed(stream[:1000])  # the prefix and the frame's first bytes, as a reader gets
    assert decoder.next_frame() is NEED_DATA
    pos = 1000
    while (view := decoder.frame_buffer()) is not None:
        n = min(len(view), 300_000)  # a read of what the socket holds
        view[:n] = stream[pos : pos + n]
        decoder.received(n)
        pos += n
        assert decoder.bytes_needed == len(stream) - pos
    assert decoder.next_frame() == bytearray(payload)
    decoder.feed(encode_frame(b"after"))  # the decoder is back to chunks
    assert decoder.next_frame() == b"after"
    assert decoder.buffered == 0


def test_a_frame_buffer_exists_only_for_a_frame_missing_bytes() -> None:
    decoder = FrameDecoder()
    assert decoder.frame_buffer() is None  # nothing received
    decoder.feed(b"\x00\x00")
    assert decoder.frame_buffer() is None  # the length is not known yet
    decoder.feed(b"\x00\x03ab")
    assert decoder.next_frame() is NEED_DATA
    view = decoder.frame_buffer()
    assert view is not None and len(view) == 1
    with pytest.raises(ValueError):
        decoder.received(2)  # more than the view holds
    with pytest.raises(ValueError):
        decoder.feed(b"c")  # the frame's bytes go to its buffer now
    view[:1] = b"c"
    decoder.received(1)
    assert decoder.frame_buffer() is None
    assert decoder.next_frame() == b"abc"

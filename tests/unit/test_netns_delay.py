"""The NFQUEUE delayer's netlink codec (tests/support/netns_delay.py), on hand-made bytes."""

from __future__ import annotations

import struct

import pytest

from tests.support.netns_delay import (
    ATTRIBUTE,
    HEADER,
    NFNL_SUBSYS_QUEUE,
    NFQA_PACKET_HDR,
    NFQA_VERDICT_HDR,
    NFQNL_MSG_PACKET,
    NFQNL_MSG_VERDICT,
    NLMSG_ERROR,
    attribute,
    message,
    packet_ids,
)


def queued_packet(packet_id: int, extra_attribute: bytes = b"") -> bytes:
    """A queued-packet message as the kernel sends it: header attribute after another."""
    hdr = attribute(NFQA_PACKET_HDR, struct.pack("!IHB", packet_id, 0x0800, 3))
    return message(NFQNL_MSG_PACKET, 7, extra_attribute + hdr)


def test_attributes_are_padded_to_four_bytes_and_count_their_header() -> None:
    encoded = attribute(9, b"\x01\x02\x03\x04\x05")
    assert ATTRIBUTE.unpack_from(encoded) == (ATTRIBUTE.size + 5, 9)
    assert len(encoded) == 12


def test_a_verdict_names_the_queue_big_endian_and_its_length_is_the_whole_message() -> None:
    verdict = attribute(NFQA_VERDICT_HDR, struct.pack("!II", 1, 42))
    encoded = message(NFQNL_MSG_VERDICT, 7, verdict)
    length, kind, _, _, _ = HEADER.unpack_from(encoded)
    assert length == len(encoded)
    assert kind == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_VERDICT
    assert encoded[HEADER.size + 2 : HEADER.size + 4] == b"\x00\x07"


def test_packet_ids_come_out_of_every_message_of_one_read() -> None:
    other = attribute(11, b"\xff" * 6)  # an attribute before the header is skipped
    data = queued_packet(5) + queued_packet(6, other) + queued_packet(2**32 - 1)
    assert list(packet_ids(data)) == [5, 6, 2**32 - 1]


def test_a_refused_request_raises_with_the_kernels_error() -> None:
    body = struct.pack("=i", -22) + HEADER.pack(HEADER.size, 0, 0, 0, 0)
    error = HEADER.pack(HEADER.size + len(body), NLMSG_ERROR, 0, 1, 0) + body
    with pytest.raises(OSError) as raised:
        list(packet_ids(error))
    assert raised.value.errno == 22


def test_a_truncated_read_yields_nothing_rather_than_garbage() -> None:
    assert list(packet_ids(queued_packet(5)[: HEADER.size - 1])) == []

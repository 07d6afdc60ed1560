"""Kafka's ConsumerProtocol bytes, checked against layouts written out by hand."""

from __future__ import annotations

import pytest

from minibroker.protocol.consumer_protocol import (
    Assignment,
    ConsumerProtocolError,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    group_by_topic,
)

# Subscription v1: version, topics ["ab", "c"], user_data null, owned [("ab", [1, 3])].
SUBSCRIPTION_V1 = (
    b"\x00\x01"  # version 1
    b"\x00\x00\x00\x02"  # 2 topics
    b"\x00\x02ab"
    b"\x00\x01c"
    b"\xff\xff\xff\xff"  # user_data: null
    b"\x00\x00\x00\x01"  # 1 owned topic
    b"\x00\x02ab"
    b"\x00\x00\x00\x02"  # 2 partitions
    b"\x00\x00\x00\x01"
    b"\x00\x00\x00\x03"
)

# Assignment v1: [("t", [0, 2])], user_data b"\x07".
ASSIGNMENT_V1 = (
    b"\x00\x01"
    b"\x00\x00\x00\x01"
    b"\x00\x01t"
    b"\x00\x00\x00\x02"
    b"\x00\x00\x00\x00"
    b"\x00\x00\x00\x02"
    b"\x00\x00\x00\x01\x07"
)


def test_subscription_v1_is_kafkas_layout() -> None:
    sub = Subscription(("ab", "c"), None, (("ab", (1, 3)),))
    assert encode_subscription(sub) == SUBSCRIPTION_V1
    assert decode_subscription(SUBSCRIPTION_V1) == sub


def test_subscription_v0_has_no_owned_partitions() -> None:
    raw = b"\x00\x00\x00\x00\x00\x01\x00\x01x\x00\x00\x00\x02hi"
    assert decode_subscription(raw) == Subscription(("x",), b"hi")
    assert encode_subscription(Subscription(("x",), b"hi"), version=0) == raw


def test_subscription_v3_from_a_newer_client_reads_generation_and_rack() -> None:
    raw = (
        b"\x00\x03\x00\x00\x00\x01\x00\x01x\xff\xff\xff\xff\x00\x00\x00\x00"
        b"\x00\x00\x00\x05"  # generation 5
        b"\x00\x02r1"  # rack
    )
    sub = decode_subscription(raw)
    assert (sub.topics, sub.generation_id, sub.rack_id) == (("x",), 5, "r1")


def test_subscription_from_a_future_version_skips_fields_it_does_not_know() -> None:
    future = b"\x00\x09" + SUBSCRIPTION_V1[2:] + b"\xff\xff\xff\xff" + b"\xff\xff" + b"extra"
    assert decode_subscription(future).topics == ("ab", "c")


def test_assignment_v1_is_kafkas_layout() -> None:
    assignment = Assignment((("t", (0, 2)),), b"\x07")
    assert encode_assignment(assignment) == ASSIGNMENT_V1
    assert decode_assignment(ASSIGNMENT_V1) == assignment
    assert assignment.partitions() == [("t", 0), ("t", 2)]


def test_empty_assignment_bytes_mean_no_partitions() -> None:
    assert decode_assignment(b"").partitions() == []


@pytest.mark.parametrize("cut", range(1, len(SUBSCRIPTION_V1)))
def test_truncated_subscription_is_refused_not_misread(cut: int) -> None:
    with pytest.raises(ConsumerProtocolError):
        decode_subscription(SUBSCRIPTION_V1[:cut])


def test_absurd_array_length_is_refused() -> None:
    with pytest.raises(ConsumerProtocolError):
        decode_assignment(b"\x00\x01\x7f\xff\xff\xff")


def test_group_by_topic_sorts_topics_and_partitions() -> None:
    assert group_by_topic([("b", 2), ("a", 1), ("b", 0)]) == (("a", (1,)), ("b", (0, 2)))

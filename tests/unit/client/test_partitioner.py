"""The default partitioner must agree with Kafka's Java client byte for byte."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_python_murmur2  # type: ignore[import-untyped]

from minibroker.client.partitioner import StickyPartitioner, murmur2, partition_for_key, to_positive

# Published vectors of Kafka's Utils.murmur2 (UtilsTest.testMurmur2 and others that check
# their clients against Java), as signed Java ints: every tail length 0-3 is covered.
KAFKA_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
    (b"", 275646681),
    (b"1", -1993445489),
    (b"12", 126087238),
    (b"123", -267702483),
    (b"1234", -1614185708),
    (b"12345", -1188365604),
]


@pytest.mark.parametrize(("data", "expected"), KAFKA_VECTORS)
def test_murmur2_matches_kafka_java_vectors(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def test_to_positive_clears_the_sign_bit_rather_than_negating() -> None:
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(2**31)) == 0
    assert to_positive(5) == 5


def test_keyed_partition_is_positive_hash_modulo_partition_count() -> None:
    assert partition_for_key(b"foobar", 50) == (-790332482 & 0x7FFFFFFF) % 50
    for data, expected in KAFKA_VECTORS:
        assert partition_for_key(data, 7) == (expected & 0x7FFFFFFF) % 7


def test_keyed_records_ignore_stickiness() -> None:
    partitioner = StickyPartitioner(random.Random(1))
    assert partitioner.partition("t", b"21", 12, range(12)) == partition_for_key(b"21", 12)


def test_null_keys_stick_to_one_partition_until_its_batch_closes() -> None:
    partitioner = StickyPartitioner(random.Random(7))
    first = partitioner.partition("t", None, 6, range(6))
    assert all(partitioner.partition("t", None, 6, range(6)) == first for _ in range(100))
    partitioner.on_new_batch("t", first, 6, range(6))
    second = partitioner.partition("t", None, 6, range(6))
    assert second != first
    assert all(partitioner.partition("t", None, 6, range(6)) == second for _ in range(100))


def test_closing_a_batch_of_another_partition_does_not_move_the_sticky_one() -> None:
    partitioner = StickyPartitioner(random.Random(3))
    sticky = partitioner.partition("t", None, 4, range(4))
    partitioner.on_new_batch("t", (sticky + 1) % 4, 4, range(4))
    assert partitioner.partition("t", None, 4, range(4)) == sticky


def test_sticky_choice_prefers_partitions_with_a_leader() -> None:
    partitioner = StickyPartitioner(random.Random(5))
    for _ in range(20):
        chosen = partitioner.partition("t", None, 5, [3])
        assert chosen == 3
        partitioner.on_new_batch("t", chosen, 5, [3])
        assert partitioner.partition("t", None, 5, [3]) == 3


def test_single_partition_topic_stays_on_partition_zero() -> None:
    partitioner = StickyPartitioner(random.Random(0))
    assert partitioner.partition("t", None, 1, [0]) == 0
    partitioner.on_new_batch("t", 0, 1, [0])
    assert partitioner.partition("t", None, 1, [0]) == 0


@settings(max_examples=500, deadline=None)
@given(data=st.binary(max_size=64), partitions=st.integers(1, 1000))
def test_murmur2_agrees_with_kafka_pythons_independent_implementation(
    data: bytes, partitions: int
) -> None:
    # kafka-python (the records codec's test oracle too) returns the unsigned 32-bit hash.
    assert murmur2(data) & 0xFFFFFFFF == kafka_python_murmur2(data)
    assert (
        partition_for_key(data, partitions)
        == (kafka_python_murmur2(data) & 0x7FFFFFFF) % partitions
    )

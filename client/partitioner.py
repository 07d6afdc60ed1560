"""Kafka's default partitioner: murmur2 of the key, sticky partitions for null keys.

Keyed records go to ``toPositive(murmur2(key)) % num_partitions`` exactly as Kafka's
Java client computes it, so a key lands on the same partition whichever client wrote
it. ``murmur2`` is Austin Appleby's MurmurHash2 (32 bit) as Kafka's ``Utils.murmur2``
runs it: seed 0x9747b28c, the data read as little-endian 32-bit words, the 1-3 tail
bytes mixed in the order Java's fall-through ``switch`` does, all arithmetic mod 2**32.
Kafka returns a signed Java ``int``; :func:`murmur2` does too, so published vectors
compare directly.

Null keys use KIP-480's sticky partitioning: every record of a topic goes to one
partition until the accumulator closes a batch for it, then the topic moves on to
another partition (chosen at random among those with a leader). Batches fill up
instead of each record opening a batch of its own on a different partition, which is
what made round-robin slow at low ``linger_ms``.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Sequence

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF
_WORDS = struct.Struct("<I")


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2``: a signed 32-bit MurmurHash2 of ``data``."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    whole = length & ~3
    for (k,) in _WORDS.iter_unpack(data[:whole]):
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = length & 3
    if tail:
        if tail == 3:
            h ^= data[whole + 2] << 16
        if tail >= 2:
            h ^= data[whole + 1] << 8
        h ^= data[whole]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(number: int) -> int:
    """Kafka's ``Utils.toPositive``: clear the sign bit (not ``abs``: MIN_VALUE stays 0)."""
    return number & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The partition Kafka's default partitioner picks for ``key``."""
    return to_positive(murmur2(key)) % num_partitions


class StickyPartitioner:
    """Chooses partitions: murmur2 for keys, one sticky partition per topic otherwise.

    ``partition`` is called once per record, so it is a dict lookup in the common case.
    The accumulator calls ``on_new_batch(topic, partition)`` when it closes a batch of
    the sticky partition; only then does the topic switch.
    """

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()
        self._sticky: dict[str, int] = {}

    def partition(
        self, topic: str, key: bytes | None, num_partitions: int, available: Sequence[int]
    ) -> int:
        """The partition of a record; ``available`` lists partitions that have a leader."""
        if key is not None:
            return to_positive(murmur2(key)) % num_partitions
        sticky = self._sticky.get(topic)
        if sticky is None or sticky >= num_partitions:
            sticky = self._choose(num_partitions, available, avoid=-1)
            self._sticky[topic] = sticky
        return sticky

    def sticky(self, topic: str) -> int | None:
        """The topic's current sticky partition (None before its first null-key record)."""
        return self._sticky.get(topic)

    def on_new_batch(
        self, topic: str, closed_partition: int, num_partitions: int, available: Sequence[int]
    ) -> None:
        """A batch of ``closed_partition`` was closed: move the topic's null keys on."""
        if self._sticky.get(topic) == closed_partition:
            self._sticky[topic] = self._choose(num_partitions, available, closed_partition)

    def _choose(self, num_partitions: int, available: Sequence[int], avoid: int) -> int:
        if len(available) == 1:  # the only partition with a leader: stay on it
            return available[0]
        pool = available if available else range(num_partitions)
        candidates = [p for p in pool if p != avoid]
        if not candidates:  # one partition only: stay on it
            return max(avoid, 0)
        return candidates[self._rng.randrange(len(candidates))]

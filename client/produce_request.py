"""Produce request bodies for the sender, packed without walking a dict per request.

How this works. A request with one batch (every send-and-wait with no linger) is the
same msgpack bytes each time up to the batch's records: the map of transactional_id,
acks, timeout_ms and topics, one topic, one partition, then the key "records" and a
``bin`` value last. That prefix is packed once per partition (the body packed with
empty records, its trailing ``bin 8`` of length 0 cut off) and each request is then the
prefix, a ``bin`` header and the records: exactly ``msgpack.packb`` of the dict the
general path builds, which requests of several batches still use. Records of
``SPLICE_MIN_BYTES`` and more stay a buffer of their own, not copied, as
``encode_request_buffers`` would keep them.

The batch itself: a batch of values with null keys, no headers and one timestamp
(``ProducerBatch.simple``), uncompressed, is written by ``encode_plain_values`` from the
compiled codec's records section and two packed halves of the 61-byte header around
its CRC, in a few C calls. It is ``protocol.records.encode_values``' output byte for
byte (the tests pin it); that one keeps the general header assembly (compression,
timestamp types, base offsets) and is what every other batch goes through.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any, Final

import msgpack

from minibroker.protocol.api import PackedBody
from minibroker.protocol.crc32c import crc32c
from minibroker.protocol.records import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    NO_PARTITION_LEADER_EPOCH,
    accel,
    encode_values,
)
from minibroker.protocol.schemas.packing import SPLICE_MIN_BYTES, bin_header

_packb = msgpack.Packer(autoreset=True).pack
_EMPTY_BIN: Final = b"\xc4\x00"  # how msgpack packs b"": cut off the cached prefix

# RecordBatch v2's header, cut at its CRC: baseOffset, batchLength, partitionLeaderEpoch,
# magic, crc | attributes, lastOffsetDelta, baseTimestamp, maxTimestamp, producerId,
# producerEpoch, baseSequence, recordCount (the CRC covers the second half onwards).
_HEAD = struct.Struct(">qiibI")
_CRC_COVERED = struct.Struct(">hiqqqhii")
_LENGTH_BASE: Final = BATCH_HEADER_SIZE - LOG_OVERHEAD  # batchLength of an empty section


def encode_plain_values(
    values: Sequence[bytes],
    *,
    timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
) -> bytes:
    """``encode_values(values, timestamp=..., producer_id=..., ...)`` uncompressed, at
    base offset 0 (the broker assigns offsets): the producer's one-record batches."""
    speedups = accel.speedups
    section = None if speedups is None or not values else speedups.encode_values(values)
    if section is None:  # no compiled codec, a value that is not bytes, or no values
        return encode_values(
            values,
            timestamp=timestamp,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
        )
    count = len(values)
    covered = _CRC_COVERED.pack(
        0, count - 1, timestamp, timestamp, producer_id, producer_epoch, base_sequence, count
    )
    crc = crc32c(section, crc32c(covered))
    length = _LENGTH_BASE + len(section)
    head = _HEAD.pack(0, length, NO_PARTITION_LEADER_EPOCH, MAGIC, crc)
    return b"".join((head, covered, section))


def produce_body(
    acks: int, timeout_ms: int, batches: list[tuple[str, int, bytes]]
) -> dict[str, Any]:
    """The Produce request body for ``(topic, partition, records)`` batches."""
    topics: dict[str, list[dict[str, Any]]] = {}
    for topic, partition, records in batches:
        topics.setdefault(topic, []).append({"index": partition, "records": records})
    return {
        "transactional_id": None,
        "acks": acks,
        "timeout_ms": timeout_ms,
        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
    }


class ProduceBodies:
    """One producer's Produce bodies (its acks and timeout are fixed)."""

    __slots__ = ("_prefixes", "acks", "timeout_ms")

    def __init__(self, acks: int, timeout_ms: int) -> None:
        self.acks = acks
        self.timeout_ms = timeout_ms
        self._prefixes: dict[tuple[str, int], bytes] = {}

    def one_batch(self, topic: str, partition: int, records: bytes) -> PackedBody:
        """The packed body of a request carrying one batch."""
        prefix = self._prefixes.get((topic, partition))
        if prefix is None:
            packed = _packb(produce_body(self.acks, self.timeout_ms, [(topic, partition, b"")]))
            assert packed.endswith(_EMPTY_BIN)
            prefix = self._prefixes[topic, partition] = packed[: -len(_EMPTY_BIN)]
        n = len(records)
        if n < SPLICE_MIN_BYTES:
            return PackedBody([b"".join((prefix, bin_header(n), records))])
        return PackedBody([prefix + bin_header(n), records])

    def body(self, batches: list[tuple[str, int, bytes]]) -> dict[str, Any] | PackedBody:
        """The body of a request carrying ``(topic, partition, records)`` batches."""
        if len(batches) == 1:
            return self.one_batch(*batches[0])
        return produce_body(self.acks, self.timeout_ms, batches)

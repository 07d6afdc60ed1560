"""The sender's packed one-batch Produce bodies are byte for byte what the general
encoder writes."""

from __future__ import annotations

import msgpack
import pytest

from minibroker.client.produce_request import ProduceBodies, produce_body
from minibroker.protocol.api import (
    ApiKey,
    PackedBody,
    encode_request_buffers,
    latest_version,
    packed_request_frame,
)
from minibroker.protocol.schemas.packing import SPLICE_MIN_BYTES

# Around each width of msgpack's bin header (8, 16, 32 bits) and the splice threshold.
SIZES = [0, 1, 255, 256, 65_535, 65_536, SPLICE_MIN_BYTES - 1, SPLICE_MIN_BYTES]


def _joined(body: PackedBody) -> bytes:
    return b"".join(body.parts)


@pytest.mark.parametrize("size", SIZES)
def test_a_one_batch_body_packs_to_the_bytes_of_the_general_body(size: int) -> None:
    bodies = ProduceBodies(acks=-1, timeout_ms=30_000)
    records = bytes(range(256)) * (size // 256) + b"r" * (size % 256)
    packed = bodies.one_batch("events", 3, records)
    general = produce_body(-1, 30_000, [("events", 3, records)])
    assert _joined(packed) == msgpack.packb(general)


def test_the_cached_prefix_serves_later_batches_of_the_partition_and_no_other() -> None:
    bodies = ProduceBodies(acks=1, timeout_ms=1_500)
    batches = [("a", 0, b"x"), ("a", 0, b"yy"), ("a", 1, b"z"), ("b", 0, b"")]
    for topic, partition, records in batches:
        general = produce_body(1, 1_500, [(topic, partition, records)])
        assert _joined(bodies.one_batch(topic, partition, records)) == msgpack.packb(general)


def test_large_records_stay_a_buffer_of_their_own_not_copied() -> None:
    records = b"v" * SPLICE_MIN_BYTES
    packed = ProduceBodies(acks=1, timeout_ms=30_000).one_batch("t", 0, records)
    assert len(packed.parts) == 2
    assert packed.parts[1] is records


def test_a_body_of_several_batches_is_the_general_dict() -> None:
    batches = [("t", 0, b"a"), ("t", 1, b"b"), ("u", 0, b"c")]
    body = ProduceBodies(acks=1, timeout_ms=30_000).body(batches)
    assert body == produce_body(1, 30_000, batches)
    assert [len(t["partitions"]) for t in body["topics"]] == [2, 1]  # type: ignore[index]


@pytest.mark.parametrize("correlation_id", [0, 127, 128, 65_536, 2**31 - 1])
@pytest.mark.parametrize("client_id", [None, "minibroker-producer"])
@pytest.mark.parametrize("size", [100, SPLICE_MIN_BYTES])
def test_a_packed_body_makes_the_frame_the_general_encoder_makes(
    correlation_id: int, client_id: str | None, size: int
) -> None:
    records = b"r" * size
    version = latest_version(ApiKey.PRODUCE)
    packed = ProduceBodies(acks=1, timeout_ms=30_000).one_batch("t", 0, records)
    frame = packed_request_frame(ApiKey.PRODUCE, version, correlation_id, client_id, packed)
    general = encode_request_buffers(
        ApiKey.PRODUCE,
        version,
        correlation_id,
        client_id,
        produce_body(1, 30_000, [("t", 0, records)]),
    )
    assert b"".join(frame) == b"".join(general)
    assert len(frame) == len(general)  # large records are spliced the same way

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
"""

from __future__ import annotations

from typing import Any, Final

import msgpack

from minibroker.protocol.api import PackedBody
from minibroker.protocol.schemas.packing import SPLICE_MIN_BYTES, bin_header

_packb = msgpack.Packer(autoreset=True).pack
_EMPTY_BIN: Final = b"\xc4\x00"  # how msgpack packs b"": cut off the cached prefix


def produce_body(
    acks: int,
    timeout_ms: int,
    batches: list[tuple[str, int, bytes]],
    transactional_id: str | None = None,
) -> dict[str, Any]:
    """The Produce request body for ``(topic, partition, records)`` batches."""
    topics: dict[str, list[dict[str, Any]]] = {}
    for topic, partition, records in batches:
        topics.setdefault(topic, []).append({"index": partition, "records": records})
    return {
        "transactional_id": transactional_id,
        "acks": acks,
        "timeout_ms": timeout_ms,
        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
    }


class ProduceBodies:
    """One producer's Produce bodies (its acks and timeout are fixed)."""

    __slots__ = ("_prefixes", "acks", "timeout_ms", "transactional_id")

    def __init__(self, acks: int, timeout_ms: int, transactional_id: str | None = None) -> None:
        self.acks = acks
        self.timeout_ms = timeout_ms
        self.transactional_id = transactional_id
        self._prefixes: dict[tuple[str, int], bytes] = {}

    def one_batch(self, topic: str, partition: int, records: bytes) -> PackedBody:
        """The packed body of a request carrying one batch."""
        prefix = self._prefixes.get((topic, partition))
        if prefix is None:
            packed = _packb(
                produce_body(
                    self.acks, self.timeout_ms, [(topic, partition, b"")], self.transactional_id
                )
            )
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
        return produce_body(self.acks, self.timeout_ms, batches, self.transactional_id)

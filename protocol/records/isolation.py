"""What a consumer keeps of fetched batches (KIP-98): control batches (transaction
markers) are never records, and a read_committed consumer also drops the batches of
aborted transactions.

A read_committed Fetch answer lists the aborted transactions its records overlap, as
(producer id, first offset). Walking the batches in offset order, a transaction's
producer counts as aborting from its first offset on; its transactional batches are
dropped until its ABORT marker, which ends it (Kafka's consumer does the same). Sans-IO:
bytes in, bytes out.
"""

from __future__ import annotations

from collections.abc import Iterable

from minibroker.protocol.records.batch import iter_headers
from minibroker.protocol.records.control import ControlRecordType, read_marker
from minibroker.protocol.records.types import Buffer


def needs_filtering(raw: Buffer) -> bool:
    """Whether ``raw`` holds a control or transactional batch (else keep it as it is)."""
    return any(h.is_control or h.is_transactional for _, h in iter_headers(raw))


def kept_batches(raw: Buffer, aborted: Iterable[tuple[int, int]], *, read_committed: bool) -> bytes:
    """``raw`` without its control batches and, ``read_committed``, without the
    batches of the ``aborted`` (producer id, first offset) transactions."""
    pending = sorted(aborted, key=lambda a: a[1]) if read_committed else []
    aborting: set[int] = set()
    view = memoryview(raw)
    kept: list[memoryview] = []
    for position, header in iter_headers(raw):
        while pending and pending[0][1] <= header.base_offset + header.last_offset_delta:
            aborting.add(pending.pop(0)[0])
        if header.is_control:
            marker = read_marker(raw, position)
            if marker is not None and marker.kind is ControlRecordType.ABORT:
                aborting.discard(header.producer_id)
            continue
        if header.is_transactional and header.producer_id in aborting:
            continue
        kept.append(view[position : position + header.size])
    return b"".join(kept)

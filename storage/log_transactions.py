"""A log's transactions: the aborted-transaction index and the last stable offset.

How this works. The producer state (storage/producer_state.py) knows each producer's
open transaction; when a marker ends one, the Log hears of it here:

- an aborted transaction goes into the ``.txnindex`` of the segment holding its marker
  (storage/txn_index.py), which read_committed fetches consult;
- every ended transaction stays *unreplicated* until the high watermark passes its
  marker: until then a failover could lose the marker, so the transaction still holds
  the last stable offset back.

The last stable offset (LSO) is the smallest of the high watermark, the first offset of
the oldest open transaction, and the first offset of the oldest ended transaction whose
marker is not yet replicated. read_committed consumers read below it and never past an
undecided record; with no transactions it is the high watermark.

Loading and truncation replay the batches after the newest producer snapshot; the
transactions they end are added again (the index ignores ones it has).

The Log (storage/log.py) owns one, handed the segment list (whose ``.txnindex`` files
it writes and reads) and the producer state (whose first unstable offset it reads).
"""

from __future__ import annotations

from collections.abc import Iterable

from minibroker.storage.producer_entries import CompletedTxn
from minibroker.storage.producer_state import ProducerStateManager
from minibroker.storage.segment_list import SegmentList
from minibroker.storage.txn_index import AbortedTxn


class LogTransactions:
    """The transactions of the log whose segments are ``segments`` and whose producer
    state is ``producers``: the aborted ones indexed, the unreplicated ones held
    against the LSO."""

    def __init__(self, segments: SegmentList, producers: ProducerStateManager) -> None:
        self._segments = segments
        self._producers = producers
        self.unreplicated: list[CompletedTxn] = []
        """Transactions whose marker the high watermark has not passed yet, in marker
        order."""

    def ended(self, completed: Iterable[CompletedTxn], *, replicated: bool) -> None:
        """Record transactions markers ended (``replicated``: known to be below the
        high watermark already, as on load)."""
        for txn in completed:
            if txn.aborted:
                segments = self._segments
                unstable = self._producers.first_unstable_offset()
                lso = txn.marker_offset + 1 if unstable is None else unstable
                segments.segments[segments.index_for(txn.marker_offset)].txn_index.add(
                    AbortedTxn(txn.producer_id, txn.first_offset, txn.marker_offset, lso)
                )
            if not replicated:
                self.unreplicated.append(txn)

    def forget_replicated(self, high_watermark: int) -> None:
        """The high watermark moved: markers below it count as replicated (called on
        every HW move, so the list stays as short as the unreplicated tail)."""
        unreplicated = self.unreplicated
        if unreplicated and unreplicated[0].marker_offset < high_watermark:
            self.unreplicated = [t for t in unreplicated if t.marker_offset >= high_watermark]

    def last_stable_offset(self, high_watermark: int) -> int:
        """The LSO given the partition's high watermark (see the module doc)."""
        self.forget_replicated(high_watermark)
        lso = high_watermark
        first = self._producers.first_unstable_offset()
        if first is not None and first < lso:
            lso = first
        for txn in self.unreplicated:
            if txn.first_offset < lso:
                lso = txn.first_offset
        return lso

    def collect_aborted(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions with data in [fetch_offset, upper_bound): their
        markers lie in the segment holding ``fetch_offset`` or a later one."""
        segments = self._segments
        found: list[AbortedTxn] = []
        for segment in segments.segments[segments.index_for(fetch_offset) :]:
            if segment.txn_index.entries:
                found += segment.txn_index.collect(fetch_offset, upper_bound)
        return found

    def truncated_to(self, offset: int) -> None:
        """The log was cut at ``offset``: markers at or above it are gone."""
        self.unreplicated = [t for t in self.unreplicated if t.marker_offset < offset]

    def clear(self) -> None:
        """The log restarted empty."""
        self.unreplicated = []

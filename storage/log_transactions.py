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
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

from minibroker.storage.log_state import LogState
from minibroker.storage.producer_entries import CompletedTxn
from minibroker.storage.txn_index import AbortedTxn


class LogTransactions(LogState):
    def _transactions_ended(self, completed: Iterable[CompletedTxn], *, replicated: bool) -> None:
        """Record transactions markers ended (``replicated``: known to be below the
        high watermark already, as on load)."""
        for txn in completed:
            if txn.aborted:
                index = max(bisect.bisect_right(self._bases, txn.marker_offset) - 1, 0)
                unstable = self.producer_state.first_unstable_offset()
                lso = txn.marker_offset + 1 if unstable is None else unstable
                self._segments[index].txn_index.add(
                    AbortedTxn(txn.producer_id, txn.first_offset, txn.marker_offset, lso)
                )
            if not replicated:
                self.unreplicated_txns.append(txn)

    def forget_replicated(self, high_watermark: int) -> None:
        """The high watermark moved: markers below it count as replicated (called on
        every HW move, so the list stays as short as the unreplicated tail)."""
        unreplicated = self.unreplicated_txns
        if unreplicated and unreplicated[0].marker_offset < high_watermark:
            self.unreplicated_txns = [t for t in unreplicated if t.marker_offset >= high_watermark]

    def last_stable_offset(self, high_watermark: int) -> int:
        """The LSO given the partition's high watermark (see the module doc)."""
        self.forget_replicated(high_watermark)
        unreplicated = self.unreplicated_txns
        lso = high_watermark
        first = self.producer_state.first_unstable_offset()
        if first is not None and first < lso:
            lso = first
        for txn in unreplicated:
            if txn.first_offset < lso:
                lso = txn.first_offset
        return lso

    def collect_aborted(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions with data in [fetch_offset, upper_bound): their
        markers lie in the segment holding ``fetch_offset`` or a later one."""
        start = max(bisect.bisect_right(self._bases, fetch_offset) - 1, 0)
        found: list[AbortedTxn] = []
        for segment in self._segments[start:]:
            if segment.txn_index.entries:
                found += segment.txn_index.collect(fetch_offset, upper_bound)
        return found

    def _forget_unreplicated_from(self, offset: int) -> None:
        """The log was cut at ``offset``: markers at or above it are gone."""
        self.unreplicated_txns = [t for t in self.unreplicated_txns if t.marker_offset < offset]

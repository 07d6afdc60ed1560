"""Reading segment files as a read_committed consumer would: without aborted data.

``--isolation-level read_committed`` (the data source's ``isolation_level`` option)
leaves out every batch of an aborted transaction. Which ones those are is what the
broker itself answers a read_committed Fetch with: each segment's ``.txnindex`` lists
the transactions whose ABORT marker is in it, as (producer id, first offset, marker
offset) (storage/txn_index.py, docs/architecture.md "Transactions"). A transactional
data batch of that producer whose base offset lies in that range belongs to the aborted
transaction; any slice of the log can tell that alone, so no task needs another's.

Kept: committed records, records outside transactions, the markers themselves (the
producers and transactions reports count commits and aborts from them), and the
records of transactions still open when the files were read (no marker says what
became of them; the transactions report lists them as open).

The driver reads the index files (``of_partition_dir``) and ships each partition's
``AbortedTransactions`` with its tasks: executors import only protocol and analytics.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from pathlib import Path

from minibroker.protocol.records import BatchHeader

READ_UNCOMMITTED = "read_uncommitted"
READ_COMMITTED = "read_committed"
ISOLATION_LEVELS = (READ_UNCOMMITTED, READ_COMMITTED)


class AbortedTransactions:
    """One partition replica's aborted transactions: (first offset, marker offset)
    ranges per producer id."""

    __slots__ = ("_ranges",)

    def __init__(self, aborted: Iterable[tuple[int, int, int]]) -> None:
        """``aborted``: (producer id, first offset, marker offset) of each."""
        ranges: dict[int, list[tuple[int, int]]] = {}
        for producer_id, first, last in aborted:
            ranges.setdefault(producer_id, []).append((first, last))
        for spans in ranges.values():
            spans.sort()
        self._ranges = ranges

    def __bool__(self) -> bool:
        return bool(self._ranges)

    def __getstate__(self) -> dict[int, list[tuple[int, int]]]:
        return self._ranges

    def __setstate__(self, state: dict[int, list[tuple[int, int]]]) -> None:
        self._ranges = state

    def drops(self, header: BatchHeader) -> bool:
        """Whether the batch is data of an aborted transaction."""
        if not header.is_transactional or header.is_control:
            return False
        spans = self._ranges.get(header.producer_id)
        if spans is None:
            return False
        i = bisect.bisect_right(spans, (header.base_offset, 1 << 63)) - 1
        return i >= 0 and spans[i][0] <= header.base_offset <= spans[i][1]


def of_partition_dir(directory: Path) -> AbortedTransactions:
    """The aborted transactions the ``.txnindex`` files of one partition replica's
    directory list (driver side: the index format is the broker's, in storage/)."""
    # Imported here: executors never call this, and storage is not shipped to them.
    from minibroker.storage.names import TXN_INDEX_SUFFIX
    from minibroker.storage.txn_index import TransactionIndex

    return AbortedTransactions(
        (entry.producer_id, entry.first_offset, entry.last_offset)
        for path in sorted(directory.glob(f"*{TXN_INDEX_SUFFIX}"))
        for entry in TransactionIndex(path).entries
    )

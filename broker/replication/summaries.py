"""How replication's log lines name thousands of partitions: the first few, and how
many more. A LeaderAndIsr, an ISR batch or a fetch answer can concern every partition
a broker holds; one line each would be tens of thousands of lines (and their CPU)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable

LOGGED_PARTITIONS = 5
"""How many partitions a summary line names."""


def some_of(items: Iterable[str], total: int) -> str:
    """The first LOGGED_PARTITIONS of ``total`` ``items`` (formatted only as far as
    shown), and how many more there are."""
    shown = list(itertools.islice(items, LOGGED_PARTITIONS))
    more = total - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")

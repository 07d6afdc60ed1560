"""Per-log settings, named after Kafka's topic configs (``segment.bytes`` ->
``segment_bytes``), and the clock type used for time-based behaviour.

The broker builds one LogConfig from ``log.*`` broker properties and topic overrides;
storage takes it as a plain value and never reads configuration itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from minibroker.protocol.errors import ConfigError
from minibroker.storage.producer_entries import DEFAULT_PRODUCER_ID_EXPIRATION_MS

Clock = Callable[[], int]
"""Wall-clock milliseconds since the epoch; injected so tests control time."""


def system_clock() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Kafka's defaults. ``-1`` for a retention limit means "no limit"."""

    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * 24 * 3600 * 1000
    index_interval_bytes: int = 4096
    segment_index_bytes: int = 10 * 1024 * 1024
    retention_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    max_message_bytes: int = 1024 * 1024 + 12
    file_delete_delay_ms: int = 60_000
    producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS  # idle producers forgotten
    cleanup_policy: str = "delete"  # "delete", "compact" or "compact,delete"
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = 2**63 - 1
    delete_retention_ms: int = 86_400_000  # how long tombstones survive cleaning

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy.split(",")

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy.split(",")

    def __post_init__(self) -> None:
        # The smallest values Kafka accepts for the same keys.
        for key, value, least in (
            ("segment.bytes", self.segment_bytes, 14),
            ("segment.index.bytes", self.segment_index_bytes, 12),
            ("index.interval.bytes", self.index_interval_bytes, 0),
            ("segment.ms", self.segment_ms, 1),
            ("max.message.bytes", self.max_message_bytes, 0),
            ("file.delete.delay.ms", self.file_delete_delay_ms, 0),
        ):
            if value < least:
                raise ConfigError(f"{key} must be at least {least}, got {value}")

"""The log keys of ``BrokerConfig``: segments, retention, flushing, the cleaner, the
scrubber, and the defaults topics inherit for them.

Retention and roll times take Kafka's precedence: ``.ms``, else ``.minutes``, else
``.hours`` (``retention_ms`` and ``roll_ms`` give the effective values).
"""

from __future__ import annotations

from dataclasses import dataclass

from minibroker.broker.config.config_keys import (
    LONG_MAX,
    at_least,
    config_key,
    fraction,
    non_empty,
    one_of,
)

TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CLEANUP_POLICIES = ("delete", "compact", "compact,delete", "delete,compact")
COMPRESSION_TYPES = ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")


@dataclass(frozen=True)
class LogSettings:
    """The log, retention and cleaner keys of ``BrokerConfig``."""

    __slots__ = ()  # BrokerConfig holds the slots

    log_dirs: list[str] = config_key(  # noqa: RUF009 - _key uses a default_factory for lists
        "log.dirs", ["/tmp/kafka-logs"], "Comma-separated data directories.", non_empty
    )
    log_segment_bytes: int = config_key(
        "log.segment.bytes", 1073741824, "Roll a segment at this size.", at_least(14)
    )
    log_roll_ms: int | None = config_key(
        "log.roll.ms", None, "Roll a segment this old (ms).", at_least(1)
    )
    log_roll_hours: int = config_key("log.roll.hours", 168, "log.roll.ms in hours.", at_least(1))
    log_index_interval_bytes: int = config_key(
        "log.index.interval.bytes", 4096, "Bytes between sparse index entries.", at_least(0)
    )
    log_index_size_max_bytes: int = config_key(
        "log.index.size.max.bytes", 10485760, "Preallocated size of an index file.", at_least(4)
    )
    log_retention_ms: int | None = config_key(
        "log.retention.ms", None, "Delete segments older than this; -1 = forever.", at_least(-1)
    )
    log_retention_minutes: int | None = config_key(
        "log.retention.minutes", None, "log.retention.ms in minutes.", at_least(-1)
    )
    log_retention_hours: int = config_key(
        "log.retention.hours", 168, "log.retention.ms in hours.", at_least(-1)
    )
    log_retention_bytes: int = config_key(
        "log.retention.bytes",
        -1,
        "Delete old segments beyond this size; -1 = no limit.",
        at_least(-1),
        kind="LONG",
    )
    log_retention_check_interval_ms: int = config_key(
        "log.retention.check.interval.ms", 300000, "How often retention runs.", at_least(1)
    )
    log_scrubber_enable: bool = config_key(
        "log.scrubber.enable",
        True,
        "Re-check the CRC-32C of every closed segment in the background; a corrupt "
        "replica found so is taken out of service and repaired from the leader.",
    )
    log_scrubber_io_max_bytes_per_second: int = config_key(
        "log.scrubber.io.max.bytes.per.second",
        4 * 1024 * 1024,
        "Read rate of the scrubber (bytes/s): small enough to leave the disk to produce "
        "and fetch, a 1 GiB segment every ~4 minutes.",
        at_least(1),
    )
    log_scrubber_interval_ms: int = config_key(
        "log.scrubber.interval.ms",
        3600000,
        "Pause between two scrubber passes over every closed segment.",
        at_least(1),
    )
    producer_id_expiration_ms: int = config_key(
        "producer.id.expiration.ms",
        86400000,
        "A partition forgets an idempotent producer idle this long (checked with retention).",
        at_least(1),
    )
    log_segment_delete_delay_ms: int = config_key(
        "log.segment.delete.delay.ms",
        60000,
        "Delay before a deleted segment's files go.",
        at_least(0),
    )
    log_flush_interval_messages: int = config_key(
        "log.flush.interval.messages", LONG_MAX, "fsync after this many messages.", at_least(1)
    )
    log_flush_interval_ms: int | None = config_key(
        "log.flush.interval.ms", None, "fsync a log this long after its last flush.", at_least(0)
    )
    log_flush_offset_checkpoint_interval_ms: int = config_key(
        "log.flush.offset.checkpoint.interval.ms",
        60000,
        "How often recovery-point-offset-checkpoint is written.",
        at_least(0),
    )
    log_flush_start_offset_checkpoint_interval_ms: int = config_key(
        "log.flush.start.offset.checkpoint.interval.ms",
        60000,
        "How often log-start-offset-checkpoint is written.",
        at_least(0),
    )
    log_message_timestamp_type: str = config_key(
        "log.message.timestamp.type",
        "CreateTime",
        "CreateTime or LogAppendTime.",
        one_of(*TIMESTAMP_TYPES),
    )
    log_cleanup_policy: str = config_key(
        "log.cleanup.policy",
        "delete",
        "delete (retention), compact (keep each key's latest record) or compact,delete.",
        one_of(*CLEANUP_POLICIES),
        kind="LIST",
    )
    log_cleaner_enable: bool = config_key(
        "log.cleaner.enable", True, "Run the log cleaner (compacted topics need it)."
    )
    log_cleaner_threads: int = config_key(
        "log.cleaner.threads", 1, "Logs cleaned at once (each in a worker process).", at_least(1)
    )
    log_cleaner_dedupe_buffer_size: int = config_key(
        "log.cleaner.dedupe.buffer.size",
        134217728,
        "Memory for the cleaners' offset maps (bytes, split over the threads).",
        at_least(1024),
    )
    log_cleaner_io_max_bytes_per_second: float = config_key(
        "log.cleaner.io.max.bytes.per.second",
        1.7976931348623157e308,
        "Read rate cap of the cleaners together (bytes/s).",
        lambda v: None if v > 0 else "must be > 0",
    )
    log_cleaner_backoff_ms: int = config_key(
        "log.cleaner.backoff.ms", 15000, "Pause when no log needs cleaning.", at_least(0)
    )
    log_cleaner_min_cleanable_ratio: float = config_key(
        "log.cleaner.min.cleanable.ratio",
        0.5,
        "Default min.cleanable.dirty.ratio.",
        fraction,
    )
    log_cleaner_min_compaction_lag_ms: int = config_key(
        "log.cleaner.min.compaction.lag.ms", 0, "Default min.compaction.lag.ms.", at_least(0)
    )
    log_cleaner_max_compaction_lag_ms: int = config_key(
        "log.cleaner.max.compaction.lag.ms",
        LONG_MAX,
        "Default max.compaction.lag.ms.",
        at_least(1),
    )
    log_cleaner_delete_retention_ms: int = config_key(
        "log.cleaner.delete.retention.ms", 86400000, "Default delete.retention.ms.", at_least(0)
    )
    compression_type: str = config_key(
        "compression.type",
        "producer",
        "Codec batches are stored in: producer (as sent), uncompressed, gzip, snappy, lz4, zstd.",
        one_of(*COMPRESSION_TYPES),
    )
    num_recovery_threads_per_data_dir: int = config_key(
        "num.recovery.threads.per.data.dir", 1, "Log recovery workers per log dir.", at_least(1)
    )
    message_max_bytes: int = config_key(
        "message.max.bytes", 1048588, "Largest record batch accepted (bytes).", at_least(0)
    )

    @property
    def retention_ms(self) -> int:
        """Effective retention: .ms, else .minutes, else .hours (Kafka's precedence)."""
        if self.log_retention_ms is not None:
            return self.log_retention_ms
        if self.log_retention_minutes is not None:
            return _scaled(self.log_retention_minutes, 60_000)
        return _scaled(self.log_retention_hours, 3_600_000)

    @property
    def roll_ms(self) -> int:
        if self.log_roll_ms is not None:
            return self.log_roll_ms
        return self.log_roll_hours * 3_600_000


def _scaled(value: int, factor: int) -> int:
    return value if value < 0 else value * factor

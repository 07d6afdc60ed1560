"""Spark schemas of the two views the ``minibroker`` data source offers.

``RECORDS`` (the default, for ad-hoc SQL): one row per record, as a consumer would see
it, plus where it came from (``segment`` file, ``log_dir`` and the log dir's
``broker_id`` from meta.properties, null if absent), so replicas of one partition
read from several brokers stay apart.

``SCAN`` (what the report job reads): one row per record, per batch and per corrupt
region, told apart by ``kind``; the columns every kind has are at the top level and
the kind-specific ones in one struct each (null for the other kinds). Records carry
value sizes and a per-record checksum instead of values, so a report over a large log
moves little data into the JVM.

``PARTIALS`` (what the report job reads): the scan view's corruption rows, its record
rows only for partitions found in two or more log dirs (the divergence check compares
them offset by offset), and instead of the other records a few ``group`` rows: per
slice, key and minute, how many records, their value bytes and first/last offset and
timestamp; instead of the batch rows a few ``batch_summary`` rows: per slice,
compression codec, leader epoch (the ``leader_epoch`` column) and minute of the batches'
max timestamps, how many batches, their records and bytes (on disk and uncompressed)
with the smallest and largest of each, and their first and last offset
(``analytics.partials``); and a few ``producer_summary`` rows: per slice, producer id
and epoch, its batches, records, bytes, sequence numbers and transaction markers
(``analytics.producer_summaries``). Every report figure is a sum, min, max or
distinct-key count of these (the producers' sequence gaps also compare neighbouring
slices), so the executors aggregate and the JVM reads a few rows per slice instead of
one per record and one per batch.

Column order here must match the tuples built in ``analytics.scan`` and the Arrow
batches built in ``analytics.columns``.
"""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

KIND_RECORD = "record"
KIND_BATCH = "batch"
KIND_CORRUPTION = "corruption"
KIND_GROUP = "group"
KIND_BATCH_SUMMARY = "batch_summary"
KIND_PRODUCER_SUMMARY = "producer_summary"
MINUTE_MS = 60_000
"""A group row's minute: ``floor(timestamp / MINUTE_MS) * MINUTE_MS``, divided as doubles
(as Spark's ``/`` does), so executors and Spark put a record in the same minute."""

_HEADER = StructType([StructField("key", StringType()), StructField("value", BinaryType())])

RECORDS = StructType(
    [
        StructField("topic", StringType(), False),
        StructField("partition", IntegerType(), False),
        StructField("offset", LongType(), False),
        StructField("timestamp", LongType(), False),
        StructField("timestamp_type", StringType(), False),
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("headers", ArrayType(_HEADER), False),
        StructField("leader_epoch", IntegerType(), False),
        StructField("batch_base_offset", LongType(), False),
        StructField("segment", StringType(), False),
        StructField("log_dir", StringType(), False),
        StructField("broker_id", IntegerType()),
    ]
)

SCAN_RECORD = StructType(
    [
        StructField("offset", LongType(), False),
        StructField("timestamp", LongType(), False),
        StructField("key", BinaryType()),
        StructField("value_size", IntegerType(), False),  # -1: null value (a tombstone)
        StructField("header_count", IntegerType(), False),
        StructField("checksum", LongType(), False),  # analytics.scan.record_checksum
    ]
)

SCAN_BATCH = StructType(
    [
        StructField("last_offset", LongType(), False),
        StructField("record_count", IntegerType(), False),
        StructField("records_in_range", IntegerType(), False),  # after the time filter
        StructField("size", IntegerType(), False),  # bytes on disk, header included
        StructField("compression", StringType(), False),
        StructField("timestamp_type", StringType(), False),
        StructField("max_timestamp", LongType(), False),
        StructField("producer_id", LongType(), False),
        StructField("is_transactional", BooleanType(), False),
        StructField("is_control", BooleanType(), False),
        StructField("producer_epoch", IntegerType(), False),
        StructField("base_sequence", IntegerType(), False),
        # what the batch would take uncompressed: header plus decompressed records
        StructField("uncompressed_size", IntegerType(), False),
        # a control batch's marker (protocol.records.control): "commit", "abort", or
        # "unknown"; null for a data batch
        StructField("control_type", StringType()),
    ]
)

SCAN_CORRUPTION = StructType(
    [
        StructField("length", LongType(), False),  # unreadable bytes from `position`
        StructField("reason", StringType(), False),
    ]
)

SCAN = StructType(
    [
        StructField("kind", StringType(), False),
        StructField("log_dir", StringType(), False),
        StructField("broker_id", IntegerType()),
        StructField("topic", StringType(), False),
        StructField("partition", IntegerType(), False),
        StructField("segment", StringType(), False),
        StructField("position", LongType(), False),  # byte position of the batch / damage
        StructField("batch_base_offset", LongType()),
        StructField("leader_epoch", IntegerType()),
        StructField("record", SCAN_RECORD),
        StructField("batch", SCAN_BATCH),
        StructField("corruption", SCAN_CORRUPTION),
    ]
)

SCAN_GROUP = StructType(
    [
        StructField("key", BinaryType()),
        StructField("minute", LongType(), False),  # start of the minute, ms
        StructField("records", LongType(), False),
        StructField("value_bytes", LongType(), False),  # null values count 0
        StructField("first_offset", LongType(), False),
        StructField("last_offset", LongType(), False),
        StructField("first_timestamp", LongType(), False),
        StructField("last_timestamp", LongType(), False),
    ]
)

BATCH_SUMMARY = StructType(
    [
        StructField("compression", StringType(), False),
        StructField("minute", LongType(), False),  # of the batches' max timestamps
        StructField("batches", LongType(), False),
        StructField("records", LongType(), False),  # sum of the batches' record counts
        StructField("min_records", IntegerType(), False),
        StructField("max_records", IntegerType(), False),
        StructField("bytes", LongType(), False),  # on disk, headers included
        StructField("max_bytes", IntegerType(), False),
        StructField("first_offset", LongType(), False),  # smallest base offset
        StructField("last_offset", LongType(), False),  # largest last offset
        StructField("uncompressed_bytes", LongType(), False),  # their uncompressed sizes
    ]
)

PRODUCER_SUMMARY = StructType(
    [
        StructField("producer_id", LongType(), False),  # -1: not idempotent
        StructField("producer_epoch", IntegerType(), False),
        StructField("batches", LongType(), False),  # data and control batches
        StructField("records", LongType(), False),
        StructField("bytes", LongType(), False),
        StructField("uncompressed_bytes", LongType(), False),
        StructField("first_offset", LongType(), False),
        StructField("last_offset", LongType(), False),
        # Sequence numbers of the idempotent data batches (null without any): the first
        # one's base sequence, the one expected after the last, and how many batches
        # did not start where the one before them ended.
        StructField("first_sequence", IntegerType()),
        StructField("next_sequence", IntegerType()),
        StructField("sequence_gaps", LongType(), False),
        StructField("transactional_batches", LongType(), False),  # data batches only
        StructField("commits", LongType(), False),  # COMMIT markers
        StructField("aborts", LongType(), False),  # ABORT markers
        StructField("last_transactional_offset", LongType()),  # of a transactional batch
        StructField("last_marker_offset", LongType()),  # of a control batch
    ]
)

PARTIALS = StructType(
    [
        *SCAN.fields,
        StructField("group", SCAN_GROUP),
        StructField("batch_summary", BATCH_SUMMARY),
        StructField("producer_summary", PRODUCER_SUMMARY),
    ]
)

VIEWS = {"records": RECORDS, "scan": SCAN, "partials": PARTIALS}

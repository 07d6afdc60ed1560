"""The segment report: pure DataFrame -> DataFrame functions (STYLE rule 11).

Everything here takes DataFrames and returns DataFrames; nothing reads files or writes
output, so each function is tested on small hand-made DataFrames.

Input is the data source's ``partials`` view (analytics.schema.PARTIALS; what the job
reads) or its ``scan`` view (analytics.schema.SCAN), split by ``split_scan`` into three
flat frames, plus the record groups and the batch summaries:

    records     log_dir, broker_id, topic, partition, segment, position,
                batch_base_offset, leader_epoch, offset, timestamp, key, value_size,
                header_count, checksum
    batches     log_dir, broker_id, topic, partition, segment, position,
                batch_base_offset, leader_epoch, last_offset, record_count,
                records_in_range, size, compression, timestamp_type, max_timestamp,
                producer_id, is_transactional, is_control, producer_epoch,
                base_sequence, uncompressed_size, control_type
    corruption  log_dir, broker_id, topic, partition, segment, position,
                batch_base_offset, leader_epoch, length, reason

    groups      topic, partition, log_dir, broker_id, key, minute, records, value_bytes,
                first_offset, last_offset, first_timestamp, last_timestamp
    summaries   topic, partition, log_dir, broker_id, leader_epoch, compression,
                minute, batches, records, min_records, max_records, bytes, max_bytes,
                first_offset, last_offset, uncompressed_bytes
    producers   topic, partition, log_dir, broker_id, and the fields of
                analytics.schema.PRODUCER_SUMMARY (analytics.producers; also the
                per-partition ``transactions`` report)

The figures drawn from records (partition summary, records per minute, top keys) are
computed over groups: sums, mins, maxes and distinct keys of groups equal those of the
records they hold, whether a group holds one record (``group_records``, from the scan
view) or all of a slice's records of one key and minute (the partials view, aggregated
on the executors by ``analytics.partials``). Likewise the figures drawn from batches
(partition summary, batch statistics, leader epochs, traffic) are computed over batch
summaries, of one batch each (``summarise_batches``) or of all of a slice's batches of
one codec, leader epoch and minute; averages are sums over counts, as Spark's ``avg``
divides them. The producers report reads producer summaries the same way
(``analytics.producers``). The divergence check reads records: the partials view keeps
them for partitions found in two or more log dirs, the only ones it compares.

Per-partition figures are per replica (keyed by log_dir as well): when several brokers'
log dirs are given, each replica gets its own row and ``divergence`` compares them.
Topic-wide figures (records per minute, traffic, top keys, topics, producers) read one
replica per partition (``analytics.copies.one_copy``) so replicas are not counted twice.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from minibroker.analytics.copies import REPLICA, one_copy
from minibroker.analytics.producers import (
    producer_report,
    summarise_producers,
    transaction_report,
)
from minibroker.analytics.schema import (
    KIND_BATCH,
    KIND_BATCH_SUMMARY,
    KIND_CORRUPTION,
    KIND_GROUP,
    KIND_PRODUCER_SUMMARY,
    KIND_RECORD,
    MINUTE_MS,
    SCAN_GROUP,
)
from minibroker.analytics.topics import topic_summary
from minibroker.analytics.traffic import traffic

_COMMON = [
    "log_dir",
    "broker_id",
    "topic",
    "partition",
    "segment",
    "position",
    "batch_base_offset",
    "leader_epoch",
]
DEFAULT_TOP_KEYS = 10
"""Keys listed per topic: enough to spot a hot key, short enough to print."""


def split_scan(scan: DataFrame) -> tuple[DataFrame, DataFrame, DataFrame]:
    """The scan view as (records, batches, corruption), each flattened."""

    def kind(name: str, struct: str) -> DataFrame:
        return scan.where(F.col("kind") == name).select(*_COMMON, f"{struct}.*")

    return (
        kind(KIND_RECORD, "record"),
        kind(KIND_BATCH, "batch"),
        kind(KIND_CORRUPTION, "corruption"),
    )


def minute_of(timestamp: Column) -> Column:
    """The start of ``timestamp``'s minute, in ms (``analytics.schema.MINUTE_MS``)."""
    return F.floor(timestamp / MINUTE_MS) * MINUTE_MS


def group_records(records: DataFrame) -> DataFrame:
    """Each record as a group of one (the groups' columns, see the module docstring)."""
    return records.select(
        *REPLICA,
        "key",
        minute_of(F.col("timestamp")).alias("minute"),
        F.lit(1).cast("long").alias("records"),
        F.greatest(F.col("value_size"), F.lit(0)).cast("long").alias("value_bytes"),
        F.col("offset").alias("first_offset"),
        F.col("offset").alias("last_offset"),
        F.col("timestamp").alias("first_timestamp"),
        F.col("timestamp").alias("last_timestamp"),
    )


def summarise_batches(batches: DataFrame) -> DataFrame:
    """Each batch as a summary of one (the summaries' columns, see the module docstring)."""
    return batches.select(
        *REPLICA,
        "leader_epoch",
        "compression",
        minute_of(F.col("max_timestamp")).alias("minute"),
        F.lit(1).cast("long").alias("batches"),
        F.col("record_count").cast("long").alias("records"),
        F.col("record_count").alias("min_records"),
        F.col("record_count").alias("max_records"),
        F.col("size").cast("long").alias("bytes"),
        F.col("size").alias("max_bytes"),
        F.col("batch_base_offset").alias("first_offset"),
        "last_offset",
        F.col("uncompressed_size").cast("long").alias("uncompressed_bytes"),
    )


def _per_minute_rate(count: Column, first_ts: Column, last_ts: Column) -> Column:
    """Records per minute over the partition's time span, a span under a minute
    counting as one minute (so a burst does not read as a huge rate)."""
    span_minutes = F.greatest(last_ts - first_ts, F.lit(MINUTE_MS)) / F.lit(MINUTE_MS)
    return F.round(count / span_minutes, 3)


def partition_summary(records: DataFrame, batches: DataFrame, corruption: DataFrame) -> DataFrame:
    """``partition_summary_from_groups`` of the records and batches themselves."""
    return partition_summary_from_groups(
        group_records(records), summarise_batches(batches), corruption
    )


def partition_summary_from_groups(
    groups: DataFrame, summaries: DataFrame, corruption: DataFrame
) -> DataFrame:
    """Per replica: records, batches, bytes on disk, value bytes, first/last offset and
    timestamp, records per minute, approximate distinct keys, null keys, corruption.

    One aggregation over the union of the three frames (not joins): a replica that
    has only corruption still gets a row, and a null broker_id groups like any value.
    The distinct-key estimate is the same over groups as over records: a HyperLogLog
    sketch ignores repeats of a key.
    """
    tagged = (
        groups.select(*REPLICA, *(f.name for f in SCAN_GROUP.fields), _tag(KIND_GROUP))
        .unionByName(
            summaries.select(
                *REPLICA,
                F.col("batches").alias("batch_count"),
                F.col("bytes").alias("batch_bytes"),
                _tag("batch"),
            ),
            allowMissingColumns=True,
        )
        .unionByName(
            corruption.select(*REPLICA, "length", _tag("corruption")), allowMissingColumns=True
        )
    )
    is_group = F.col("_kind") == KIND_GROUP
    summary = tagged.groupBy(*REPLICA).agg(
        F.coalesce(F.sum("records"), F.lit(0)).alias("records"),
        F.coalesce(F.sum("batch_count"), F.lit(0)).alias("batches"),
        F.coalesce(F.sum("batch_bytes"), F.lit(0)).alias("bytes"),
        F.coalesce(F.sum("value_bytes"), F.lit(0)).alias("value_bytes"),
        F.min("first_offset").alias("first_offset"),
        F.max("last_offset").alias("last_offset"),
        F.min("first_timestamp").alias("first_timestamp"),
        F.max("last_timestamp").alias("last_timestamp"),
        F.approx_count_distinct("key").alias("approx_distinct_keys"),
        F.coalesce(
            F.sum(F.when(is_group & F.col("key").isNull(), F.col("records"))), F.lit(0)
        ).alias("null_keys"),
        F.count(F.when(F.col("_kind") == "corruption", 1)).alias("corrupt_regions"),
        F.coalesce(F.sum("length"), F.lit(0)).alias("corrupt_bytes"),
    )
    rate = _per_minute_rate(F.col("records"), F.col("first_timestamp"), F.col("last_timestamp"))
    return summary.select(
        *REPLICA,
        "records",
        "batches",
        "bytes",
        "value_bytes",
        "first_offset",
        "last_offset",
        "first_timestamp",
        "last_timestamp",
        rate.alias("records_per_minute"),
        "approx_distinct_keys",
        "null_keys",
        "corrupt_regions",
        "corrupt_bytes",
    )


def _tag(kind: str) -> Column:
    return F.lit(kind).alias("_kind")


def records_per_minute(records: DataFrame) -> DataFrame:
    """``records_per_minute_from_groups`` of the records themselves."""
    return records_per_minute_from_groups(group_records(records))


def records_per_minute_from_groups(groups: DataFrame) -> DataFrame:
    """Per topic, partition and minute (start of the minute, ms): records and value bytes."""
    return (
        one_copy(groups)
        .groupBy("topic", "partition", "minute")
        .agg(F.sum("records").alias("records"), F.sum("value_bytes").alias("value_bytes"))
    )


def top_keys(records: DataFrame, n: int = DEFAULT_TOP_KEYS) -> DataFrame:
    """``top_keys_from_groups`` of the records themselves."""
    return top_keys_from_groups(group_records(records), n)


def top_keys_from_groups(groups: DataFrame, n: int = DEFAULT_TOP_KEYS) -> DataFrame:
    """Per topic the ``n`` most frequent non-null keys: topic, rank (1 = most), key,
    records. Ties are broken by key bytes so the answer is stable."""
    counted = (
        one_copy(groups)
        .where(F.col("key").isNotNull())
        .groupBy("topic", "key")
        .agg(F.sum("records").alias("records"))
    )
    order = Window.partitionBy("topic").orderBy(F.col("records").desc(), F.col("key"))
    ranked = counted.withColumn("rank", F.row_number().over(order))
    return ranked.where(F.col("rank") <= n).select("topic", "rank", "key", "records")


def batch_stats(batches: DataFrame) -> DataFrame:
    """``batch_stats_from_summaries`` of the batches themselves."""
    return batch_stats_from_summaries(summarise_batches(batches))


def batch_stats_from_summaries(summaries: DataFrame) -> DataFrame:
    """Per replica and compression codec: batches, records, records per batch
    (min/avg/max), batch size in bytes (avg/max), bytes on disk and uncompressed, and
    the compression ratio (uncompressed over on disk: 1.0 without a codec)."""
    batches = _batch_count()
    return summaries.groupBy(*REPLICA, "compression").agg(
        batches.alias("batches"),
        F.sum("records").alias("records"),
        F.min("min_records").alias("min_records_per_batch"),
        F.round(F.sum("records") / batches, 2).alias("avg_records_per_batch"),
        F.max("max_records").alias("max_records_per_batch"),
        F.round(F.sum("bytes") / batches, 1).alias("avg_batch_bytes"),
        F.max("max_bytes").alias("max_batch_bytes"),
        F.sum("bytes").alias("bytes"),
        F.sum("uncompressed_bytes").alias("uncompressed_bytes"),
        F.round(F.sum("uncompressed_bytes") / F.sum("bytes"), 3).alias("compression_ratio"),
    )


def leader_epochs(batches: DataFrame) -> DataFrame:
    """``leader_epochs_from_summaries`` of the batches themselves."""
    return leader_epochs_from_summaries(summarise_batches(batches))


def leader_epochs_from_summaries(summaries: DataFrame) -> DataFrame:
    """Per replica, each leader epoch seen with its start offset (first offset written
    in it, as in Kafka's leader-epoch-checkpoint), last offset, batch count, and the
    minutes of its first and last batch's max timestamp (when it led, as the data says)."""
    return summaries.groupBy(*REPLICA, "leader_epoch").agg(
        F.min("first_offset").alias("start_offset"),
        F.max("last_offset").alias("last_offset"),
        _batch_count().alias("batches"),
        F.min("minute").alias("first_minute"),
        F.max("minute").alias("last_minute"),
    )


def _batch_count() -> Column:
    """The summaries' batches added up, never null: as a count of batch rows would be
    (the reports' Parquet schemas keep that column required)."""
    return F.coalesce(F.sum("batches"), F.lit(0).cast("long"))


def corruption_report(corruption: DataFrame) -> DataFrame:
    """Every unreadable region: replica, segment file, byte position, length, reason,
    and the batch's base offset when its header was still readable."""
    return corruption.select(
        *REPLICA, "segment", "position", "length", "batch_base_offset", "reason"
    )


def divergence(records: DataFrame) -> DataFrame:
    """For each partition found in two or more log dirs: do the replicas agree?

    Compared range: from the largest first offset to the smallest end offset (last
    offset + 1) over the replicas, so a replica that is merely behind, or whose old
    segments were deleted, is not a divergence. An offset in that range diverges when
    some replica lacks it or the replicas' record checksums differ.

    Columns: topic, partition, replicas (log dirs, sorted), broker_ids, common_start,
    smallest_end, compared_offsets, diverging_offsets, first_diverging_offset, agree.
    """
    slim = records.select("topic", "partition", "log_dir", "broker_id", "offset", "checksum")
    extent = slim.groupBy("topic", "partition", "log_dir", "broker_id").agg(
        F.min("offset").alias("start"), (F.max("offset") + 1).alias("end")
    )
    replicated = (
        extent.groupBy("topic", "partition")
        .agg(
            F.count(F.lit(1)).alias("replica_count"),
            F.sort_array(F.collect_list("log_dir")).alias("replicas"),
            F.sort_array(F.collect_list("broker_id")).alias("broker_ids"),
            F.max("start").alias("common_start"),
            F.min("end").alias("smallest_end"),
        )
        .where(F.col("replica_count") >= 2)
    )
    bounds = replicated.select(
        "topic", "partition", "replica_count", "common_start", "smallest_end"
    )
    in_range = slim.join(F.broadcast(bounds), ["topic", "partition"]).where(
        (F.col("offset") >= F.col("common_start")) & (F.col("offset") < F.col("smallest_end"))
    )
    per_offset = in_range.groupBy("topic", "partition", "offset", "replica_count").agg(
        F.count(F.lit(1)).alias("present"), F.countDistinct("checksum").alias("variants")
    )
    diverging = (
        per_offset.where((F.col("present") < F.col("replica_count")) | (F.col("variants") > 1))
        .groupBy("topic", "partition")
        .agg(
            F.count(F.lit(1)).alias("diverging_offsets"),
            F.min("offset").alias("first_diverging_offset"),
        )
    )
    compared = F.greatest(F.col("smallest_end") - F.col("common_start"), F.lit(0))
    return (
        replicated.join(diverging, ["topic", "partition"], "left")
        .fillna(0, ["diverging_offsets"])
        .withColumn("compared_offsets", compared)
        .withColumn("agree", F.col("diverging_offsets") == 0)
        .select(
            "topic",
            "partition",
            "replicas",
            "broker_ids",
            "common_start",
            "smallest_end",
            "compared_offsets",
            "diverging_offsets",
            "first_diverging_offset",
            "agree",
        )
    )


def build_reports(scan: DataFrame, top_n: int = DEFAULT_TOP_KEYS) -> dict[str, DataFrame]:
    """Every report of the job, by output name, from the scan view."""
    records, batches, corruption = split_scan(scan)
    return _reports(
        group_records(records),
        summarise_batches(batches),
        summarise_producers(batches),
        records,
        corruption,
        top_n,
    )


def build_partial_reports(
    partials: DataFrame, top_n: int = DEFAULT_TOP_KEYS
) -> dict[str, DataFrame]:
    """Every report of the job, by output name, from the partials view: the same
    tables ``build_reports`` makes from the scan view of the same files."""
    records, _, corruption = split_scan(partials)
    groups = partials.where(F.col("kind") == KIND_GROUP).select(*REPLICA, "group.*")
    summaries = partials.where(F.col("kind") == KIND_BATCH_SUMMARY).select(
        *REPLICA, "leader_epoch", "batch_summary.*"
    )
    producers = partials.where(F.col("kind") == KIND_PRODUCER_SUMMARY).select(
        *REPLICA, "producer_summary.*"
    )
    return _reports(groups, summaries, producers, records, corruption, top_n)


def _reports(
    groups: DataFrame,
    summaries: DataFrame,
    producers: DataFrame,
    records: DataFrame,
    corruption: DataFrame,
    top_n: int,
) -> dict[str, DataFrame]:
    return {
        "partitions": partition_summary_from_groups(groups, summaries, corruption),
        "topics": topic_summary(groups),
        "records_per_minute": records_per_minute_from_groups(groups),
        "traffic": traffic(summaries),
        "top_keys": top_keys_from_groups(groups, top_n),
        "batches": batch_stats_from_summaries(summaries),
        "producers": producer_report(producers),
        "transactions": transaction_report(producers),
        "leader_epochs": leader_epochs_from_summaries(summaries),
        "corruption": corruption_report(corruption),
        "divergence": divergence(records),
    }

"""The traffic report: records and bytes over time, pure DataFrame -> DataFrame (STYLE
rule 11).

Input: batch summaries (``analytics.schema.BATCH_SUMMARY`` with the replica's columns),
which carry the minute of their batches' max timestamps. Output, ``traffic``: for the
``topics`` busiest topics (by records, one copy of each partition), their records and
bytes on disk per time bucket, and the same for each one's ``partitions`` busiest
partitions:

    topic, partition (null: the whole topic), bucket_start (ms), bucket_ms, records,
    bytes, topic_rank (1 = most records)

Buckets are whole minutes, as wide as it takes for the data's whole span to fit in
``max_buckets`` (rounded up to a width in ``BUCKET_MINUTES``), aligned to the epoch, so
the table stays chart-sized however long the log: at most topics x (1 + partitions) x
max_buckets rows. Batches without a timestamp (-1) have no place in time and are left
out.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from minibroker.analytics.copies import one_copy
from minibroker.analytics.schema import MINUTE_MS

MAX_BUCKETS = 240
"""Points per series: enough for a day in 6-minute steps, small enough for a page."""
TRAFFIC_TOPICS = 8
"""Topics drawn as their own series: more lines than this are hard to tell apart."""
TRAFFIC_PARTITIONS = 5
"""Busiest partitions of each of those topics, picked out as series of their own."""
BUCKET_MINUTES = (1, 2, 5, 10, 15, 30, 60, 120, 180, 360, 720, 1440)
"""Bucket widths a reader can count in; past a day, whole days."""


def _bucket_width(span_minutes: Column, max_buckets: int) -> Column:
    """The smallest width of ``BUCKET_MINUTES`` (or whole days) fitting the span into
    ``max_buckets`` buckets, in ms."""
    needed = F.ceil(span_minutes / F.lit(max_buckets))
    day = BUCKET_MINUTES[-1]
    width = F.ceil(needed / F.lit(day)) * F.lit(day)
    for minutes in reversed(BUCKET_MINUTES):
        width = F.when(needed <= minutes, F.lit(minutes)).otherwise(width)
    return (width * F.lit(MINUTE_MS)).cast("long")


def traffic(
    summaries: DataFrame,
    max_buckets: int = MAX_BUCKETS,
    topics: int = TRAFFIC_TOPICS,
    partitions: int = TRAFFIC_PARTITIONS,
) -> DataFrame:
    """Records and bytes per bucket of the busiest topics and partitions (see above)."""
    per_minute = (
        one_copy(summaries)
        .where(F.col("minute") >= 0)
        .groupBy("topic", "partition", "minute")
        .agg(F.sum("records").alias("records"), F.sum("bytes").alias("bytes"))
    )
    span_minutes = (F.max("minute") - F.min("minute")) / F.lit(MINUTE_MS) + F.lit(1)
    width = per_minute.agg(_bucket_width(span_minutes, max_buckets).alias("bucket_ms"))
    start = F.floor(F.col("minute") / F.col("bucket_ms")) * F.col("bucket_ms")
    per_bucket = (
        per_minute.crossJoin(F.broadcast(width))
        .withColumn("bucket_start", start.cast("long"))
        .groupBy("topic", "partition", "bucket_start", "bucket_ms")
        .agg(F.sum("records").alias("records"), F.sum("bytes").alias("bytes"))
    )
    totals = per_bucket.groupBy("topic", "partition").agg(F.sum("records").alias("total"))
    busiest = Window.partitionBy("topic").orderBy(F.col("total").desc(), F.col("partition"))
    picked = (
        totals.withColumn("rank", F.row_number().over(busiest))
        .where(F.col("rank") <= partitions)
        .select("topic", "partition")
    )
    topic_totals = totals.groupBy("topic").agg(F.sum("total").alias("total"))
    ranked = (
        topic_totals.withColumn(
            "topic_rank",
            F.row_number().over(Window.orderBy(F.col("total").desc(), F.col("topic"))),
        )
        .where(F.col("topic_rank") <= topics)
        .select("topic", "topic_rank")
    )
    whole_topics = per_bucket.groupBy("topic", "bucket_start", "bucket_ms").agg(
        F.lit(None).cast("int").alias("partition"),
        F.sum("records").alias("records"),
        F.sum("bytes").alias("bytes"),
    )
    busiest_partitions = per_bucket.join(F.broadcast(picked), ["topic", "partition"])
    columns = ["topic", "partition", "bucket_start", "bucket_ms", "records", "bytes"]
    return (
        whole_topics.select(*columns)
        .unionByName(busiest_partitions.select(*columns))
        .join(F.broadcast(ranked), "topic")
        .select(*columns, "topic_rank")
    )

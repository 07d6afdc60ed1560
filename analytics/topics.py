"""The topics report: per-topic sizes and key cardinality, pure DataFrame -> DataFrame
(STYLE rule 11).

Input: record groups (``analytics.schema.SCAN_GROUP`` with the replica's columns).
Output, ``topic_summary``: one row per topic over one copy of each partition:

    topic, partitions, records, value_bytes, approx_distinct_keys, null_keys

``approx_distinct_keys`` is one HyperLogLog sketch over the whole topic (the sum of the
partitions' counts would count a key twice when a producer chose its partition by
something other than the key).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from minibroker.analytics.copies import one_copy


def topic_summary(groups: DataFrame) -> DataFrame:
    """Per topic: partitions, records, value bytes, approximate distinct keys, null keys."""
    return (
        one_copy(groups)
        .groupBy("topic")
        .agg(
            F.countDistinct("partition").alias("partitions"),
            F.sum("records").alias("records"),
            F.sum("value_bytes").alias("value_bytes"),
            F.approx_count_distinct("key").alias("approx_distinct_keys"),
            F.coalesce(
                F.sum(F.when(F.col("key").isNull(), F.col("records"))), F.lit(0).cast("long")
            ).alias("null_keys"),
        )
    )

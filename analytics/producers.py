"""The producers report: pure DataFrame -> DataFrame functions (STYLE rule 11).

Input: producer summaries (``analytics.schema.PRODUCER_SUMMARY`` with the replica's
columns), one per producer epoch and slice from the partials view, or one per batch
(``summarise_producers``, from the scan view's batch rows). Output, ``producer_report``:
one row per producer id over one copy of every partition:

    producer_id, idempotent, first_epoch, last_epoch, epochs, topics, partitions,
    batches, records, bytes, uncompressed_bytes, compression_ratio, sequence_gaps,
    transactional_batches, committed, aborted, open_transactions

Non-idempotent producers all share producer id -1 (their batches carry no id), so they
are one row. ``sequence_gaps`` counts the idempotent data batches, within one partition
and producer epoch in offset order, that do not start at the sequence where the one
before ended: a lost or reordered batch, or a compacted-away one (the cleaner removes
batches, so a compacted topic shows gaps that are no fault). ``open_transactions``
counts the partitions whose last transactional batch of the producer comes after its
last marker (commit or abort).

``transaction_report``: one row per partition with transactions, over one copy of it:

    topic, partition, transactional_producers, committed, aborted, open_transactions

(``open_transactions``: producers whose last transactional batch there has no marker
after it: still open when the files were read, or hanging.)
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from minibroker.analytics.copies import REPLICA, one_copy
from minibroker.analytics.producer_summaries import SEQUENCE_MODULUS
from minibroker.analytics.scan import CONTROL_TYPE_NAMES
from minibroker.protocol.records import ControlRecordType

_COMMIT = CONTROL_TYPE_NAMES[ControlRecordType.COMMIT]
_ABORT = CONTROL_TYPE_NAMES[ControlRecordType.ABORT]


def summarise_producers(batches: DataFrame) -> DataFrame:
    """Each batch (the scan view's batch rows, flattened) as a producer summary of one."""
    control = F.col("is_control")
    sequenced = (F.col("producer_id") >= 0) & ~control
    transactional = F.col("is_transactional") & ~control

    def count_if(condition: Column) -> Column:
        return F.when(condition, 1).otherwise(0).cast("long")

    return batches.select(
        *REPLICA,
        "producer_id",
        F.col("producer_epoch").cast("int").alias("producer_epoch"),
        F.lit(1).cast("long").alias("batches"),
        F.col("record_count").cast("long").alias("records"),
        F.col("size").cast("long").alias("bytes"),
        F.col("uncompressed_size").cast("long").alias("uncompressed_bytes"),
        F.col("batch_base_offset").alias("first_offset"),
        "last_offset",
        F.when(sequenced, F.col("base_sequence")).alias("first_sequence"),
        F.when(
            sequenced,
            F.pmod(
                F.col("base_sequence").cast("long") + F.col("record_count"),
                F.lit(SEQUENCE_MODULUS),
            ),
        )
        .cast("int")
        .alias("next_sequence"),
        F.lit(0).cast("long").alias("sequence_gaps"),
        count_if(transactional).alias("transactional_batches"),
        count_if(F.col("control_type") == _COMMIT).alias("commits"),
        count_if(F.col("control_type") == _ABORT).alias("aborts"),
        F.when(transactional, F.col("last_offset")).alias("last_transactional_offset"),
        F.when(control, F.col("batch_base_offset")).alias("last_marker_offset"),
    )


def _per_partition(summaries: DataFrame) -> DataFrame:
    """Per (topic, partition, producer id): its epochs, sums, sequence gaps and whether
    its transaction there is open."""
    epoch_run = Window.partitionBy("topic", "partition", "producer_id", "producer_epoch")
    before = epoch_run.orderBy("first_offset").rowsBetween(Window.unboundedPreceding, -1)
    previous_end = F.last("next_sequence", ignorenulls=True).over(before)
    seam = (
        previous_end.isNotNull()
        & F.col("first_sequence").isNotNull()
        & (previous_end != F.col("first_sequence"))
    )
    gaps = F.col("sequence_gaps") + F.when(seam, 1).otherwise(0)
    per_partition = (
        one_copy(summaries)
        .withColumn("gaps", gaps)
        .groupBy("topic", "partition", "producer_id")
        .agg(
            F.min("producer_epoch").alias("first_epoch"),
            F.max("producer_epoch").alias("last_epoch"),
            F.collect_set("producer_epoch").alias("epoch_set"),
            *(
                F.sum(name).alias(name)
                for name in (
                    "batches",
                    "records",
                    "bytes",
                    "uncompressed_bytes",
                    "gaps",
                    "transactional_batches",
                    "commits",
                    "aborts",
                )
            ),
            F.max("last_transactional_offset").alias("last_transactional"),
            F.max("last_marker_offset").alias("last_marker"),
        )
        .withColumn(
            "open",
            F.coalesce(F.col("last_transactional"), F.lit(-1))
            > F.coalesce(F.col("last_marker"), F.lit(-1)),
        )
    )
    return per_partition


def transaction_report(summaries: DataFrame) -> DataFrame:
    """Per partition with transactions, over one copy (columns: module docstring)."""
    transactional = F.col("transactional_batches") + F.col("commits") + F.col("aborts") > 0
    return (
        _per_partition(summaries)
        .where(transactional)
        .groupBy("topic", "partition")
        .agg(
            F.count(F.when(F.col("transactional_batches") > 0, 1)).alias("transactional_producers"),
            F.sum("commits").alias("committed"),
            F.sum("aborts").alias("aborted"),
            F.count(F.when(F.col("open"), 1)).alias("open_transactions"),
        )
    )


def producer_report(summaries: DataFrame) -> DataFrame:
    """Per producer id, over one copy of each partition (columns: module docstring)."""
    per_partition = _per_partition(summaries)
    bytes_total = F.sum("bytes")
    return per_partition.groupBy("producer_id").agg(
        (F.col("producer_id") >= 0).alias("idempotent"),
        F.min("first_epoch").alias("first_epoch"),
        F.max("last_epoch").alias("last_epoch"),
        F.size(F.array_distinct(F.flatten(F.collect_list("epoch_set")))).alias("epochs"),
        F.sort_array(F.collect_set("topic")).alias("topics"),
        F.count(F.lit(1)).alias("partitions"),
        F.sum("batches").alias("batches"),
        F.sum("records").alias("records"),
        bytes_total.alias("bytes"),
        F.sum("uncompressed_bytes").alias("uncompressed_bytes"),
        F.round(F.sum("uncompressed_bytes") / bytes_total, 3).alias("compression_ratio"),
        F.sum("gaps").alias("sequence_gaps"),
        F.sum("transactional_batches").alias("transactional_batches"),
        F.sum("commits").alias("committed"),
        F.sum("aborts").alias("aborted"),
        F.count(F.when(F.col("open"), 1)).alias("open_transactions"),
    )

"""Which copy of a partition a report reads: pure DataFrame -> DataFrame (STYLE rule 11).

Per-partition figures are per replica (keyed by ``REPLICA``: log dir and broker as well
as topic and partition), so replicas read from several brokers' log dirs stay apart and
can be compared. Topic-wide figures (traffic, top keys, producers) read one replica per
partition (``one_copy``) so that replicas are not counted two or three times.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

REPLICA = ["topic", "partition", "log_dir", "broker_id"]
"""One partition replica: the key of every per-partition figure."""


def one_copy(rows: DataFrame) -> DataFrame:
    """The rows (record groups, batch or producer summaries: anything with topic,
    partition, log_dir and a ``records`` count) of one replica per partition: the one
    holding the most records (ties: the first log dir by name). Choosing replicas, not
    deduplicating offsets, keeps this a join with a tiny broadcast table instead of a
    shuffle of every row."""
    held = rows.groupBy("topic", "partition", "log_dir").agg(F.sum("records").alias("n"))
    best = Window.partitionBy("topic", "partition").orderBy(F.col("n").desc(), F.col("log_dir"))
    chosen = (
        held.withColumn("choice", F.row_number().over(best))
        .where(F.col("choice") == 1)
        .select("topic", "partition", "log_dir")
    )
    return rows.join(F.broadcast(chosen), ["topic", "partition", "log_dir"])

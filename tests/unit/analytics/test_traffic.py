"""The traffic report (analytics.traffic) and the topics report (analytics.topics) on
hand-made batches and records."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from minibroker.analytics import report
from minibroker.analytics.schema import MINUTE_MS
from minibroker.analytics.topics import topic_summary
from minibroker.analytics.traffic import traffic
from tests.unit.analytics import frames

pytestmark = pytest.mark.timeout(120)

T0 = 1_700_000_100_000  # a whole quarter of an hour
B = "/logs/b"


def _batch(topic: str, partition: int, minute: int, records: int, **more: object) -> dict:
    return {"topic": topic, "partition": partition, "record_count": records,
            "size": 100 * records, "max_timestamp": T0 + minute * MINUTE_MS, **more}  # fmt: skip


def test_traffic_buckets_are_as_wide_as_the_span_needs_and_round_to_a_nice_width(
    spark: SparkSession,
) -> None:
    rows = [_batch("a", 0, minute, 1) for minute in (0, 7, 300, 600)]
    summaries = report.summarise_batches(frames.batches(spark, rows))

    got = traffic(summaries, max_buckets=60).where("partition IS NULL").collect()

    width = 15 * MINUTE_MS  # 601 minutes in 60 buckets: 11 minutes each, rounded up to 15
    assert {r.bucket_ms for r in got} == {width}
    assert all(r.bucket_start % width == 0 for r in got)
    assert sorted((r.bucket_start, r.records) for r in got) == [
        (T0 // width * width, 2),  # minutes 0 and 7 share the first bucket
        ((T0 + 300 * MINUTE_MS) // width * width, 1),
        ((T0 + 600 * MINUTE_MS) // width * width, 1),
    ]


def test_traffic_keeps_the_busiest_topics_and_their_busiest_partitions_counting_one_copy(
    spark: SparkSession,
) -> None:
    rows = [
        _batch("a", 0, 0, 10),
        _batch("a", 1, 0, 30),
        _batch("a", 1, 0, 30, log_dir=B),  # a second replica: not counted again
        _batch("a", 2, 1, 20),
        _batch("b", 0, 0, 5),
        _batch("c", 0, 0, 50, max_timestamp=-1),  # no timestamp: no place in time
    ]
    summaries = report.summarise_batches(frames.batches(spark, rows))

    got = traffic(summaries, topics=1, partitions=2).collect()

    assert {r.topic for r in got} == {"a"} and {r.topic_rank for r in got} == {1}
    by_series = {}
    for r in got:
        by_series[r.partition] = by_series.get(r.partition, 0) + r.records
    assert by_series == {None: 60, 1: 30, 2: 20}
    assert {r.bytes for r in got if r.partition == 1} == {3000}


def test_traffic_of_no_batches_is_empty(spark: SparkSession) -> None:
    summaries = report.summarise_batches(frames.batches(spark, []))

    assert traffic(summaries).count() == 0


def test_topic_summary_counts_keys_over_one_copy_of_each_partition(spark: SparkSession) -> None:
    keys = [b"k1", b"k2", None, b"k1"]
    rows = [{"offset": i, "key": key, "partition": i % 2} for i, key in enumerate(keys)]
    rows += [{"offset": 0, "key": b"k9", "log_dir": B}]  # a smaller second copy of partition 0
    records = frames.records(spark, [*rows, {"offset": 0, "topic": "other", "key": b"x"}])

    got = {r.topic: r for r in topic_summary(report.group_records(records)).collect()}

    orders = got["orders"]
    assert (orders.partitions, orders.records, orders.null_keys) == (2, 4, 1)
    assert orders.approx_distinct_keys == 2  # k1 and k2; k9 is only on the other copy
    assert got["other"].records == 1

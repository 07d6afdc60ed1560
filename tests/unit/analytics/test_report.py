"""The report's pure DataFrame functions, on small hand-made frames."""

from __future__ import annotations

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from minibroker.analytics import report
from minibroker.analytics.schema import PARTIALS, SCAN
from tests.unit.analytics import frames

pytestmark = pytest.mark.timeout(120)  # the first test also pays the JVM start

T0 = 1_700_000_000_000
B = "/logs/b"


def test_partition_summary_counts_records_bytes_offsets_timestamps_and_rate(
    spark: SparkSession,
) -> None:
    recs = frames.records(
        spark,
        [
            {"offset": 5, "timestamp": T0, "key": b"a", "value_size": 10},
            {"offset": 6, "timestamp": T0 + 60_000, "key": b"b", "value_size": -1},
            {"offset": 7, "timestamp": T0 + 120_000, "key": None, "value_size": 30},
            {"offset": 8, "timestamp": T0 + 240_000, "key": b"a", "value_size": 40},
        ],
    )
    bats = frames.batches(
        spark,
        [
            {"batch_base_offset": 5, "record_count": 2, "size": 200},
            {"batch_base_offset": 7, "record_count": 2, "size": 300},
        ],
    )
    bad = frames.corruption(spark, [{"position": 500, "length": 77}])

    (row,) = report.partition_summary(recs, bats, bad).collect()

    assert (row.records, row.batches, row.bytes, row.value_bytes) == (4, 2, 500, 80)
    assert (row.first_offset, row.last_offset) == (5, 8)
    assert (row.first_timestamp, row.last_timestamp) == (T0, T0 + 240_000)
    assert row.records_per_minute == 1.0  # 4 records over 4 minutes
    assert (row.approx_distinct_keys, row.null_keys) == (2, 1)
    assert (row.corrupt_regions, row.corrupt_bytes) == (1, 77)


def test_partition_summary_lists_a_replica_that_has_only_corruption(spark: SparkSession) -> None:
    recs = frames.records(spark, [{"offset": 0}])
    bats = frames.batches(spark, [{"batch_base_offset": 0}])
    bad = frames.corruption(spark, [{"log_dir": B, "length": 9}])

    rows = {r.log_dir: r for r in report.partition_summary(recs, bats, bad).collect()}

    assert rows[B].records == 0 and rows[B].corrupt_regions == 1 and rows[B].corrupt_bytes == 9
    assert rows["/logs/a"].records == 1 and rows["/logs/a"].corrupt_regions == 0


def test_partition_summary_gives_a_log_dir_without_broker_id_one_row(spark: SparkSession) -> None:
    recs = frames.records(spark, [{"offset": 0, "broker_id": None}])
    bats = frames.batches(spark, [{"broker_id": None}])
    bad = frames.corruption(spark, [{"broker_id": None}])

    rows = report.partition_summary(recs, bats, bad).collect()

    assert [(r.broker_id, r.records, r.batches, r.corrupt_regions) for r in rows] == [
        (None, 1, 1, 1)
    ]


def test_records_per_minute_buckets_by_minute_and_counts_replicas_once(
    spark: SparkSession,
) -> None:
    rows = [
        {"offset": 0, "timestamp": T0 + 1_000},
        {"offset": 1, "timestamp": T0 + 2_000},
        {"offset": 2, "timestamp": T0 + 61_000},
    ]
    recs = frames.records(spark, rows + [{**r, "log_dir": B} for r in rows])

    got = sorted((r.minute, r.records) for r in report.records_per_minute(recs).collect())

    minute0 = T0 - T0 % 60_000
    assert got == [(minute0, 2), (minute0 + 60_000, 1)]


def test_top_keys_ranks_most_frequent_keys_per_topic_and_ignores_null_keys(
    spark: SparkSession,
) -> None:
    keys = [b"hot"] * 3 + [b"warm"] * 2 + [b"cold"] + [None] * 5
    recs = frames.records(spark, [{"offset": i, "key": k} for i, k in enumerate(keys)])

    got = [(r.rank, r.key, r.records) for r in report.top_keys(recs, 2).orderBy("rank").collect()]

    assert got == [(1, b"hot", 3), (2, b"warm", 2)]


def test_batch_stats_are_per_compression_codec(spark: SparkSession) -> None:
    bats = frames.batches(
        spark,
        [
            {"batch_base_offset": 0, "record_count": 1, "size": 100, "compression": "none"},
            {"batch_base_offset": 1, "record_count": 3, "size": 300, "compression": "none"},
            {"batch_base_offset": 4, "record_count": 10, "size": 250, "compression": "gzip"},
        ],
    )

    rows = {r.compression: r for r in report.batch_stats(bats).collect()}

    none = rows["none"]
    assert (none.batches, none.records, none.bytes) == (2, 4, 400)
    assert (none.min_records_per_batch, none.avg_records_per_batch) == (1, 2.0)
    assert (none.max_records_per_batch, none.max_batch_bytes) == (3, 300)
    assert (rows["gzip"].records, rows["gzip"].avg_batch_bytes) == (10, 250.0)


def test_leader_epochs_give_each_epoch_its_start_offset(spark: SparkSession) -> None:
    bats = frames.batches(
        spark,
        [
            {"batch_base_offset": 0, "record_count": 5, "leader_epoch": 0},
            {"batch_base_offset": 5, "record_count": 5, "leader_epoch": 0},
            {"batch_base_offset": 10, "record_count": 2, "leader_epoch": 3},
        ],
    )

    got = sorted(
        (r.leader_epoch, r.start_offset, r.last_offset, r.batches)
        for r in report.leader_epochs(bats).collect()
    )

    assert got == [(0, 0, 9, 2), (3, 10, 11, 1)]


def test_batch_figures_from_summaries_of_many_batches_equal_those_from_the_batches(
    spark: SparkSession,
) -> None:
    rows = [
        {"batch_base_offset": 0, "record_count": 3, "size": 310, "compression": "none"},
        {"batch_base_offset": 3, "record_count": 1, "size": 95, "compression": "none"},
        {"batch_base_offset": 4, "record_count": 7, "size": 777, "compression": "none"},
        {"batch_base_offset": 11, "record_count": 2, "size": 120, "compression": "gzip"},
        {"batch_base_offset": 13, "record_count": 4, "size": 400, "leader_epoch": 2},
        {"batch_base_offset": 0, "record_count": 5, "size": 500, "log_dir": B},
    ]
    bats = frames.batches(spark, rows)
    # what a task sends for these batches: one summary per replica, codec and epoch
    summaries = (
        report.summarise_batches(bats)
        .groupBy(*report.REPLICA, "leader_epoch", "compression", "minute")
        .agg(
            F.sum("batches").alias("batches"),
            F.sum("records").alias("records"),
            F.min("min_records").alias("min_records"),
            F.max("max_records").alias("max_records"),
            F.sum("bytes").alias("bytes"),
            F.max("max_bytes").alias("max_bytes"),
            F.min("first_offset").alias("first_offset"),
            F.max("last_offset").alias("last_offset"),
            F.sum("uncompressed_bytes").alias("uncompressed_bytes"),
        )
    )
    no_groups = report.group_records(frames.records(spark, [])).limit(0)
    no_damage = frames.corruption(spark, []).limit(0)

    def same(expected: DataFrame, got: DataFrame) -> None:
        assert got.schema == expected.schema
        assert sorted(map(tuple, got.collect())) == sorted(map(tuple, expected.collect()))

    assert summaries.count() == 4
    same(report.batch_stats(bats), report.batch_stats_from_summaries(summaries))
    same(report.leader_epochs(bats), report.leader_epochs_from_summaries(summaries))
    same(
        report.partition_summary_from_groups(no_groups, report.summarise_batches(bats), no_damage),
        report.partition_summary_from_groups(no_groups, summaries, no_damage),
    )
    stats = {
        (r.log_dir, r.compression): r
        for r in report.batch_stats_from_summaries(summaries).collect()
    }
    plain = stats[("/logs/a", "none")]  # epochs 0 and 2: 15 records and 1582 bytes in 4
    assert (plain.avg_records_per_batch, plain.avg_batch_bytes) == (3.75, 395.5)


def _replica(log_dir: str, checksums: list[int], start: int = 0) -> list[dict[str, object]]:
    return [
        {"log_dir": log_dir, "offset": start + i, "checksum": c} for i, c in enumerate(checksums)
    ]


def test_divergence_passes_replicas_that_agree_up_to_the_smallest_end_offset(
    spark: SparkSession,
) -> None:
    # b is behind (ends at 3) and its log starts later (retention): neither is divergence.
    recs = frames.records(spark, _replica("/logs/a", [1, 2, 3, 4, 5]) + _replica(B, [2, 3], 1))

    (row,) = report.divergence(recs).collect()

    assert row.agree is True
    assert (row.common_start, row.smallest_end, row.compared_offsets) == (1, 3, 2)
    assert row.diverging_offsets == 0 and row.first_diverging_offset is None
    assert row.replicas == ["/logs/a", B]


def test_divergence_reports_the_first_offset_whose_checksums_differ(spark: SparkSession) -> None:
    recs = frames.records(spark, _replica("/logs/a", [1, 2, 3, 4, 5]) + _replica(B, [1, 2, 9, 8]))

    (row,) = report.divergence(recs).collect()

    assert row.agree is False
    assert (row.first_diverging_offset, row.diverging_offsets, row.smallest_end) == (2, 2, 4)


def test_divergence_flags_an_offset_missing_on_one_replica(spark: SparkSession) -> None:
    b = [r for r in _replica(B, [1, 2, 3, 4]) if r["offset"] != 1]
    recs = frames.records(spark, _replica("/logs/a", [1, 2, 3, 4]) + b)

    (row,) = report.divergence(recs).collect()

    assert (row.agree, row.first_diverging_offset, row.diverging_offsets) == (False, 1, 1)


def test_divergence_ignores_partitions_found_in_one_log_dir_only(spark: SparkSession) -> None:
    recs = frames.records(
        spark, [*_replica("/logs/a", [1, 2]), {"log_dir": B, "partition": 1, "offset": 0}]
    )

    assert report.divergence(recs).count() == 0


def test_build_reports_splits_the_scan_view_into_every_named_report(spark: SparkSession) -> None:
    scan = spark.createDataFrame([], SCAN)

    reports = report.build_reports(scan)

    assert set(reports) == {
        "partitions",
        "topics",
        "records_per_minute",
        "traffic",
        "top_keys",
        "batches",
        "producers",
        "transactions",
        "leader_epochs",
        "corruption",
        "divergence",
    }
    assert all(df.count() == 0 for df in reports.values())


_REPLICA_COLUMNS = "topic string!, partition int!, log_dir string!, broker_id int"
REPORT_COLUMNS = {
    "partitions": f"{_REPLICA_COLUMNS}, records bigint!, batches bigint!, bytes bigint!, "
    "value_bytes bigint!, first_offset bigint, last_offset bigint, first_timestamp bigint, "
    "last_timestamp bigint, records_per_minute double, approx_distinct_keys bigint!, "
    "null_keys bigint!, corrupt_regions bigint!, corrupt_bytes bigint!",
    "records_per_minute": "topic string!, partition int!, minute bigint, records bigint, "
    "value_bytes bigint",
    "top_keys": "topic string!, rank int!, key binary, records bigint",
    "batches": f"{_REPLICA_COLUMNS}, compression string, batches bigint!, records bigint, "
    "min_records_per_batch int, avg_records_per_batch double, max_records_per_batch int, "
    "avg_batch_bytes double, max_batch_bytes int, bytes bigint, uncompressed_bytes bigint, "
    "compression_ratio double",
    "leader_epochs": f"{_REPLICA_COLUMNS}, leader_epoch int, start_offset bigint, "
    "last_offset bigint, batches bigint!, first_minute bigint, last_minute bigint",
    "topics": "topic string!, partitions bigint!, records bigint, value_bytes bigint, "
    "approx_distinct_keys bigint!, null_keys bigint!",
    "traffic": "topic string!, partition int, bucket_start bigint, bucket_ms bigint, "
    "records bigint, bytes bigint, topic_rank int!",
    "producers": "producer_id bigint, idempotent boolean, first_epoch int, last_epoch int, "
    "epochs int!, topics array<string>!, partitions bigint!, batches bigint, records bigint, "
    "bytes bigint, uncompressed_bytes bigint, compression_ratio double, sequence_gaps bigint, "
    "transactional_batches bigint, committed bigint, aborted bigint, open_transactions bigint!",
    "transactions": "topic string!, partition int!, transactional_producers bigint!, "
    "committed bigint, aborted bigint, open_transactions bigint!",
    "corruption": f"{_REPLICA_COLUMNS}, segment string!, position bigint!, length bigint, "
    "batch_base_offset bigint, reason string",
    "divergence": "topic string!, partition int!, replicas array<string>!, "
    "broker_ids array<int>!, common_start bigint, smallest_end bigint, "
    "compared_offsets bigint!, diverging_offsets bigint, first_diverging_offset bigint, "
    "agree boolean",
}
"""Each report's columns as the job writes them to Parquet (``!``: required): a contract."""


def test_reports_from_the_partials_view_keep_their_parquet_columns(spark: SparkSession) -> None:
    reports = report.build_partial_reports(spark.createDataFrame([], PARTIALS))

    got = {
        name: ", ".join(
            f"{f.name} {f.dataType.simpleString()}{'' if f.nullable else '!'}"
            for f in frame.schema.fields
        )
        for name, frame in reports.items()
    }

    assert got == REPORT_COLUMNS

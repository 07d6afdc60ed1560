"""The minibroker data source and the segment report job on segment files written
directly (edge cases a broker rarely produces on demand), and spark-submit itself.

Data set (two brokers' log dirs, built once per module):
- orders-0 on both brokers, identical: a plain batch, a gzip batch with null keys and
  headers, a roll to a second segment, a batch in a later leader epoch;
- events-0 on both brokers, diverging at offset 4 (as after an unclean election);
- orders-1 on broker 1 only: a corrupt CRC in the middle, a torn last batch;
- broker 2 also holds a ``-future`` copy and index files that must be ignored.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from minibroker.analytics import cli, report
from minibroker.analytics.copies import REPLICA
from minibroker.analytics.jobargs import JOB_CONF, OneLineParser, add_job_arguments
from minibroker.analytics.producers import transaction_report
from minibroker.protocol.records import Compression, ControlRecordType, Record
from minibroker.protocol.records.layout import TRANSACTIONAL_BIT
from tests.support.spark import SHORT_JVM_OPTIONS, PartitionLog, Producer, make_records, spark

__all__ = ["spark"]

T0 = 1_700_000_000_000
SPARK_SUBMIT_TIMEOUT = 360  # JVM start + ~15 small Spark jobs; generous: a busy 2-core box is slow


@dataclass
class DataSet:
    dirs: list[Path]
    logs: list[PartitionLog]
    corrupt_position: int
    torn_position: int

    @property
    def load_path(self) -> str:
        return ",".join(str(d) for d in self.dirs)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> DataSet:
    root = tmp_path_factory.mktemp("logs")
    dirs = [root / "broker-1", root / "broker-2"]
    logs: list[PartitionLog] = []
    for broker_id, log_dir in enumerate(dirs, start=1):
        log_dir.mkdir()
        (log_dir / "meta.properties").write_text(f"version=0\nbroker.id={broker_id}\n")
        orders = PartitionLog(log_dir, "orders", 0)
        orders.append(make_records(5))
        orders.append(make_records(4, key_every=2), compression=Compression.GZIP, leader_epoch=1)
        orders.roll()
        orders.append(make_records(3, start_ts=T0 + 600_000), leader_epoch=2)
        events = PartitionLog(log_dir, "events", 0)
        events.append(make_records(4))
        if broker_id == 1:
            events.append(make_records(2, start_ts=T0 + 10_000))
        else:
            events.append([Record(b"other", b"k", (), T0 + 20_000)] * 3, leader_epoch=1)
        logs += [orders, events]
    damaged = PartitionLog(dirs[0], "orders", 1)
    damaged.append(make_records(3))
    corrupt = damaged.append(make_records(3))
    damaged.append(make_records(3))
    damaged.corrupt_batch(damaged.segments[0], corrupt)
    torn = damaged.tear_tail(make_records(2))
    logs.append(damaged)
    ghost = PartitionLog(dirs[1], "orders", 2)
    ghost.append(make_records(2))
    ghost.dir.rename(dirs[1] / "orders-2.5f1d2c3b4a594e6f8a7b6c5d4e3f2a1b-future")
    (logs[2].dir / "00000000000000000000.index").write_bytes(bytes(16))
    return DataSet(dirs, logs, corrupt, torn)


def _expected_rows(data: DataSet) -> set[tuple[Any, ...]]:
    rows = set()
    for log in data.logs:
        log_dir = str(log.dir.parent.resolve())
        for w in log.written:
            r = w.record
            rows.add(
                (log_dir, log.topic, log.partition, w.offset, r.timestamp, r.key, r.value,
                 r.headers, w.leader_epoch, str(w.segment.resolve()))
            )  # fmt: skip
    return rows


def _row_key(row: Any) -> tuple[Any, ...]:
    def b(v: Any) -> bytes | None:
        return None if v is None else bytes(v)

    headers = tuple((h.key, b(h.value)) for h in row.headers)
    return (row.log_dir, row.topic, row.partition, row.offset, row.timestamp, b(row.key),
            b(row.value), headers, row.leader_epoch, row.segment)  # fmt: skip


@pytest.mark.timeout(180)
def test_data_source_returns_exactly_the_readable_records_written(
    spark: SparkSession, data: DataSet
) -> None:
    df = spark.read.format("minibroker").load(data.load_path)

    got = [_row_key(r) for r in df.collect()]

    assert len(got) == len(set(got))
    assert set(got) == _expected_rows(data)
    brokers = {(r.log_dir, r.broker_id) for r in df.select("log_dir", "broker_id").collect()}
    assert {b for _, b in brokers} == {1, 2}
    gzip = df.where("topic = 'orders' AND partition = 0 AND batch_base_offset = 5")
    assert gzip.where("key IS NULL").count() == 4  # key_every=2: offsets 6 and 8, twice


@pytest.mark.timeout(120)
def test_data_source_gives_the_same_rows_when_segments_are_split_into_ranges(
    spark: SparkSession, data: DataSet
) -> None:
    whole = spark.read.format("minibroker").load(data.load_path)
    split = spark.read.format("minibroker").option("split_bytes", "200").load(data.load_path)

    assert split.rdd.getNumPartitions() > whole.rdd.getNumPartitions()
    assert whole.exceptAll(split).count() == 0 and split.exceptAll(whole).count() == 0


@pytest.mark.timeout(120)
def test_data_source_reads_in_exactly_the_tasks_asked_with_the_same_rows(
    spark: SparkSession, data: DataSet
) -> None:
    whole = spark.read.format("minibroker").load(data.load_path)
    grouped = spark.read.format("minibroker").option("tasks", "2").load(data.load_path)

    assert grouped.rdd.getNumPartitions() == 2
    assert sorted(map(_row_key, grouped.collect())) == sorted(map(_row_key, whole.collect()))


@pytest.mark.timeout(120)
def test_data_source_filters_topics_and_a_time_range(spark: SparkSession, data: DataSet) -> None:
    df = (
        spark.read.format("minibroker")
        .option("topics", "orders")
        .option("from_timestamp", str(T0 + 1_000))
        .option("to_timestamp", str(T0 + 3_000))
        .load(data.load_path)
    )

    got = sorted((r.log_dir[-8:], r.partition, r.offset) for r in df.collect())

    # orders-0 batches 1 and 2 both start at T0: offsets 1, 2 and 6, 7 in each replica;
    # orders-1's first batch (offsets 1, 2); its second batch is the corrupt one.
    assert got == sorted(
        [(d, 0, o) for d in ("broker-1", "broker-2") for o in (1, 2, 6, 7)]
        + [("broker-1", 1, 1), ("broker-1", 1, 2), ("broker-1", 1, 7), ("broker-1", 1, 8)]
    )


@pytest.mark.timeout(120)
def test_data_source_reads_nothing_from_a_log_dir_without_partitions(
    spark: SparkSession, tmp_path: Path
) -> None:
    (tmp_path / "recovery-point-offset-checkpoint").write_text("0\n0\n")

    for kind in ("records", "scan"):
        df = spark.read.format("minibroker").option("kind", kind).load(str(tmp_path))
        assert df.count() == 0


@pytest.mark.extended
@pytest.mark.timeout(240)
def test_reports_from_the_partials_view_equal_those_from_the_scan_view(
    spark: SparkSession, data: DataSet
) -> None:
    def view(kind: str) -> Any:
        return spark.read.format("minibroker").option("kind", kind).load(data.load_path)

    from_records = report.build_reports(view("scan"), 3)
    from_partials = report.build_partial_reports(view("partials"), 3)

    assert from_partials.keys() == from_records.keys()
    for name, frame in from_records.items():
        expected = sorted(map(tuple, frame.collect()), key=repr)
        assert sorted(map(tuple, from_partials[name].collect()), key=repr) == expected, name
    groups = view("partials").where("kind = 'group'").count()
    assert 0 < groups < view("scan").where("kind = 'record'").count()


@pytest.mark.timeout(180)
def test_read_committed_leaves_out_aborted_transactions_and_the_reports_still_count_them(
    spark: SparkSession, tmp_path: Path
) -> None:
    log = PartitionLog(tmp_path / "broker-1", "payments", 0)
    committed, aborted, spanning, still_open = (
        Producer(11),
        Producer(12),
        Producer(13),
        Producer(14),
    )
    log.append(make_records(2), producer=committed, attributes=TRANSACTIONAL_BIT)
    log.append(make_records(3), producer=aborted, attributes=TRANSACTIONAL_BIT)
    log.append(make_records(1))  # no transaction
    log.append_marker(ControlRecordType.COMMIT, committed)
    log.append_marker(ControlRecordType.ABORT, aborted)
    log.append(make_records(2), producer=spanning, attributes=TRANSACTIONAL_BIT)
    log.roll()  # spanning's abort is listed by the second segment's .txnindex only
    log.append(make_records(1), producer=spanning, attributes=TRANSACTIONAL_BIT)
    log.append_marker(ControlRecordType.ABORT, spanning)
    log.append(make_records(2), producer=still_open, attributes=TRANSACTIONAL_BIT)

    def reader(kind: str, isolation: str) -> Any:
        return (
            spark.read.format("minibroker")
            .option("kind", kind)
            .option("isolation_level", isolation)
            .load(str(tmp_path / "broker-1"))
        )

    committed_offsets = {r.offset for r in reader("records", "read_committed").collect()}
    # 0-13, the markers (6, 7, 11) are records of the view too; aborted's 2-4 and
    # spanning's 8-10 are not read committed
    assert committed_offsets == {0, 1, 5, 6, 7, 11, 12, 13}
    # the report job's view: its record groups count the same records, and its producer
    # summaries still see every transaction end
    partials = reader("partials", "read_committed")
    kinds = {r.kind: r for r in partials.groupBy("kind").agg(F.sum("group.records").alias("n"))
             .collect()}  # fmt: skip
    assert kinds["group"].n == len(committed_offsets)
    producers = partials.where("kind = 'producer_summary'").select(*REPLICA, "producer_summary.*")
    [transactions] = transaction_report(producers).collect()
    assert (transactions.committed, transactions.aborted, transactions.open_transactions) == (
        1,
        2,
        1,
    )


def _run_spark_submit(data: DataSet, out: Path) -> subprocess.CompletedProcess[str]:
    parser = OneLineParser(prog="t")
    add_job_arguments(parser)
    args = parser.parse_args(["--log-dirs", data.load_path, "--out", str(out), "--master",
                              "local[2]"])  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # nothing installed
    env.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               SPARK_LOCAL_IP="127.0.0.1")  # fmt: skip
    sockets = "spark.python.unix.domain.socket.enabled"  # as `minibroker analyze` runs the job
    spark_submit, *rest = cli.submit_command(args, (f"{sockets}={JOB_CONF[sockets]}",))
    return subprocess.run(
        [spark_submit, "--driver-java-options", SHORT_JVM_OPTIONS, *rest, "--top-keys", "3"],
        env=env,
        cwd=out.parent,  # not the repo: the job must find its packages itself
        capture_output=True,
        text=True,
        timeout=SPARK_SUBMIT_TIMEOUT,
        check=False,
    )


@pytest.mark.extended
@pytest.mark.timeout(SPARK_SUBMIT_TIMEOUT + 60)
def test_spark_submit_job_writes_reports_that_agree_with_the_data_source(
    spark: SparkSession, data: DataSet, tmp_path: Path
) -> None:
    out = tmp_path / "report"

    done = _run_spark_submit(data, out)

    assert done.returncode == 0, done.stderr[-3000:]
    assert "[segment_report] planned 7 segment file(s)" in done.stdout
    # the data source's counts and offsets, per replica ...
    records = spark.read.format("minibroker").load(data.load_path)
    truth = {
        (r.log_dir, r.topic, r.partition): (r.n, r.lo, r.hi)
        for r in records.groupBy("log_dir", "topic", "partition")
        .agg(F.count("*").alias("n"), F.min("offset").alias("lo"), F.max("offset").alias("hi"))
        .collect()
    }
    # ... equal the job's Parquet output
    parts = spark.read.parquet(str(out / "partitions")).collect()
    assert {
        (r.log_dir, r.topic, r.partition): (r.records, r.first_offset, r.last_offset) for r in parts
    } == truth
    broker1 = str(data.dirs[0].resolve())
    damage = {
        (r.position, r.reason.split(" ")[0])
        for r in spark.read.parquet(str(out / "corruption")).collect()
    }
    assert damage == {(data.corrupt_position, "batch"), (data.torn_position, "torn")}
    epochs = spark.read.parquet(str(out / "leader_epochs")).where(
        f"topic = 'orders' AND partition = 0 AND log_dir = '{broker1}'"
    )
    assert sorted((r.leader_epoch, r.start_offset) for r in epochs.collect()) == [
        (0, 0), (1, 5), (2, 9)
    ]  # fmt: skip
    verdicts = {
        r.topic: (r.agree, r.first_diverging_offset)
        for r in spark.read.parquet(str(out / "divergence")).collect()
    }
    assert verdicts == {"orders": (True, None), "events": (False, 4)}
    # and the summary says so in words, naming the HTML report it wrote last
    summary = (out / "summary.txt").read_text()
    assert summary in done.stdout
    assert summary.splitlines()[-1] == f"HTML report: {out / 'report.html'}"
    assert (out / "report.html").read_text().startswith("<!DOCTYPE html>")
    producers = spark.read.parquet(str(out / "producers")).collect()
    # no producer ids: one row, over one copy of each partition (events-0: broker 2's 7)
    assert [(p.producer_id, p.records) for p in producers] == [(-1, 12 + 7 + 6)]
    assert "events-0: replicas DIVERGE from offset 4" in summary
    assert "orders-0: replicas agree on 12 offsets [0, 12)" in summary
    assert f"@ byte {data.corrupt_position}" in summary and "torn batch" in summary

"""Records/s of the Spark scan (local[2]) vs a single-process scan, and of the report job.

    python3 bench/analytics_bench.py [--size-mb 1024] [--master local[2]] [--runs 3]

Writes ``--size-mb`` of 1 KiB records (16 per batch, like a producer's default 16 KiB
batch.size; no compression) as segment files of ``--segment-mb`` in two partitions,
then measures, on the same files:

- plain_records_per_s: one Python process turning every slice into the partials view
  the report job reads (``analytics.partials``: CRC check, column decode, per-record
  checksum, Arrow batches, records folded into key-and-minute groups with
  pyarrow.compute) and adding up the records of the groups - exactly what a Spark task
  does, minus Spark (one slice per segment file: nothing to cut for one process);
- scan_records_per_s: the same through Spark, as the report job reads it: the data
  source's partials view read (planning, one task per core on the executors, each
  scanning its share of the slices, a few group, batch summary and corruption rows per
  slice into the JVM) and the groups' records summed by Spark, all timed from the query's
  start to its answer back in Python (the SparkSession is up and warm before);
- scan_ratio: the median scan over the median plain figure;
- two_process_records_per_s / two_process_ratio: the plain scan's work dealt to two
  worker processes (no Spark): the ceiling two cores of this shared box gave at the
  time, to read scan_ratio against;
- plain_row_records_per_s / row_scan_records_per_s / row_scan_ratio: the same pair for
  the scan view, one row per record into the JVM (the job's input before the partials
  view) and records counted there: one Python process building the scan view's Arrow
  batches and counting their record rows, against Spark counting them;
- job_records_per_s: the whole report job (scan, cache, 7 reports written as
  Parquet, summary), SparkSession start excluded;
- object_records_per_s: the object-per-record path (``analytics.scan.scan_rows``, one
  tuple per row), the data source's decoder before the column one, for reference;
- html_pairs (``--html-pairs``): ``minibroker analyze`` run as a user runs it (spark-submit,
  a fresh JVM each time) on the same files with and without ``report.html``, the two in
  alternating order, with each pair's ratio; html_ratio is the median ratio (the bar:
  at most 1.05);
- job_html_pairs: the same pair for the report job alone in the warm SparkSession,
  where the page's cost is a larger share (html_s is the page's own time: render and
  write);
- render_ms: how long the 1 GiB data set's report.html takes to draw every chart in
  headless Chromium (Debian's ``chromium``; ms from navigation start, a fresh browser
  each time; the bar: under 3,000), and render_1000_partitions_ms the same for a page
  of 1,000 partitions made up from report tables, with its size in page_1000_bytes.

Each figure is a list over ``--runs`` runs (the job: ``--job-runs``; the HTML pairs:
``--html-pairs``; ``--html-only`` skips the scans), with the 1-minute load average
after each; the single-process scans all run before Spark starts (with
``--interleave``: each run times all of them in turn, once Spark is warm). Prints
progress on stderr and one JSON object on its last line. Figures depend on how busy the
machine is: run it alone, and read the load.
"""

from __future__ import annotations

import argparse
import functools
import json
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from minibroker.analytics.columns import scan_batches
from minibroker.analytics.jobargs import JOB_CONF, JobOptions
from minibroker.analytics.layout import (
    UNSPLIT_BYTES,
    SegmentSlice,
    balanced_groups,
    plan_slices,
)
from minibroker.analytics.partials import partial_batches, replicated_partitions
from minibroker.analytics.scan import scan_rows
from minibroker.analytics.schema import KIND_GROUP
from minibroker.analytics.vega_bundle import vega_bundle
from minibroker.protocol.records import encode_values
from tests.support.cli import cli_command

RECORD_BYTES = 1024
BATCH_RECORDS = 16  # 16 x 1 KiB = Kafka producer's default batch.size
PARTITIONS = 2  # so local[2] has two partitions' files even with one slice each
T0 = 1_700_000_000_000
WARM_UP_MB = 8  # enough rows for the JIT to compile the Arrow-to-row path before timing


def log(line: str) -> None:
    print(f"[analytics_bench] {line}", file=sys.stderr, flush=True)


def write_data(root: Path, size_mb: int, segment_mb: int) -> int:
    """Segment files holding ``size_mb`` MiB of 1 KiB records; returns the record count."""
    total_records = size_mb * 1024 * 1024 // RECORD_BYTES
    per_partition = total_records // PARTITIONS
    segment_limit = segment_mb * 1024 * 1024
    # A few distinct payloads, each one record long: encoding cost, not urandom, is
    # what the write phase should spend its time on.
    payloads = [os.urandom(RECORD_BYTES) for _ in range(64)]
    written = 0
    for partition in range(PARTITIONS):
        directory = root / f"bench-{partition}"
        directory.mkdir(parents=True)
        offset = 0
        segment = None
        size = 0
        while offset < per_partition:
            if segment is None or size >= segment_limit:
                if segment is not None:
                    segment.close()
                segment = (directory / f"{offset:020d}.log").open("wb")
                size = 0
            n = min(BATCH_RECORDS, per_partition - offset)
            values = [payloads[(offset + i) % len(payloads)] for i in range(n)]
            data = encode_values(values, timestamp=T0 + offset, base_offset=offset)
            segment.write(data)
            size += len(data)
            offset += n
        if segment is not None:
            segment.close()
        written += offset
    return written


def whole_segments(root: Path) -> list[SegmentSlice]:
    """One slice per segment file: a single process has no use for cutting them (the
    planning walk that finds cuts is Spark's cost, so it is timed on Spark's side only)."""
    return plan_slices([str(root)], split_bytes=UNSPLIT_BYTES)


def object_scan(root: Path) -> tuple[int, float]:
    """(records, seconds) for a single-process scan building one tuple per row."""
    started = time.perf_counter()
    records = 0
    for piece in whole_segments(root):
        for row in scan_rows(piece):
            if row[0] == "record":
                records += 1
    return records, time.perf_counter() - started


def plain_scan(root: Path) -> tuple[int, float]:
    """(records, seconds) for a single-process scan computing the partials view, as the
    data source's tasks do (record rows kept for replicated partitions)."""
    started = time.perf_counter()
    pieces = whole_segments(root)
    records = count_partials(pieces, replicated_partitions(pieces))
    return records, time.perf_counter() - started


def count_partials(pieces: list[SegmentSlice], replicated: frozenset[tuple[str, int]]) -> int:
    """Records in the groups of the partials view of ``pieces``."""
    records = 0
    for piece in pieces:
        keep = (piece.topic, piece.partition) in replicated
        for batch in partial_batches(piece, keep_records=keep):
            is_group = pc.equal(batch.column("kind"), KIND_GROUP)
            groups = batch.column("group").filter(is_group)
            records += pc.sum(groups.field("records")).as_py() or 0
    return records


def two_process_scan(root: Path, pool: Any) -> tuple[int, float]:
    """(records, seconds) for ``plain_scan``'s work split between two processes of
    ``pool`` (already started), the segments dealt into two runs of near-equal bytes
    as the Spark scan's tasks get them: what two cores can give this machine right
    now, Spark or not."""
    started = time.perf_counter()
    pieces = whole_segments(root)
    replicated = replicated_partitions(pieces)
    shares = balanced_groups(pieces, 2)
    counts = pool.starmap(count_partials, [(share, replicated) for share in shares])
    return sum(counts), time.perf_counter() - started


def plain_row_scan(root: Path) -> tuple[int, float]:
    """(records, seconds) for a single-process scan building the scan view's batches."""
    started = time.perf_counter()
    records = 0
    for piece in whole_segments(root):
        for batch in scan_batches(piece):
            records += pc.sum(pc.equal(batch.column("kind"), "record")).as_py() or 0
    return records, time.perf_counter() - started


def load_average() -> float:
    return round(os.getloadavg()[0], 2)


def timed(
    rows: list[dict[str, float]],
    name: str,
    scan: Callable[[Path], tuple[int, float]],
    root: Path,
    written: int,
) -> None:
    """Run ``scan`` on ``root``, check it saw every record, add its figure to ``rows``."""
    records, seconds = scan(root)
    assert records == written, (name, records, written)
    rows.append({"records_per_s": round(written / seconds), "load": load_average()})
    log(f"{name}: {rows[-1]}")


class SparkBench:
    """One SparkSession, warmed up, that times scans and whole jobs."""

    def __init__(self, master: str, work: Path) -> None:
        from pyspark.sql import SparkSession

        from minibroker.analytics.datasource import register

        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        self.spark = (
            SparkSession.builder.master(master)
            .appName("analytics-bench")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.driver.memory", "4g")
            .config(map=dict(JOB_CONF))  # as `minibroker analyze` runs the job
            .config("spark.sql.shuffle.partitions", "4")
            .getOrCreate()
        )
        self.spark.sparkContext.setLogLevel("ERROR")
        register(self.spark)
        self.work = work
        # Warm-up: JVM JIT and Python worker start-up are paid once per application,
        # not per record; the figures below are steady-state.
        warm = work / "warm-up"
        write_data(warm, WARM_UP_MB, WARM_UP_MB)
        for _ in range(2):
            self.scan(warm)
            self.row_scan(warm)
        self.job(warm, work / "warm-up-report")

    def scan(self, root: Path) -> tuple[int, float]:
        """(records, seconds): the partials view read, its groups' records summed."""
        from pyspark.sql import functions as F

        from minibroker.analytics.segment_report import scan_frame

        options = JobOptions([str(root)], "", None, None, None, 10, None)
        started = time.perf_counter()
        groups = scan_frame(self.spark, options).where(F.col("kind") == KIND_GROUP)
        (row,) = groups.agg(F.sum("group.records")).collect()
        return row[0] or 0, time.perf_counter() - started

    def row_scan(self, root: Path) -> tuple[int, float]:
        """(records, seconds): the scan view read, its record rows counted."""
        from minibroker.analytics.segment_report import scan_frame

        options = JobOptions([str(root)], "", None, None, None, 10, None)
        started = time.perf_counter()
        records = scan_frame(self.spark, options, "scan").where("kind = 'record'").count()
        return records, time.perf_counter() - started

    def job(self, root: Path, out: Path, progress: Any = None, html: bool = False) -> float:
        from minibroker.analytics.segment_report import run_job

        page = str(out / "report.html") if html else None
        options = JobOptions([str(root)], str(out), None, None, None, 10, None, page)
        started = time.perf_counter()
        run_job(self.spark, options, progress=progress or (lambda line: None))
        return time.perf_counter() - started

    def stop(self) -> None:
        self.spark.stop()


def analyze(logs: Path, out: Path, html: bool) -> float:
    """Seconds for ``minibroker analyze`` over ``logs``, as a user runs it."""
    command = cli_command("analyze", "--log-dirs", str(logs), "--out", str(out))
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1")
    started = time.perf_counter()
    done = subprocess.run(
        [*command, *([] if html else ["--no-html"])], capture_output=True, text=True, env=env
    )
    seconds = time.perf_counter() - started
    assert done.returncode == 0, done.stderr[-2000:]
    assert (out / "report.html").is_file() == html
    return seconds


def alternating_pairs(
    name: str, run: Callable[[bool, Path], float], work: Path, pairs: int
) -> list[dict[str, float]]:
    """``pairs`` runs with and without the HTML report, alternating which goes first."""
    rows = []
    for pair in range(pairs):
        seconds = {}
        for html in (True, False) if pair % 2 == 0 else (False, True):
            seconds[html] = run(html, work / f"{name}-{pair}-{'html' if html else 'plain'}")
        rows.append({"with_html_s": round(seconds[True], 2),
                     "without_html_s": round(seconds[False], 2),
                     "ratio": round(seconds[True] / seconds[False], 3),
                     "load": load_average()})  # fmt: skip
        log(f"{name} pair {pair + 1}: {rows[-1]}")
    return rows


def render_ms(page: Path, runs: int, work: Path) -> list[int]:
    """Ms from navigation start until every chart of ``page`` drew, in a fresh headless
    Chromium each run."""
    from tests.support.browser import HeadlessChromium

    figures = []
    for run in range(runs):
        with HeadlessChromium(work / f"chromium-{page.stem}-{run}") as browser:
            tab = browser.open(page.as_uri())
            tab.evaluate("window.reportRendered")
            figures.append(int(tab.evaluate("document.documentElement.dataset.renderMs")))
        log(f"render {page.name} {run + 1}: {figures[-1]} ms")
    return figures


def made_up_page(work: Path) -> Path:
    """report.html of 1,000 partitions (10 topics of 100, 3 replicas) from made-up tables."""
    from minibroker.analytics.html_report import render_report, write_report
    from tests.support.report_tables import cluster_tables

    page = work / "made-up-1000" / "report.html"
    write_report(page, render_report(cluster_tables(10, 100, 3, damaged=True), ["/data"]))
    return page


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=1024, help="data size (default 1 GiB)")
    parser.add_argument("--segment-mb", type=int, default=256, help="segment file size")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--dir", help="work directory (default: a temp dir, removed after)")
    parser.add_argument("--runs", type=int, default=3, help="plain scans, then Spark scans")
    parser.add_argument("--job-runs", type=int, default=1, help="whole report jobs")
    parser.add_argument(
        "--interleave",
        action="store_true",
        help="each run times every scan in turn, Spark's too (the JVM up and warm), so "
        "both sides see the same moment of a shared machine's load",
    )
    parser.add_argument("--html-pairs", type=int, default=3, help="analyze runs with and "
                        "without report.html, alternating (and as many job pairs)")  # fmt: skip
    parser.add_argument("--render-runs", type=int, default=3, help="report.html in Chromium")
    parser.add_argument("--html-only", action="store_true", help="skip the scan figures")
    args = parser.parse_args()
    vega_bundle()  # made once and cached: a first report.html would pay for it
    root = Path(args.dir or tempfile.mkdtemp(prefix="mb-analytics-bench-"))
    try:
        logs = root / "logs"
        started = time.perf_counter()
        written = write_data(logs, args.size_mb, args.segment_mb)
        log(f"wrote {written:,} records in {time.perf_counter() - started:.1f} s")
        object_rps = 0.0
        if not args.html_only:
            records, seconds = object_scan(logs)
            assert records == written, (records, written)
            object_rps = written / seconds
            log(f"object-per-row scan: {object_rps:,.0f} records/s")
        plain: list[dict[str, float]] = []
        plain_rows: list[dict[str, float]] = []
        pairs: list[dict[str, float]] = []
        scans: list[dict[str, float]] = []
        row_scans: list[dict[str, float]] = []
        jobs: list[dict[str, float]] = []
        # The pool forks before the JVM and py4j's threads exist.
        with multiprocessing.get_context("fork").Pool(2) as pool:
            scan_in_two = functools.partial(two_process_scan, pool=pool)

            def plain_round(run: int) -> None:
                timed(plain, f"plain scan {run + 1}", plain_scan, logs, written)
                timed(plain_rows, f"plain row scan {run + 1}", plain_row_scan, logs, written)
                timed(pairs, f"two-process scan {run + 1}", scan_in_two, logs, written)

            runs = 0 if args.html_only else args.runs
            if not args.interleave:
                # Every single-process scan runs before the JVM starts: an idle JVM
                # still compiles and collects in the background, which would slow it.
                for run in range(runs):
                    plain_round(run)
            # The analyze pairs start JVMs of their own: before this one exists.
            analyze_pairs = alternating_pairs(
                "analyze", lambda html, out: analyze(logs, out, html), root, args.html_pairs
            )
            spark = SparkBench(args.master, root)
            try:
                html_seconds: list[float] = []

                def job_pair(html: bool, out: Path) -> float:
                    def progress(line: str) -> None:
                        if "report.html" in line and line.startswith("wrote"):
                            html_seconds.append(float(line.rsplit(" in ", 1)[1].split()[0]))

                    return spark.job(logs, out, progress, html)

                job_pairs = alternating_pairs("job", job_pair, root, args.html_pairs)
                for run in range(runs):
                    if args.interleave:
                        plain_round(run)
                    timed(scans, f"spark scan {run + 1}", spark.scan, logs, written)
                    timed(row_scans, f"spark row scan {run + 1}", spark.row_scan, logs, written)
                for run in range(0 if args.html_only else args.job_runs):
                    seconds = spark.job(logs, root / f"report-{run}", progress=log)
                    jobs.append({"records_per_s": round(written / seconds), "load": load_average()})
                    log(f"job {run + 1}: {jobs[-1]}")
            finally:
                spark.stop()

        def each(name: str, rows: list[dict[str, float]]) -> list[float]:
            return [row[name] for row in rows]

        def ratio(spark_rows: list[dict[str, float]], plain_rows: list[dict[str, float]]) -> float:
            if not spark_rows or not plain_rows:
                return 0.0
            spark_median = statistics.median(each("records_per_s", spark_rows))
            return round(spark_median / statistics.median(each("records_per_s", plain_rows)), 3)

        def median_ratio(pairs: list[dict[str, float]]) -> float:
            return statistics.median(each("ratio", pairs)) if pairs else 0.0

        page = sorted(root.glob("analyze-*-html/report.html"))[:1]
        renders = render_ms(page[0], args.render_runs, root) if page else []
        made_up = made_up_page(root)
        renders_1000 = render_ms(made_up, args.render_runs, root)

        figures = {
            "bench": "analytics",
            "size_mb": args.size_mb,
            "records": written,
            "record_bytes": RECORD_BYTES,
            "master": args.master,
            "interleaved": args.interleave,
            "cpus": os.cpu_count(),
            "plain_records_per_s": each("records_per_s", plain),
            "plain_load_avg_1m": each("load", plain),
            "scan_records_per_s": each("records_per_s", scans),
            "scan_load_avg_1m": each("load", scans),
            "scan_ratio": ratio(scans, plain),
            "two_process_records_per_s": each("records_per_s", pairs),
            "two_process_load_avg_1m": each("load", pairs),
            "two_process_ratio": ratio(pairs, plain),
            "plain_row_records_per_s": each("records_per_s", plain_rows),
            "plain_row_load_avg_1m": each("load", plain_rows),
            "row_scan_records_per_s": each("records_per_s", row_scans),
            "row_scan_load_avg_1m": each("load", row_scans),
            "row_scan_ratio": ratio(row_scans, plain_rows),
            "job_records_per_s": each("records_per_s", jobs),
            "job_load_avg_1m": each("load", jobs),
            "object_records_per_s": round(object_rps),
            "html_pairs": analyze_pairs,
            "html_ratio": median_ratio(analyze_pairs),
            "job_html_pairs": job_pairs,
            "job_html_ratio": median_ratio(job_pairs),
            "html_s": html_seconds,
            "report_bytes": page[0].stat().st_size if page else 0,
            "render_ms": renders,
            "render_1000_partitions_ms": renders_1000,
            "page_1000_bytes": made_up.stat().st_size,
        }
    finally:
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())

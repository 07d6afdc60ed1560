"""The segment report job: ``spark-submit analytics/segment_report.py --log-dirs A,B --out DIR``.

Reads segment files straight from one or many log dirs (no broker involved), writes one
Parquet table per report under ``--out`` (partitions, topics, records_per_minute,
traffic, top_keys, batches, producers, leader_epochs, corruption, divergence; see
analytics.report) plus ``summary.txt`` and, unless ``--no-html``, the same as charts in
``report.html`` (``--html PATH`` to put it elsewhere; analytics.html_report), and prints
progress lines and that summary, whose last line names the page.

How this works: the ``minibroker`` data source's ``partials`` view is read once and
cached (one task per core, each reading its share of the segment slices, decoded and
aggregated on the executors, so the JVM sees a few rows per slice and minute, not one
per record); every report is a pure
function of it. The driver zips ``protocol`` and ``analytics`` and ships them with
``addPyFile`` (``analytics.datasource.register``), so executors need only pyspark, not
the project: the job runs unchanged on a cluster whose workers see the log dirs at the
same paths.

Exit codes: 0 done, 1 a log dir is missing (or Spark failed), 2 bad arguments; errors
are one line on stderr.
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:
    # Run as a file (spark-submit): sys.path[0] is analytics/ itself; the packages live
    # one level up. Replacing the entry also keeps analytics' modules from shadowing.
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from time import monotonic

from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession

from minibroker.analytics.datasource import FORMAT_NAME, register
from minibroker.analytics.html_report import render_report, write_report
from minibroker.analytics.isolation import READ_UNCOMMITTED
from minibroker.analytics.jobargs import (
    EXIT_ERROR,
    EXIT_USAGE,
    JobOptions,
    OneLineParser,
    add_job_arguments,
    first_missing_dir,
    options_from_args,
)
from minibroker.analytics.layout import (
    UNSPLIT_BYTES,
    SegmentSlice,
    balanced_groups,
    plan_slices,
)
from minibroker.analytics.report import build_partial_reports
from minibroker.analytics.summary import SegmentFileRead, format_summary, human_bytes
from minibroker.protocol.errors import MinibrokerError, UsageError

PROG = "segment_report"
APP_NAME = "minibroker-segment-report"
COLLECT_LIMIT = 1000
"""Rows per report brought to the driver for the summary (it prints far fewer)."""
HTML_COLLECT_LIMIT = 20_000
"""Rows per report brought to the driver when the HTML report is drawn too: every
replica of 1,000 partitions at replication factor 3 and a few leader epochs each (the
page's charts choose and aggregate further; its tables say when rows were left out)."""
PROGRESS_INTERVAL_S = 10.0
"""How often a long scan reports its progress: a sign of life, not a flood."""
REPORT_WRITERS = 3
"""Reports written at once: each is a few small Spark jobs whose time goes mostly to
planning and scheduling on the driver, which overlaps with another report's tasks."""
NOT_SUMMARISED = frozenset({"records_per_minute"})  # one row per minute: Parquet only

Progress = Callable[[str], None]


def _progress(line: str) -> None:
    print(f"[{PROG}] {line}", flush=True)


def scan_tasks(spark: SparkSession) -> int:
    """Tasks a scan runs as: one per core, so each task's fixed cost is paid once per
    core, not once per slice."""
    return spark.sparkContext.defaultParallelism


def scan_frame(spark: SparkSession, options: JobOptions, kind: str = "partials") -> DataFrame:
    """The data source's ``kind`` view for ``options`` (not yet read)."""
    tasks = str(scan_tasks(spark))
    reader = spark.read.format(FORMAT_NAME).option("kind", kind).option("tasks", tasks)
    if options.topics:
        reader = reader.option("topics", ",".join(options.topics))
    if options.isolation_level != READ_UNCOMMITTED:
        reader = reader.option("isolation_level", options.isolation_level)
    if options.from_timestamp is not None:
        reader = reader.option("from_timestamp", str(options.from_timestamp))
    if options.to_timestamp is not None:
        reader = reader.option("to_timestamp", str(options.to_timestamp))
    return reader.load(",".join(options.log_dirs))


def segments_read(
    log_dirs: list[str], pieces: list[SegmentSlice]
) -> dict[str, list[SegmentFileRead]]:
    """Per log dir (as given, every one even if empty): each segment file and its size."""
    by_dir: dict[str, dict[str, int]] = {str(Path(d).resolve()): {} for d in log_dirs}
    for piece in pieces:
        files = by_dir.setdefault(piece.log_dir, {})
        files[piece.segment] = files.get(piece.segment, 0) + piece.end - piece.start
    return {
        log_dir: [SegmentFileRead(path, size) for path, size in sorted(files.items())]
        for log_dir, files in by_dir.items()
    }


class TaskProgress:
    """While a Spark action runs, prints how many of its tasks are done every
    ``PROGRESS_INTERVAL_S`` (from Spark's status tracker, on a daemon thread)."""

    def __init__(self, spark: SparkSession, progress: Progress) -> None:
        self._tracker = spark.sparkContext.statusTracker()
        self._progress = progress
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._report, name="task-progress", daemon=True)

    def _report(self) -> None:
        while not self._stop.wait(PROGRESS_INTERVAL_S):
            done = total = 0
            for stage_id in self._tracker.getActiveStageIds():
                info = self._tracker.getStageInfo(stage_id)
                if info is not None:
                    done += info.numCompletedTasks
                    total += info.numTasks
            if total:
                self._progress(f"scanning: {done}/{total} task(s) done")

    def __enter__(self) -> TaskProgress:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def run_job(spark: SparkSession, options: JobOptions, progress: Progress = _progress) -> str:
    """Scan, write every report as Parquet under ``options.out``; return the summary."""
    started = monotonic()
    register(spark)
    topics = frozenset(options.topics) if options.topics else None
    pieces = plan_slices(options.log_dirs, topics, UNSPLIT_BYTES)
    files = len(pieces)
    size = sum(p.end - p.start for p in pieces)
    tasks = len(balanced_groups(pieces, scan_tasks(spark))) or 1
    progress(f"planned {files} segment file(s), {human_bytes(size)}, as {tasks} task(s)")
    if options.isolation_level != READ_UNCOMMITTED:
        progress(f"{options.isolation_level}: the records of aborted transactions are left out")

    scan = scan_frame(spark, options).cache()
    with TaskProgress(spark, progress):
        rows = scan.count()
    progress(
        f"scanned into {rows:,} rows (record groups, batch summaries, corrupt regions) "
        f"in {monotonic() - started:.1f} s"
    )

    out = Path(options.out)
    limit = COLLECT_LIMIT if options.html is None else HTML_COLLECT_LIMIT

    def write(name: str, frame: DataFrame) -> list[dict[str, object]] | None:
        """Write one report; its first rows for the summary unless NOT_SUMMARISED."""
        target = out / name
        began = monotonic()
        summarised = name not in NOT_SUMMARISED
        if summarised:
            frame = frame.cache()  # computed once for both the write and the summary
        frame.write.mode("overwrite").parquet(str(target))
        progress(f"wrote {target} in {monotonic() - began:.1f} s")
        if not summarised:
            return None
        rows = [r.asDict() for r in frame.limit(limit).collect()]
        frame.unpersist()
        return rows

    reports = build_partial_reports(scan, options.top_keys)
    with ThreadPoolExecutor(REPORT_WRITERS, thread_name_prefix="report") as writers:
        written = {name: writers.submit(write, name, frame) for name, frame in reports.items()}
        tables = {
            name: first for name, job in written.items() if (first := job.result()) is not None
        }
    scan.unpersist()

    read = segments_read(options.log_dirs, pieces)
    if options.html is not None:
        began = monotonic()
        page = render_report(tables, options.log_dirs, read, out=str(out))
        write_report(Path(options.html), page)
        weight = human_bytes(len(page.encode("utf-8")))
        progress(f"wrote {options.html} ({weight}) in {monotonic() - began:.1f} s")
    summary = format_summary(tables, options.log_dirs, read, options.html)
    (out / "summary.txt").write_text(summary + "\n", encoding="utf-8")
    progress(f"done in {monotonic() - started:.1f} s; summary in {out / 'summary.txt'}")
    return summary


def build_session(options: JobOptions) -> SparkSession:
    builder = SparkSession.builder.appName(APP_NAME)
    if options.master:
        builder = builder.master(options.master)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")  # progress lines, not Spark's INFO chatter
    if not spark.sparkContext.getConf().contains("spark.sql.shuffle.partitions"):
        # The reports shrink to small tables: 200 shuffle tasks each would cost more
        # than the work. A user's --conf still wins.
        parallelism = spark.sparkContext.defaultParallelism
        spark.conf.set("spark.sql.shuffle.partitions", str(max(2, 2 * parallelism)))
    return spark


def main(argv: Sequence[str] | None = None) -> int:
    parser = OneLineParser(prog=PROG, description="Offline report over minibroker segment files.")
    add_job_arguments(parser)
    args = parser.parse_args(argv)
    try:
        options = options_from_args(args)
    except UsageError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    missing = first_missing_dir(options.log_dirs)
    if missing is not None:
        print(f"{PROG}: error: log dir {missing} does not exist", file=sys.stderr)
        return EXIT_ERROR
    spark = build_session(options)
    try:
        summary = run_job(spark, options)
    except OSError as exc:  # e.g. --out not writable, a log dir vanished mid-plan
        where = f": {exc.filename}" if exc.filename else ""
        print(f"{PROG}: error: {exc.strerror or exc}{where}", file=sys.stderr)
        return EXIT_ERROR
    except MinibrokerError as exc:  # e.g. no vl-convert-python for the HTML report
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except PySparkException as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"{PROG}: error: Spark job failed: {first_line}", file=sys.stderr)
        return EXIT_ERROR
    finally:
        spark.stop()
    print(summary, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

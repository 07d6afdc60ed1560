"""Records/s scanned by the segment report job (local[2]) vs a plain Python scan.

    python3 bench/analytics_bench.py [--size-mb 1024] [--master local[2]] [--dir DIR]

Writes ``--size-mb`` of 1 KiB records (16 per batch, like a producer's default 16 KiB
batch.size; no compression) as segment files of ``--segment-mb`` in two partitions,
then measures, on the same files with the same codec (protocol.records):

- plain_records_per_s: one Python process walking every segment with
  ``analytics.scan.scan_rows`` - exactly the per-record work a Spark task does
  (decode, CRC check, per-record checksum), minus Spark;
- scan_records_per_s: the Spark data source's scan view counted (planning, one task
  per 64 MiB slice on the executors, rows into the JVM);
- job_records_per_s: the whole report job (scan, cache, 7 reports written as
  Parquet, summary), SparkSession start excluded;
- scan_ratio and job_ratio: those over plain_records_per_s.

Prints progress on stderr and one JSON object on its last line. Figures depend on how
busy the machine is: run it alone.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from minibroker.analytics.jobargs import JobOptions
from minibroker.analytics.layout import plan_slices
from minibroker.analytics.scan import scan_rows
from minibroker.protocol.records import encode_values

RECORD_BYTES = 1024
BATCH_RECORDS = 16  # 16 x 1 KiB = Kafka producer's default batch.size
PARTITIONS = 2  # so local[2] has two partitions' files even with one slice each
T0 = 1_700_000_000_000


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


def plain_scan(root: Path) -> tuple[int, float]:
    """(records, seconds) for a single-process scan with the job's own row code."""
    started = time.perf_counter()
    records = 0
    for piece in plan_slices([str(root)], split_bytes=1 << 62):
        for row in scan_rows(piece):
            if row[0] == "record":
                records += 1
    return records, time.perf_counter() - started


def spark_scan(root: Path, master: str, out: Path) -> dict[str, Any]:
    from pyspark.sql import SparkSession

    from minibroker.analytics.datasource import register
    from minibroker.analytics.segment_report import run_job, scan_frame

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    spark = (
        SparkSession.builder.master(master)
        .appName("analytics-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "4g")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    options = JobOptions([str(root)], str(out), None, None, None, 10, None)
    try:
        # Warm-up on a tiny log dir: JVM JIT and Python worker start-up are paid once
        # per application, not per record; the figures below are steady-state.
        tiny = root.parent / "warm-up"
        write_data(tiny, 1, 1)
        warm = JobOptions(
            [str(tiny)], str(out.parent / "warm-up-report"), None, None, None, 10, None
        )
        run_job(spark, warm, progress=lambda line: None)
        started = time.perf_counter()
        records = scan_frame(spark, options).where("kind = 'record'").count()
        scan_seconds = time.perf_counter() - started
        log(f"spark scan: {records:,} records in {scan_seconds:.1f} s")
        started = time.perf_counter()
        run_job(spark, options, progress=log)
        job_seconds = time.perf_counter() - started
    finally:
        spark.stop()
    return {"records": records, "scan_seconds": scan_seconds, "job_seconds": job_seconds}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=1024, help="data size (default 1 GiB)")
    parser.add_argument("--segment-mb", type=int, default=256, help="segment file size")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--dir", help="work directory (default: a temp dir, removed after)")
    args = parser.parse_args()
    root = Path(args.dir or tempfile.mkdtemp(prefix="mb-analytics-bench-"))
    try:
        logs = root / "logs"
        started = time.perf_counter()
        written = write_data(logs, args.size_mb, args.segment_mb)
        log(f"wrote {written:,} records in {time.perf_counter() - started:.1f} s")
        plain_records, plain_seconds = plain_scan(logs)
        log(f"plain scan: {plain_records:,} records in {plain_seconds:.1f} s")
        spark = spark_scan(logs, args.master, root / "report")
        assert plain_records == written == spark["records"], (plain_records, written, spark)
        plain_rps = plain_records / plain_seconds
        scan_rps = spark["records"] / spark["scan_seconds"]
        job_rps = spark["records"] / spark["job_seconds"]
        figures = {
            "bench": "analytics",
            "size_mb": args.size_mb,
            "records": written,
            "record_bytes": RECORD_BYTES,
            "master": args.master,
            "cpus": os.cpu_count(),
            "load_avg_1m": round(os.getloadavg()[0], 2),
            "plain_records_per_s": round(plain_rps),
            "scan_records_per_s": round(scan_rps),
            "job_records_per_s": round(job_rps),
            "scan_ratio": round(scan_rps / plain_rps, 3),
            "job_ratio": round(job_rps / plain_rps, 3),
            "plain_seconds": round(plain_seconds, 2),
            "scan_seconds": round(spark["scan_seconds"], 2),
            "job_seconds": round(spark["job_seconds"], 2),
        }
    finally:
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())

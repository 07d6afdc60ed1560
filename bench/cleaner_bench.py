"""Log cleaner bench: cleaning speed, and appends to the same partition meanwhile.

Builds a compacted partition log of ``--size`` MiB of 1 KiB records (16 per batch, as
a producer's 16 KiB batches) whose keys are drawn at random from ``--distinct`` of the
record count (10%: most batches lose some records and are rebuilt), then per run:

1. cleaning: the real cleaner job (storage/cleaner/clean.py) in a spawned worker
   process, as the broker runs it (``--throttle`` MB/s is log.cleaner.io.max.bytes.per.
   second), while this process appends batches to the same partition as fast as it
   can; then the swap. Cleaning speed is input bytes over the job's wall time, and
   over its CPU time (what it does on a core of its own);
2. appends alone, for as long as the cleaning took (page-cache writeback then weighs
   on both alike): the baseline the append rate while cleaning is compared with.

Prints one JSON line per run and a summary (ranges over the runs, load average).

    python3 bench/cleaner_bench.py [--size 1024] [--runs 3] [--throttle MB/s]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import json
import multiprocessing
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from minibroker.protocol.records import Record, encode_batch
from minibroker.storage.cleaner.clean import clean_log
from minibroker.storage.cleaner.manager import CleanerConfig, CleanerManager
from minibroker.storage.log import Log
from minibroker.storage.log_config import LogConfig

RECORD_BYTES = 1024
RECORDS_PER_BATCH = 16
SEGMENT_BYTES = 128 * 1024 * 1024  # several segments per GiB, grouped back by the cleaner
CONFIG = LogConfig(
    segment_bytes=SEGMENT_BYTES,
    retention_ms=-1,
    file_delete_delay_ms=60_000,  # the broker's default: the swap only renames old files
    cleanup_policy="compact",
    min_cleanable_dirty_ratio=0.01,
)


def make_batches(count: int, keys: int, rng: random.Random) -> list[bytearray]:
    value = b"v" * (RECORD_BYTES - 40)
    batches = []
    for _ in range(count):
        records = [
            Record(value, b"key-%012d" % rng.randrange(keys), timestamp=1_000)
            for _ in range(RECORDS_PER_BATCH)
        ]
        batches.append(bytearray(encode_batch(records)))
    return batches


def append_for(
    log: Log,
    batches: list[bytearray],
    seconds: float,
    stop: concurrent.futures.Future[Any] | None = None,
) -> tuple[int, float]:
    """Append batches (cycling) for ``seconds`` or until ``stop`` is done; bytes, secs."""
    done = 0
    started = time.perf_counter()
    i = 0
    while True:
        elapsed = time.perf_counter() - started
        if (stop is None and elapsed >= seconds) or (stop is not None and stop.done()):
            return done, elapsed
        batch = batches[i % len(batches)]
        log.append(bytearray(batch))
        done += len(batch)
        i += 1


def build(directory: Path, size_mib: int, distinct: float, rng: random.Random) -> Log:
    log = Log(directory, CONFIG)
    records = size_mib * 1024 * 1024 // RECORD_BYTES
    keys = max(1, int(records * distinct))
    pool = make_batches(256, keys, rng)  # re-keyed each round below: cheap and random
    written = 0
    while written < size_mib * 1024 * 1024:
        batch = make_batches(1, keys, rng)[0] if written % 64 == 0 else pool[rng.randrange(256)]
        log.append(bytearray(batch))
        written += len(batch)
    log.roll()
    return log


def run_once(
    root: Path, args: argparse.Namespace, seed: int, pool: concurrent.futures.ProcessPoolExecutor
) -> dict[str, float]:
    rng = random.Random(seed)
    directory = root / f"bench-{seed}" / "table-0"
    directory.parent.mkdir(parents=True)
    log = build(directory, args.size, args.distinct, rng)
    manager = CleanerManager([directory.parent], CleanerConfig(), clock=lambda: 10**13)
    assert log.topic_partition is not None
    pending = manager.choose({log.topic_partition: log})  # the built log, not what follows
    assert pending is not None
    appends = make_batches(64, 1_000_000, rng)
    if args.throttle:
        pending.job = dataclasses.replace(pending.job, io_bytes_per_second=args.throttle * 1e6)
    input_bytes = sum(s.size for s in pending.job.segments)
    future = pool.submit(clean_log, pending.job)
    during_bytes, during_s = append_for(log, appends, 0, stop=future)
    result = future.result()
    swap_started = time.perf_counter()
    assert manager.finish(pending, result)
    swap_s = time.perf_counter() - swap_started
    base_bytes, base_s = append_for(log, appends, during_s)
    log.delete_expired_files(now_ms=2**62)
    log.close()
    shutil.rmtree(directory.parent)
    base_rate = base_bytes / base_s
    during_rate = during_bytes / during_s if during_s else 0.0
    return {
        "input_mb": input_bytes / 1e6,
        "clean_mb_per_s": input_bytes / 1e6 / result.seconds,
        "clean_s": result.seconds,
        "clean_mb_per_cpu_s": input_bytes / 1e6 / result.cpu_seconds,
        "recopy_percent": 100 * result.bytes_written / result.bytes_read,
        "append_mb_per_s_alone": base_rate / 1e6,
        "append_mb_per_s_while_cleaning": during_rate / 1e6,
        "append_kept_percent": 100 * during_rate / base_rate,
        "swap_ms": swap_s * 1000,
        "loadavg_1m": os.getloadavg()[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1024, help="MiB of records to clean")
    parser.add_argument("--distinct", type=float, default=0.10, help="distinct keys / records")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--throttle", type=float, default=0.0, help="cleaner read cap, MB/s (0: none)"
    )
    parser.add_argument("--dir", help="where to build the logs (default: a temp dir)")
    args = parser.parse_args()
    runs = []
    context = multiprocessing.get_context("spawn")
    with (
        tempfile.TemporaryDirectory(prefix="cleaner-bench-", dir=args.dir) as tmp,
        concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool,
    ):
        pool.submit(int).result()  # the worker is up before anything is timed
        for seed in range(args.runs):
            run = run_once(Path(tmp), args, seed, pool)
            print(json.dumps(run), flush=True)
            runs.append(run)
    summary = {
        key: [round(min(r[key] for r in runs), 1), round(max(r[key] for r in runs), 1)]
        for key in runs[0]
    }
    print(json.dumps({"size_mib": args.size, "runs": len(runs), "ranges": summary}))


if __name__ == "__main__":
    main()

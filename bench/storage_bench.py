"""Storage benchmark: append, sequential read, offset lookup and recovery of a Log, and
how fast new partitions' logs are created.

Usage: python3 bench/storage_bench.py [--quick] [--dir DIR] [--log-creation-only]

Prints a few progress lines, then ONE JSON object of figures on the last line.

Log creation runs first, with real fsyncs (directory fsyncs are part of what creating
a log costs): ``create_100_logs_s`` / ``create_1000_logs_s`` time LogManager creating
that many logs in a fresh log dir (best of ROUNDS), ``leader_and_isr_100_new_s`` one
LeaderAndIsr making a ReplicaManager lead 100 new partitions (``_cpu_s``: process CPU
time of the same; the box is shared, so CPU says what the code costs).

Everything after that runs without fsync: it measures the code path and the page
cache, not the disk, so os.fsync and index msync are replaced by no-ops. Targets
(2-core box): append 1 MiB batches >= 1000 MB/s, append 1 KiB batches >= 100,000 batches/s,
sequential read >= 2000 MB/s, offset lookup <= 20 us, recovery of 1 GiB of 16 KiB
batches <= 2 s.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from minibroker.protocol.crc32c import BACKEND
from minibroker.protocol.records import encode_values
from minibroker.storage.index_file import IndexFile
from minibroker.storage.log import Log
from minibroker.storage.log_config import LogConfig

MIB = 1 << 20
CONFIG = LogConfig(max_message_bytes=2 * MIB, retention_ms=-1, file_delete_delay_ms=0)


def _skip(*_args: object) -> None:
    return None


def _no_fsync() -> None:
    os.fsync = _skip  # type: ignore[assignment]
    IndexFile.flush = _skip  # type: ignore[method-assign,assignment]


def one_batch(total_bytes: int, record_bytes: int) -> bytearray:
    """A batch of about ``total_bytes`` made of ``record_bytes`` values."""
    count = max(1, total_bytes // (record_bytes + 8))
    value = os.urandom(record_bytes)
    return bytearray(encode_values([value] * count, timestamp=int(time.time() * 1000)))


class Clock:
    """Wall and process-CPU seconds of a block. The box is shared: CPU time says what
    the code costs, wall time what it got."""

    def __enter__(self) -> Clock:
        self._wall, self._cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.wall = time.perf_counter() - self._wall
        self.cpu = time.process_time() - self._cpu


def append_many(log: Log, data: bytearray, count: int) -> Clock:
    """Append the same batch ``count`` times (offsets are re-patched each time)."""
    append = log.append
    with Clock() as clock:
        for _ in range(count):
            append(data)
    return clock


def bench_append_large(root: Path, total: int) -> tuple[dict[str, float], Log]:
    log = Log(root / "large-0", CONFIG, had_clean_shutdown=True)
    data = one_batch(MIB, 1024)
    count = total // len(data)
    clock = append_many(log, data, count)
    size = count * len(data)
    return {
        "append_1mib_batches_mb_s": round(size / clock.wall / 1e6, 1),
        "append_1mib_batches_mb_per_cpu_s": round(size / clock.cpu / 1e6, 1),
    }, log


def bench_append_small(root: Path, count: int) -> tuple[dict[str, float], Log]:
    log = Log(root / "small-0", CONFIG, had_clean_shutdown=True)
    data = one_batch(1024, 1000)
    clock = append_many(log, data, count)
    return {
        "append_1kib_batches_per_s": round(count / clock.wall),
        "append_1kib_batches_per_cpu_s": round(count / clock.cpu),
        "append_1kib_batch_bytes": len(data),
    }, log


def bench_sequential_read(log: Log, fetch_bytes: int, label: str) -> dict[str, float]:
    """Fetch the whole log front to back, ``fetch_bytes`` at a time, as a consumer
    would (the next fetch offset comes with each read)."""
    offset, end, total = log.log_start_offset, log.log_end_offset, 0
    read = log.read
    with Clock() as clock:
        while offset < end:
            info = read(offset, fetch_bytes)
            total += info.records.nbytes
            offset = info.next_offset
    return {
        f"sequential_read_{label}_mb_s": round(total / clock.wall / 1e6, 1),
        f"sequential_read_{label}_mb_per_cpu_s": round(total / clock.cpu / 1e6, 1),
    }


def bench_lookup(log: Log, samples: int) -> dict[str, float]:
    """Random offsets: the index lookup plus header scan that finds an offset's batch
    (segment chosen by bisect, as Log.read does), then a whole one-batch read."""
    rng = random.Random(7)
    offsets = [rng.randrange(log.log_end_offset) for _ in range(samples)]
    segments = log.segments
    bases = [s.base_offset for s in segments]
    with Clock() as lookup:
        for offset in offsets:
            segments[bisect.bisect_right(bases, offset) - 1].translate_offset(offset)
    with Clock() as one_batch_read:
        for offset in offsets:
            log.read(offset, 1)
    return {
        "offset_lookup_us": round(lookup.wall / samples * 1e6, 2),
        "offset_lookup_cpu_us": round(lookup.cpu / samples * 1e6, 2),
        "read_one_batch_at_random_offset_us": round(one_batch_read.wall / samples * 1e6, 2),
    }


LOG_CREATION_ROUNDS = 3
"""Best of this many rounds: other processes' disk traffic makes single fsyncs noisy."""


class CountFsyncs:
    """Counts os.fsync calls in a block (they still happen): on a busy disk each costs
    milliseconds, so their number is the figure that does not depend on the box."""

    def __enter__(self) -> CountFsyncs:
        self.count = 0
        self._real = os.fsync

        def counting(fd: int) -> None:
            self.count += 1
            self._real(fd)

        os.fsync = counting  # type: ignore[assignment]
        return self

    def __exit__(self, *_exc: object) -> None:
        os.fsync = self._real


def bench_create_logs(root: Path, count: int) -> dict[str, float]:
    from minibroker.protocol.topic_partition import TopicPartition
    from minibroker.storage.log_manager import LogManager

    best_wall, best_cpu = float("inf"), float("inf")
    for round_no in range(LOG_CREATION_ROUNDS):
        log_dir = root / f"create-{count}-{round_no}"
        manager = LogManager([log_dir], CONFIG)
        tps = [TopicPartition("t", p) for p in range(count)]
        with CountFsyncs() as fsyncs, Clock() as clock:
            _, failures = manager.get_or_create_logs(dict.fromkeys(tps))
        assert not failures, failures
        best_wall, best_cpu = min(best_wall, clock.wall), min(best_cpu, clock.cpu)
        manager.close()
        shutil.rmtree(log_dir)
    return {
        f"create_{count}_logs_s": round(best_wall, 4),
        f"create_{count}_logs_cpu_s": round(best_cpu, 4),
        f"create_{count}_logs_fsyncs": fsyncs.count,
    }


def bench_leader_and_isr(root: Path, count: int) -> dict[str, float]:
    """One LeaderAndIsr with ``count`` new partitions led by this broker, as the
    broker handles it (logs, partitions, leader-epoch checkpoints)."""
    import trio

    from minibroker.broker.cluster.metadata_cache import MetadataCache
    from minibroker.broker.config.broker_config import BrokerConfig
    from minibroker.broker.replication.hosted_replicas import HostedReplicas, to_log_config
    from minibroker.broker.replication.partition import LeaderAndIsrPartition
    from minibroker.broker.replication.replica_manager import ReplicaManager
    from minibroker.protocol.topic_partition import TopicPartition
    from minibroker.storage.log_manager import LogManager

    state = LeaderAndIsrPartition(
        controller_epoch=1, leader=1, leader_epoch=0, isr=(1,), zk_version=0, replicas=(1,),
        is_new=True,
    )  # fmt: skip

    async def once(log_dir: Path) -> tuple[Clock, int]:
        config = BrokerConfig.from_properties(None, {"broker.id": "1", "log.dirs": str(log_dir)})
        manager = LogManager(config.log_dirs, to_log_config(config.topic_config()))
        replicas = ReplicaManager(
            HostedReplicas(config, manager, MetadataCache(1), clock=lambda: 0)
        )
        states = {TopicPartition("t", p): state for p in range(count)}
        try:
            with CountFsyncs() as fsyncs, Clock() as clock:
                errors = await replicas.leadership.become_leader_or_follower(1, states)
            assert not any(errors.values()), errors
            return clock, fsyncs.count
        finally:
            manager.close()

    best_wall, best_cpu = float("inf"), float("inf")
    for round_no in range(LOG_CREATION_ROUNDS):
        log_dir = root / f"lai-{count}-{round_no}"
        clock, fsync_count = trio.run(once, log_dir)
        best_wall, best_cpu = min(best_wall, clock.wall), min(best_cpu, clock.cpu)
        shutil.rmtree(log_dir)
    return {
        f"leader_and_isr_{count}_new_s": round(best_wall, 4),
        f"leader_and_isr_{count}_new_cpu_s": round(best_cpu, 4),
        f"leader_and_isr_{count}_new_fsyncs": fsync_count,
    }


def bench_log_creation(root: Path) -> dict[str, float]:
    """Log creation figures (with real fsyncs)."""
    figures = bench_create_logs(root, 100)
    figures.update(bench_create_logs(root, 1000))
    figures.update(bench_leader_and_isr(root, 100))
    return figures


def bench_recovery(root: Path, total: int) -> dict[str, float]:
    directory = root / "recover-0"
    log = Log(directory, CONFIG, had_clean_shutdown=True)
    data = one_batch(16 * 1024, 1000)
    append_many(log, data, total // len(data))
    size = log.size
    log.close()
    with Clock() as clock:
        recovered = Log(directory, CONFIG, recovery_point=0, had_clean_shutdown=False)
    assert recovered.size == size, "recovery must keep every valid batch"
    recovered.close()
    return {
        "recovery_s": round(clock.wall, 3),
        "recovery_cpu_s": round(clock.cpu, 3),
        "recovery_bytes": size,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    parser.add_argument("--dir", type=Path, default=None, help="where to write (default: tmp)")
    parser.add_argument(
        "--log-creation-only", action="store_true", help="only the log creation figures"
    )
    args = parser.parse_args()
    scale = 16 if args.quick else 1
    root = Path(tempfile.mkdtemp(prefix="storage-bench-", dir=args.dir))
    figures: dict[str, object] = {"quick": args.quick, "crc32c_backend": BACKEND}
    try:
        result = bench_log_creation(root)
        figures.update(result)
        print("log creation:", result, flush=True)
        if args.log_creation_only:
            print(json.dumps(figures))
            return
        _no_fsync()
        result, large = bench_append_large(root, (1 << 30) // scale)
        figures.update(result)
        print("append 1 MiB:", result, flush=True)
        result = bench_sequential_read(large, MIB, "1mib_batches")
        figures.update(result)
        print("read:", result, flush=True)
        large.close()
        shutil.rmtree(root / "large-0")
        result, small = bench_append_small(root, 200_000 // scale)
        figures.update(result)
        print("append 1 KiB:", result, flush=True)
        result = bench_sequential_read(small, MIB, "1kib_batches")
        figures.update(result)
        print("read:", result, flush=True)
        result = bench_lookup(small, 20_000 // scale)
        figures.update(result)
        print("lookup:", result, flush=True)
        small.close()
        shutil.rmtree(root / "small-0")
        result = bench_recovery(root, (1 << 30) // scale)
        figures.update(result)
        print("recovery:", result, flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()

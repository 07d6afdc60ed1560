"""Log-dir move bench: the mover's real copy speed and how well its throttle holds.

Builds a partition log of ``--megabytes`` in one log dir, then moves it to a second dir
twice with the real LogDirMover on Trio's real clock: once unthrottled (copy speed),
once throttled so the move should take ``--seconds`` (throttle accuracy: achieved
rate vs the configured one). Prints one JSON object on its last line.

    python3 bench/log_dir_move_bench.py [--megabytes 50] [--seconds 10]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from minibroker.broker.logdirs.log_dir_mover import LogDirMover
from minibroker.protocol.records import encode_values
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.storage.log import Log
from minibroker.storage.log_config import LogConfig
from minibroker.storage.log_manager import LogManager

TP = TopicPartition("bench", 0)
BATCH_VALUES = 64
VALUE_SIZE = 1024


@dataclass
class Hosted:
    log: Log


@dataclass
class Replicas:
    log_manager: LogManager
    partitions: dict[TopicPartition, Hosted] = field(default_factory=dict)
    log_manager_lock: trio.Lock = field(default_factory=trio.Lock)


async def timed_move(replicas: Replicas, target: Path, rate: float) -> tuple[float, int]:
    mover = LogDirMover(replicas, rate_bytes_per_s=rate)
    await mover.start(TP, target)
    started = time.perf_counter()
    assert await mover.move(TP)
    return time.perf_counter() - started, mover.bytes_copied


async def main(args: argparse.Namespace) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="log-dir-move-bench-") as tmp:
        dirs = [Path(tmp) / "d0", Path(tmp) / "d1"]
        config = LogConfig(segment_bytes=64 * 1024 * 1024, retention_ms=-1)
        manager = LogManager(dirs, config)
        log = manager.get_or_create_log(TP, preferred_dir=dirs[0])
        values = [bytes(VALUE_SIZE)] * BATCH_VALUES
        while log.size < args.megabytes * 1024 * 1024:
            log.append(encode_values(values, timestamp=1), leader_epoch=0)
        replicas = Replicas(manager, {TP: Hosted(log)})
        size = log.size
        free_s, copied = await timed_move(replicas, dirs[1], 1e15)
        assert copied == size
        rate = size / args.seconds
        throttled_s, copied = await timed_move(replicas, dirs[0], rate)
        achieved = copied / throttled_s
        manager.close()
    return {
        "megabytes": round(size / 1e6, 1),
        "unthrottled_mb_per_s": round(size / free_s / 1e6, 1),
        "throttle_bytes_per_s": round(rate),
        "throttled_seconds": round(throttled_s, 2),
        "achieved_bytes_per_s": round(achieved),
        "throttle_error_percent": round((achieved - rate) / rate * 100, 2),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=10.0)
    print(json.dumps(trio.run(main, parser.parse_args())))

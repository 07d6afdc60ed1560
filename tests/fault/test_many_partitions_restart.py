"""A broker holding many empty partitions restarts after kill -9 without filling the disk,
and says how its logs' loading goes.

The offset and time indexes of an active segment are preallocated (segment.index.bytes,
10 MiB) as sparse files. Recovery after a crash once zeroed a reopened index through its
mapping, which wrote the whole preallocation out: 20 MB per empty partition, 40 GB for
2,000 of them, and minutes of writing before the broker even reached ZooKeeper. Disk
per empty partition must stay small (the bar is 64 KB) before and after any restart,
and start-up must log, per log dir, how many logs are loaded and recovered of how many.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

import pytest

from minibroker.protocol.api import ApiKey
from tests.support.cluster import ProcessCluster

pytestmark = [pytest.mark.timeout(180)]

TOPIC = "idle"
PARTITIONS = 200
MAX_BYTES_PER_PARTITION = 64 * 1024
"""The issue's bar for an empty partition (dir, files and what the files take on disk)."""
INDEX_PREALLOCATION = 10 * 1024 * 1024  # segment.index.bytes' default
LOADED = re.compile(r"loaded (\d+)/(\d+) logs in (\S+) \((\d+) recovered\) in [\d.]+ s")


def allocated_bytes(root: Path) -> int:
    """What the tree under ``root`` takes on disk (``du``: blocks, not file sizes). The
    broker writes checkpoints meanwhile (a ``.tmp`` renamed over the old file): one
    gone between listing and looking is skipped, as ``du`` does."""
    total = 0
    for directory, _, files in os.walk(root):
        total += os.stat(directory).st_blocks * 512
        for name in files:
            with contextlib.suppress(FileNotFoundError):
                total += os.stat(os.path.join(directory, name)).st_blocks * 512
    return total


def partition_dirs(log_dir: Path) -> list[Path]:
    return [p for p in log_dir.iterdir() if p.is_dir() and p.name.startswith(f"{TOPIC}-")]


def assert_small_and_sparse(log_dir: Path) -> None:
    dirs = partition_dirs(log_dir)
    assert len(dirs) == PARTITIONS
    per_partition = sum(allocated_bytes(d) for d in dirs) / len(dirs)
    assert per_partition <= MAX_BYTES_PER_PARTITION, per_partition
    for index in log_dir.glob(f"{TOPIC}-*/*.index"):
        # The active segment's index keeps its preallocated size, as a hole.
        stat = index.stat()
        assert stat.st_size == INDEX_PREALLOCATION // 8 * 8
        assert stat.st_blocks * 512 <= MAX_BYTES_PER_PARTITION, index


async def all_led(cluster: ProcessCluster) -> bool:
    response = await cluster.request(
        1, ApiKey.METADATA, {"topics": [{"name": TOPIC}], "allow_auto_topic_creation": False}
    )
    partitions = response["topics"][0]["partitions"]
    return len(partitions) == PARTITIONS and all(p["leader_id"] == 1 for p in partitions)


def load_lines(output: str, log_dir: Path) -> list[tuple[int, int, int]]:
    """(loaded, of, recovered) of each final load line for ``log_dir``, in order."""
    return [
        (int(m[1]), int(m[2]), int(m[4])) for m in LOADED.finditer(output) if m[3] == str(log_dir)
    ]


async def test_a_broker_killed_with_many_empty_partitions_keeps_them_small_and_logs_its_load(
    tmp_path: Path, zk_connect: str
) -> None:
    async with ProcessCluster(tmp_path, zk_connect, size=1) as cluster:
        log_dir = cluster.brokers[1].log_dirs[0]
        await cluster.create_topic(TOPIC, PARTITIONS, 1)
        await cluster.wait_until(lambda: all_led(cluster), "every partition led")
        assert_small_and_sparse(log_dir)

        cluster.kill(1)
        assert_small_and_sparse(log_dir)  # what the crash left
        await cluster.start(1)
        await cluster.wait_until(lambda: all_led(cluster), "every partition led again")
        assert_small_and_sparse(log_dir)  # recovery rebuilt the indexes as holes
        output = cluster.output(1)
        assert f"loading {PARTITIONS} logs in {log_dir} (no clean shutdown" in output
        assert load_lines(output, log_dir)[-1] == (PARTITIONS, PARTITIONS, PARTITIONS)

        assert await cluster.terminate(1) == 0  # a clean stop trims every index
        await cluster.start(1)
        await cluster.wait_until(lambda: all_led(cluster), "every partition led once more")
        assert_small_and_sparse(log_dir)
        output = cluster.output(1)
        assert f"loading {PARTITIONS} logs in {log_dir} (clean shutdown: no recovery)" in output
        assert load_lines(output, log_dir)[-1] == (PARTITIONS, PARTITIONS, 0)

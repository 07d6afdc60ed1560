"""bench/partitions_bench.py end to end on its small run (200 partitions, RF 3, three
brokers): every figure is there, the disk bound holds before and after each restart,
the killed broker recovered every log and said so, and no phase costs ZooKeeper a
request per partition."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = 200  # what --quick runs
FIGURES = (
    "create_s",
    "create_in_sync_s",
    "rss_mb",
    "metadata_ms",
    "metadata_build_all_ms",
    "metadata_encode_kafka_ms",
    "controlled_shutdown_s",
    "shutdown_exit_s",
    "clean_restart_serving_s",
    "kill9_restart_serving_s",
    "kill9_restart_in_sync_s",
    "kill9_restart_load_s",
    "kill9_down_restart_in_sync_s",
    "controller_failover_s",
    "controller_failover_over_session_s",
)

pytestmark = [pytest.mark.timeout(300), pytest.mark.extended]


def test_the_quick_run_measures_every_bar() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "partitions_bench.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=280,
        cwd=ROOT,
        check=True,
    )
    summary = json.loads(done.stdout.strip().splitlines()[-1])["summary"]
    figures = summary[str(PARTITIONS)]
    for name in FIGURES:
        assert isinstance(figures[name], (int, float)) and figures[name] >= 0, name
    for when in ("created", "clean_restart", "kill9_restart"):
        assert 0 < figures[f"disk_kb_per_partition_{when}"] <= 64, when
    assert figures["controlled_shutdown_partitions"] > 0
    assert figures["kill9_recovered_logs"] == PARTITIONS
    assert figures["kill9_progress_lines"] >= 1
    for phase, requests in figures["zk_requests"].items():
        assert 0 < requests < PARTITIONS, phase  # batched: never a request per partition

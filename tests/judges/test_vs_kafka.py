"""bench/vs_kafka.py --quick: Apache Kafka 3.9 and minibroker, one after the other on the
same ports and ZooKeeper, with the same confluent-kafka workloads. The figures are the
bench's business; this checks that the comparison runs and says what it promises: a
JSON line per run, and a last line whose summary has both columns and a ratio for
every workload other tools read (CONTRACTS.md). Not a judge of compatibility: it has
no ``judge`` mark, so docs/compatibility.md does not count it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.broker_process import ROOT, child_env

pytestmark = [pytest.mark.timeout(480), pytest.mark.extended]

REQUIRED = {
    "produce_100b_acks1": "records/s",
    "consume_1kib": "MB/s",
    "produce_1kib_rf3_acksall": "MB/s",
    "e2e_p99_ms_1000rps": "ms",
    "rss_mb_under_load": "MB",
    "restart_to_serving_s": "s",
}
"""The workloads CONTRACTS.md names, with their units."""


def test_quick_comparison_reports_both_brokers_and_their_ratios() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "vs_kafka.py"), "--quick"],
        cwd=ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=460,
        check=False,
    )
    errors = [line for line in done.stderr.splitlines() if "rdkafka" not in line]
    assert done.returncode == 0, "\n".join(errors)[-3000:]  # librdkafka's lines left out
    lines = done.stdout.strip().splitlines()
    runs = [json.loads(line) for line in lines if line.startswith('{"round"')]
    assert sorted(run["system"] for run in runs) == ["kafka", "minibroker"]
    assert "CPU: " in done.stdout and "load average" in done.stdout

    summary = json.loads(lines[-1])["summary"]
    for workload, unit in REQUIRED.items():
        row = summary[workload]
        assert row["unit"] == unit, row
        assert row["minibroker"] > 0 and row["kafka"] > 0, (workload, row)
        assert row["ratio"] == pytest.approx(row["minibroker"] / row["kafka"], rel=0.02)
        assert row["ratio"] > 0

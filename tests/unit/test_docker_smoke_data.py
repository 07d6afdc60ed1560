"""scripts/docker-smoke's data and its check of the Spark report (docker/smoke_check.py):
the smoke's records reach every partition of its topic whatever the sticky partitioner
would do, and a report that misses one says which. No Docker needed."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections import Counter
from pathlib import Path

from minibroker.client.partitioner import partition_for_key

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "scripts" / "docker-smoke"
_spec = importlib.util.spec_from_file_location(
    "docker_smoke_check", ROOT / "docker" / "smoke_check.py"
)
assert _spec is not None and _spec.loader is not None
smoke_check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(smoke_check)

RECORDS = 1000  # the smoke's RECORDS: produced twice, before and after a broker stops
PARTITIONS = 3

REPORT = """minibroker segment report: 6 log dir(s), 9 partition replica(s), 6,000 records
Partitions:
  smoke-0 @ /data/broker-1/logs-0: 339 records in 3 batches, 12.0 KiB; offsets 0..338
  smoke-1 @ broker 2 (/data/broker-2/logs-1): 1,318 records in 4 batches, 30.1 KiB
  smoke-2 @ /data/broker-3/logs-0: 343 records in 3 batches, 12.2 KiB; offsets 0..342
Corruption: none found
"""


def smoke_lines(first: int, last: int) -> list[str]:
    """What the smoke pipes into `minibroker produce`, by running it as the smoke does."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "docker" / "smoke_check.py"), "lines", str(first), str(last)],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    return done.stdout.splitlines()


def test_the_smoke_produces_keyed_records_that_cover_every_partition_in_each_round() -> None:
    smoke = SMOKE.read_text()
    assert "smoke_check.py lines" in smoke and "--key-separator :" in smoke
    for first, last in ((1, RECORDS), (RECORDS + 1, 2 * RECORDS)):
        lines = smoke_lines(first, last)
        keys = [line.split(":", 1)[0].encode() for line in lines]
        values = [line.split(":", 1)[1] for line in lines]

        assert values == [f"record-{n}" for n in range(first, last + 1)]
        spread = Counter(partition_for_key(key, PARTITIONS) for key in keys)
        assert sorted(spread) == list(range(PARTITIONS)), spread
        assert min(spread.values()) > (last - first) / PARTITIONS / 2  # near even, not 1


def test_a_report_with_records_in_every_partition_passes() -> None:
    assert smoke_check.report_problems(REPORT, "smoke", PARTITIONS) == []


def test_a_report_missing_a_partition_names_it() -> None:
    without_0 = "\n".join(line for line in REPORT.splitlines() if "smoke-0" not in line)
    empty_2 = REPORT.replace("343 records", "0 records")
    corrupt = REPORT.replace("Corruption: none found", "Corruption:\n  smoke-1 ...")

    assert smoke_check.report_problems(without_0, "smoke", PARTITIONS) == [
        "no records of smoke-0 on any replica"
    ]
    assert smoke_check.report_problems(empty_2, "smoke", PARTITIONS) == [
        "no records of smoke-2 on any replica"
    ]
    assert smoke_check.report_problems(corrupt, "smoke", PARTITIONS) == [
        "no 'Corruption: none found' line"
    ]

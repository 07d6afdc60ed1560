"""bench/kafka_client_perf.py end to end on a small run: every record it reports went
through a standalone broker's listeners, and it reports the figures the issue asks for
(with the CPU seconds of each side)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]


def test_small_run_reports_produce_consume_and_both_listeners_wire_figures() -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "kafka_client_perf.py"),
            "--num-records",
            "20000",
            "--consume-records",
            "5000",
            "--wire-batch-bytes",
            "65536",
            "--wire-requests",
            "10",
        ],
        capture_output=True,
        text=True,
        timeout=150,
        cwd=ROOT,
        check=True,
    )
    figures = json.loads(done.stdout.strip().splitlines()[-1])

    assert figures["standalone_broker"] is True
    assert figures["produce"]["records"] == 20000
    assert figures["produce"]["records_per_s"] > 0
    assert figures["produce"]["broker_cpu_s"] >= 0
    assert figures["consume"]["records"] == 5000
    assert figures["consume"]["mb_per_s"] > 0
    wire = figures["wire"]
    for listener in ("msgpack", "kafka"):
        assert wire[listener]["produce_mb_s"] > 0
        assert wire[listener]["fetch_mb_s"] > 0
    assert set(wire["kafka_over_msgpack"]) == {"produce_mb_s", "fetch_mb_s"}

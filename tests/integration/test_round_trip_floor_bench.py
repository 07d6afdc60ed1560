"""bench/round_trip_floor.py end to end on a small run: every pairing it can build here
answers every request, and each reports a rate, a time per round trip and the server's
CPU per request that agree with each other."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ROUND_TRIPS = 300

pytestmark = [pytest.mark.timeout(120)]


@pytest.mark.parametrize("same_cpu", [False, True], ids=["as-placed", "same-cpu"])
def test_small_run_reports_each_pairing(same_cpu: bool) -> None:
    command = [sys.executable, str(ROOT / "bench" / "round_trip_floor.py")]
    command += ["--round-trips", str(ROUND_TRIPS)] + (["--same-cpu"] if same_cpu else [])
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=100, cwd=ROOT, check=True
    )
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert figures["round_trips"] == ROUND_TRIPS
    assert figures["same_cpu"] is same_cpu
    pairings = ["trio"]
    if shutil.which("cc") or shutil.which("gcc"):
        pairings += ["c", "trio_server_c_client"]
    else:
        assert figures["c"] == {"skipped": "no C compiler"}
    for name in pairings:
        pairing = figures[name]
        assert pairing["server_cpu_us_per_request"] > 0, name
        # the rate and the time per round trip are two views of one measurement
        product = pairing["round_trips_per_s"] * pairing["us_per_round_trip"] / 1e6
        assert product == pytest.approx(1, rel=0.05), name

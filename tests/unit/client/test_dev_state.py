"""`dev down` and the dev.json state file (no cluster needed: plain processes stand in)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from minibroker.client.cli.dev import ChildInfo, DevState, down, pid_running
from minibroker.client.cli.main import main


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_state_file_round_trips(tmp_path: Path) -> None:
    state = DevState(123, str(tmp_path), ChildInfo("zookeeper", 5, 2181, "zk.log"))
    state.brokers[1] = ChildInfo("broker-1", 6, 9092, "b1.log", 9308)
    state.ready = True
    state.save()
    loaded = DevState.load(tmp_path)
    assert loaded == state
    assert loaded is not None and loaded.bootstrap == "127.0.0.1:9092"


def test_down_without_a_cluster_is_one_line_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["dev", "down", "--data-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no dev cluster recorded" in err


def _orphan() -> int:
    """A sleeping process that is not our child (its parent shell exits at once)."""
    started = subprocess.run(
        ["sh", "-c", "sleep 600 >/dev/null 2>&1 & echo $!"], capture_output=True, check=True
    )
    return int(started.stdout)


@pytest.mark.timeout(60)
def test_down_stops_children_a_dead_supervisor_left_behind(tmp_path: Path) -> None:
    orphan = _orphan()
    try:
        state = DevState(_dead_pid(), str(tmp_path))
        state.brokers[1] = ChildInfo("broker-1", orphan, 9092, "b1.log")
        state.save()
        assert down(tmp_path) == 0
        assert not pid_running(orphan)
        assert not (tmp_path / "dev.json").exists()
    finally:
        if pid_running(orphan):
            os.kill(orphan, signal.SIGKILL)


def test_up_refuses_while_a_recorded_supervisor_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    DevState(os.getpid(), str(tmp_path)).save()  # this test process plays the supervisor
    assert main(["dev", "up", "--data-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert f"already running (pid {os.getpid()})" in err

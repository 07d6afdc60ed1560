"""`dev down|status`, finding the cluster, probing ports and the dev.json state file.

No cluster needed: plain processes stand in.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from minibroker.client.cli.dev import ChildInfo, DevState, down, pid_running
from minibroker.client.cli.dev_ports import check_ports_free, default_kafka_base_port
from minibroker.client.cli.dev_state import (
    DevError,
    find_data_dir,
    forget_location,
    record_location,
    recorded_locations,
    updating_state,
)
from minibroker.command.main import main


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


def test_commands_find_the_only_recorded_cluster_from_any_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MINIBROKER_HOME", str(tmp_path / "home"))
    elsewhere = tmp_path / "somewhere-else"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    data_dir = tmp_path / "cluster"
    data_dir.mkdir()
    with pytest.raises(DevError, match="pass --data-dir DIR"):
        find_data_dir(None)
    DevState(_dead_pid(), str(data_dir)).save()
    record_location(data_dir, tmp_path / "repo")
    assert find_data_dir(None) == data_dir.resolve()
    assert find_data_dir(tmp_path / "explicit") == tmp_path / "explicit"
    forget_location(data_dir)
    assert recorded_locations() == []


def _running_cluster(repo: Path, data_dir: Path, base_port: int) -> DevState:
    """A cluster `dev up` started in ``repo`` (this test process plays its supervisor)."""
    data_dir.mkdir(parents=True)
    state = DevState(os.getpid(), str(data_dir.resolve()), ChildInfo("zookeeper", os.getpid(),
                     base_port - 1, "zk.log"))  # fmt: skip
    for i in (1, 2):
        state.brokers[i] = ChildInfo(
            f"broker-{i}", os.getpid(), base_port + i, "b.log", base_port + 100 + i,
            base_port + 200 + i,
        )  # fmt: skip
    state.save()
    record_location(data_dir, repo)
    return state


def test_two_clones_clusters_each_found_from_its_own_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MINIBROKER_HOME", str(tmp_path / "home"))
    first, second = tmp_path / "clone-1", tmp_path / "clone-2"
    _running_cluster(first, first / ".minibroker", 9092)  # the default data dir
    _running_cluster(second, tmp_path / "elsewhere" / "data", 23092)  # --data-dir elsewhere
    (first / "docs").mkdir()
    (second / "src").mkdir(parents=True)

    monkeypatch.chdir(first / "docs")  # a subdirectory of the first clone
    assert find_data_dir(None).resolve() == (first / ".minibroker").resolve()
    monkeypatch.chdir(second / "src")
    assert find_data_dir(None) == (tmp_path / "elsewhere" / "data").resolve()
    monkeypatch.chdir(tmp_path)  # neither: say so, do not pick one
    with pytest.raises(DevError, match="2 dev clusters are recorded"):
        find_data_dir(None)

    assert main(["dev", "status", "--all", "--format", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert sorted((c["data_dir"], c["running"], c["zookeeper"]["port"]) for c in listed) == [
        (str((first / ".minibroker").resolve()), True, 9091),
        (str((tmp_path / "elsewhere" / "data").resolve()), True, 23091),
    ]
    assert main(["dev", "status", "--all"]) == 0
    table = capsys.readouterr().out
    assert "23093,23094" in table and "23293,23294" in table and "9193,9194" in table

    forget_location(first / ".minibroker")  # what the first cluster's `dev down` does
    assert [r.data_dir for r in recorded_locations()] == [
        (tmp_path / "elsewhere" / "data").resolve()
    ]


def test_up_names_the_cluster_that_holds_a_port_it_wants(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MINIBROKER_HOME", str(tmp_path / "home"))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        _running_cluster(tmp_path / "clone-1", tmp_path / "clone-1" / ".minibroker", port + 1)
        with pytest.raises(DevError, match=r"the dev cluster in .*clone-1/\.minibroker has it"):
            check_ports_free(_up_args(port))


def test_status_reports_each_process_and_whether_it_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = DevState(os.getpid(), str(tmp_path), ChildInfo("zookeeper", os.getpid(), 2181, "z"))
    state.brokers[1] = ChildInfo("broker-1", os.getpid(), 9092, "b1.log", 9308)
    state.brokers[2] = ChildInfo("broker-2", _dead_pid(), 9093, "b2.log", 9309)
    state.save()
    assert main(["dev", "status", "--data-dir", str(tmp_path), "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["supervisor"] == {"pid": os.getpid(), "alive": True}
    assert report["zookeeper"]["alive"] is True
    assert [(b["id"], b["port"], b["metrics_port"], b["alive"]) for b in report["brokers"]] == [
        (1, 9092, 9308, True),
        (2, 9093, 9309, False),
    ]
    assert main(["dev", "status", "--data-dir", str(tmp_path)]) == 0
    table = capsys.readouterr().out
    assert "broker-2" in table and " no " in table


def test_a_broker_the_cluster_does_not_have_is_one_line_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    DevState(_dead_pid(), str(tmp_path)).save()
    assert main(["dev", "start-broker", "7", "--data-dir", str(tmp_path)]) == 1
    assert "has no broker 7" in capsys.readouterr().err


def test_a_port_in_time_wait_is_free_for_the_next_up() -> None:
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        accepted, _ = listener.accept()
        accepted.close()  # the server side closes first: its port enters TIME_WAIT
        client.close()
        with pytest.raises(DevError, match=f"port {port} \\(ZooKeeper\\) is in use"):
            check_ports_free(_up_args(port))
    check_ports_free(_up_args(port))


def test_up_serves_kafkas_protocol_10000_above_its_own_ports_unless_those_are_any() -> None:
    assert default_kafka_base_port(9092, brokers=3) == 19092  # 19092, 19093, 19094
    assert default_kafka_base_port(9192, brokers=1) == 19192
    assert default_kafka_base_port(0, brokers=3) is None  # any msgpack port: no fixed Kafka one
    assert default_kafka_base_port(55533, brokers=3) == 65533  # up to 65535
    assert default_kafka_base_port(55534, brokers=3) is None  # 65536 would be out of range


def _up_args(zookeeper_port: int) -> argparse.Namespace:
    return argparse.Namespace(
        zookeeper_port=zookeeper_port,
        brokers=1,
        base_port=0,
        metrics_base_port=0,
        kafka_base_port=None,
    )


def _lock_waiters() -> int:
    """Processes blocked on a file lock now (/proc/locks marks them with "->")."""
    return Path("/proc/locks").read_text().count("->")


def test_concurrent_updates_keep_both_changes(tmp_path: Path) -> None:
    """Two `dev start-broker` at once: each records its broker's pid under the lock, so
    the later writer does not put back the other broker's old pid."""
    state = DevState(1, str(tmp_path), ChildInfo("zookeeper", 5, 2181, "zk.log"))
    state.brokers[1] = ChildInfo("broker-1", 10, 9092, "b1.log")
    state.brokers[2] = ChildInfo("broker-2", 20, 9093, "b2.log")
    state.save()
    other = (
        "import sys; from pathlib import Path;"
        "from minibroker.client.cli.dev_state import updating_state\n"
        "with updating_state(Path(sys.argv[1])) as s:\n"
        "    s.brokers[2].pid = 222\n"
    )
    with updating_state(tmp_path) as mine:
        waiters = _lock_waiters()
        writer = subprocess.Popen([sys.executable, "-c", other, str(tmp_path)])
        deadline = time.monotonic() + 20
        while _lock_waiters() == waiters:  # until the other writer waits for our lock
            assert writer.poll() is None, "the other writer did not wait for the lock"
            assert time.monotonic() < deadline, "the other writer never reached the lock"
            time.sleep(0.01)
        mine.brokers[1].pid = 111
    assert writer.wait(timeout=20) == 0
    loaded = DevState.load(tmp_path)
    assert loaded is not None
    assert (loaded.brokers[1].pid, loaded.brokers[2].pid) == (111, 222)

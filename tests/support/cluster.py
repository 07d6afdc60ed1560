"""A real local cluster for tests: ZooKeeper + N broker processes, via `minibroker dev up`.

``LocalCluster(data_dir, brokers=3).start()`` runs ``python -m client.cli.main dev up``
with every port 0 (free ports, so parallel runs never collide) and waits until its
``dev.json`` says ready: a controller is active and every broker registered. The test
then talks to ``cluster.bootstrap``; ``cluster.cli(...)`` runs CLI commands against it;
``kill_broker`` takes a broker away (SIGKILL, or SIGTERM for a clean stop),
``pause_broker`` / ``resume_broker`` freeze it (SIGSTOP / SIGCONT) and ``restart_broker``
starts it again on the same port and log dirs (that process belongs to this object, not
to the supervisor). ``stop()`` stops the supervisor (which stops brokers, then
ZooKeeper), then the restarted brokers, and afterwards kills, by pid, any child the
dev.json lists that is still alive, so no process outlives a failed test.

Fixtures: ``local_cluster`` (a fresh 3-broker cluster per test module, since a
ZooKeeper JVM plus three brokers take a few seconds to start). Import it into a
conftest.py or a test module to use it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 120.0  # a JVM start and broker registration on a loaded CI machine
STOP_TIMEOUT_S = 90.0  # the supervisor's own SIGTERM -> SIGKILL ladder fits in this
# Fast failure detection for fault drills: a killed broker's ZooKeeper session (and so
# its leadership) ends after this long instead of Kafka's 18 s default.
TEST_BROKER_PROPERTIES = ("zookeeper.session.timeout.ms=6000",)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")


class LocalCluster:
    """ZooKeeper and N brokers as child processes of one `dev up` supervisor."""

    def __init__(self, data_dir: Path, brokers: int = 3, properties: tuple[str, ...] = ()) -> None:
        self.data_dir = data_dir
        self.brokers = brokers
        self.properties = TEST_BROKER_PROPERTIES + properties
        self.process: subprocess.Popen[bytes] | None = None
        self.state: dict[str, Any] = {}
        self.restarted: dict[int, subprocess.Popen[bytes]] = {}  # brokers we started again

    # --- lifecycle -------------------------------------------------------------------

    def start(self) -> LocalCluster:
        argv = [
            sys.executable,
            "-m",
            "client.cli.main",
            "dev",
            "up",
            "--brokers",
            str(self.brokers),
            "--data-dir",
            str(self.data_dir),
            "--base-port",
            "0",
            "--zookeeper-port",
            "0",
            "--metrics-base-port",
            "0",
        ]
        for item in self.properties:
            argv += ["--set", item]
        self.data_dir.mkdir(parents=True, exist_ok=True)
        out = (self.data_dir / "dev-up.out").open("ab")
        self.process = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env=_env(),
            start_new_session=True,  # a test run's Ctrl-C reaches pytest, which cleans up
        )
        out.close()
        deadline = time.monotonic() + START_TIMEOUT_S
        try:
            while time.monotonic() < deadline:
                self.state = self._read_state()
                if self.state.get("ready"):
                    return self
                if self.process.poll() is not None:
                    raise RuntimeError(
                        f"dev up exited ({self.process.returncode}): {self.output()}"
                    )
                time.sleep(0.2)
            raise RuntimeError(f"cluster not ready in {START_TIMEOUT_S:g} s: {self.output()}")
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop everything; children left by a crashed supervisor are killed by pid."""
        state = self.state or self._read_state()
        for broker in self.restarted.values():
            if broker.poll() is None:
                broker.send_signal(signal.SIGTERM)
                try:
                    broker.wait(timeout=STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    broker.kill()
                    broker.wait()
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for pid in self._child_pids(state):
            if _alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- what tests use ---------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{b['port']}" for _, b in sorted(self.state["brokers"].items()))

    def broker_port(self, broker_id: int) -> int:
        port: int = self.state["brokers"][str(broker_id)]["port"]
        return port

    def broker_pid(self, broker_id: int) -> int:
        pid: int = self.state["brokers"][str(broker_id)]["pid"]
        return pid

    def kill_broker(self, broker_id: int, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to a broker and wait for it to exit (SIGTERM = clean stop)."""
        pid = self.broker_pid(broker_id)
        os.kill(pid, sig)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)

    def pause_broker(self, broker_id: int) -> None:
        os.kill(self.broker_pid(broker_id), signal.SIGSTOP)

    def resume_broker(self, broker_id: int) -> None:
        os.kill(self.broker_pid(broker_id), signal.SIGCONT)

    def restart_broker(self, broker_id: int) -> None:
        """Start a (killed or stopped) broker again: same id, port and log dirs."""
        if _alive(self.broker_pid(broker_id)):
            raise RuntimeError(f"broker {broker_id} is still running")
        home = self.data_dir / f"broker-{broker_id}"
        log = Path(self.state["brokers"][str(broker_id)]["log"])
        offset = log.stat().st_size if log.exists() else 0
        argv = [
            sys.executable,
            "-m",
            "client.cli.main",
            "broker",
            "--broker-id",
            str(broker_id),
            "--listen",
            f"127.0.0.1:{self.broker_port(broker_id)}",
            "--log-dirs",
            f"{home / 'logs-0'},{home / 'logs-1'}",
            "--zookeeper",
            f"127.0.0.1:{self.state['zookeeper']['port']}",
            "--metrics-port",
            "0",
        ]
        for item in self.properties:
            argv += ["--set", item]
        with log.open("ab") as out:
            process = subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=ROOT,
                env=_env(),
                start_new_session=True,
            )
        self.restarted[broker_id] = process
        self.state["brokers"][str(broker_id)]["pid"] = process.pid
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            with log.open("rb") as f:
                f.seek(offset)
                if b"listening on port" in f.read():
                    return
            if process.poll() is not None:
                raise RuntimeError(f"broker {broker_id} exited ({process.returncode}); see {log}")
            time.sleep(0.1)
        raise RuntimeError(f"broker {broker_id} did not start again in time; see {log}")

    def cli(
        self, *args: str, stdin: bytes | None = None, timeout: float = 60, bootstrap: bool = True
    ) -> subprocess.CompletedProcess[bytes]:
        """Run ``minibroker ARGS [--bootstrap-server <this cluster>]``; never raises on rc."""
        argv = [sys.executable, "-m", "client.cli.main", *args]
        if bootstrap:
            argv += ["--bootstrap-server", self.bootstrap]
        return subprocess.run(
            argv, input=stdin, capture_output=True, timeout=timeout, cwd=ROOT, env=_env()
        )

    def output(self) -> str:
        with contextlib.suppress(OSError):
            return (self.data_dir / "dev-up.out").read_text()[-2000:]
        return ""

    # --- internals ---------------------------------------------------------------------

    def _read_state(self) -> dict[str, Any]:
        try:
            state: dict[str, Any] = json.loads((self.data_dir / "dev.json").read_text())
        except (OSError, ValueError):
            return {}
        return state

    @staticmethod
    def _child_pids(state: dict[str, Any]) -> list[int]:
        pids = [b["pid"] for b in state.get("brokers", {}).values()]
        if state.get("zookeeper"):
            pids.append(state["zookeeper"]["pid"])
        return pids


@pytest.fixture(scope="module")
def local_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A 3-broker cluster shared by one test module (tests use their own topics)."""
    with LocalCluster(tmp_path_factory.mktemp("cluster")) as cluster:
        yield cluster

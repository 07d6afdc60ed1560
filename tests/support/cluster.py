"""Clusters of broker processes for tests; every broker process is a ``BrokerProcess``
(tests/support/broker_process.py) or a child of ``minibroker dev up``.

``ProcessCluster(root, zk_connect, size=3)``: N brokers over a ZooKeeper the test already
has (the ``zk_connect`` fixture's chroot), driven from async tests, fault tests and
benches. Broker ``i`` logs to ``<root>/broker-<i>/logs`` and prints to
``<root>/broker-<i>.out``. Faults: ``kill`` (SIGKILL), ``pause`` / ``resume`` (SIGSTOP /
SIGCONT), ``terminate`` (SIGTERM, controlled shutdown), and ``start`` again on the same
port. Requests go through ``client.connection.Connection`` to one broker. ``close()``
kills whatever still runs, so a failing test leaves no process behind.

``LocalCluster(data_dir, brokers=3).start()`` runs ``python -m minibroker dev up``
with every port 0 (free ports, so parallel runs never collide) and waits until its
``dev.json`` says ready: a controller is active and every broker registered. The test
then talks to ``cluster.bootstrap``; ``cluster.cli(...)`` runs CLI commands against it;
``kill_broker`` takes a broker away (SIGKILL, or SIGTERM for a clean stop),
``pause_broker`` / ``resume_broker`` freeze it (SIGSTOP / SIGCONT) and ``restart_broker``
starts it again on the same port and log dirs (that process belongs to this object, not
to the supervisor). ``stop()`` stops the restarted brokers, then the supervisor (which
stops brokers, then ZooKeeper), and afterwards kills, by pid, any child the dev.json
lists that is still alive, so no process outlives a failed test.

``LocalCluster(..., kafka_listeners=True)`` also gives every broker a Kafka-protocol
listener; Kafka clients (kcat, kafka-python) then use ``cluster.kafka_bootstrap``.

Fixtures: ``local_cluster`` (a fresh 3-broker LocalCluster per test module, since a
ZooKeeper JVM plus three brokers take a few seconds to start). Import it into a
conftest.py or a test module to use it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import trio

from minibroker.client.cli.dev import pid_running
from minibroker.net.connection import Connection
from minibroker.protocol.api import ApiKey
from tests.support.broker_process import ROOT, STOP_TIMEOUT_S, BrokerProcess, child_env
from tests.support.cli import cli_command

# Fast failure detection for fault drills: a killed broker's ZooKeeper session (and so
# its leadership) ends after 4 s instead of Kafka's 18 s default, a stopped follower
# leaves the ISR after 3 s, and fetches and controlled-shutdown retries come back quickly.
FAULT_PROPERTIES: dict[str, Any] = {
    "zookeeper.session.timeout.ms": 4000,
    "replica.fetch.backoff.ms": 100,
    "replica.fetch.wait.max.ms": 200,
    "replica.lag.time.max.ms": 3000,
    "controlled.shutdown.retry.backoff.ms": 200,
}
# The `dev up` brokers only get the shorter session (6 s), as they always have: the two
# sets stay apart so that neither group of tests changes its timing.
LOCAL_PROPERTIES = ("zookeeper.session.timeout.ms=6000",)
LOCAL_START_TIMEOUT_S = 120.0  # a JVM start and broker registration on a loaded CI machine
LOCAL_STOP_TIMEOUT_S = 90.0  # the supervisor's own SIGTERM -> SIGKILL ladder fits in this


class ProcessCluster:
    """N ``BrokerProcess``es (ids 1..N) over one ZooKeeper connect string."""

    def __init__(
        self, root: Path, zk_connect: str, *, size: int = 3, properties: Mapping[str, Any] = {}
    ) -> None:
        self.root = root
        self.zk_connect = zk_connect
        self.properties = {**FAULT_PROPERTIES, **properties}
        settings = tuple(f"{key}={value}" for key, value in self.properties.items())
        self.brokers = {
            i: BrokerProcess(
                i, [root / f"broker-{i}" / "logs"], zk_connect, root / f"broker-{i}.out", settings
            )
            for i in range(1, size + 1)
        }

    # -- processes --------------------------------------------------------------------

    async def start_all(self) -> None:
        async with trio.open_nursery() as nursery:
            for broker in self.brokers.values():
                nursery.start_soon(broker.start)

    async def start(self, broker_id: int) -> None:
        await self.brokers[broker_id].start()

    def output(self, broker_id: int) -> str:
        return self.brokers[broker_id].output()

    def kill(self, broker_id: int) -> None:
        self.brokers[broker_id].kill()

    def pause(self, broker_id: int) -> None:
        self.brokers[broker_id].pause()

    def resume(self, broker_id: int) -> None:
        self.brokers[broker_id].resume()

    async def terminate(self, broker_id: int, timeout: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM (controlled shutdown), SIGKILL after ``timeout``; the exit code."""
        return await trio.to_thread.run_sync(self.brokers[broker_id].stop, timeout)

    def close(self) -> None:
        for broker in self.brokers.values():
            broker.kill()

    async def __aenter__(self) -> ProcessCluster:
        """``async with ProcessCluster(...) as cluster``: every broker started, and
        every one killed on the way out, whatever happened."""
        try:
            await self.start_all()
        except BaseException:
            self.close()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    @property
    def live(self) -> list[int]:
        return [i for i, b in self.brokers.items() if b.running and not b.paused]

    # -- requests ---------------------------------------------------------------------

    def address(self, broker_id: int) -> tuple[str, int]:
        """Where this test process reaches the broker."""
        return "127.0.0.1", self.brokers[broker_id].port

    async def request(
        self, broker_id: int, api_key: ApiKey, body: dict[str, Any], timeout: float = 10.0
    ) -> Any:
        async with Connection(*self.address(broker_id), connect_timeout=timeout) as conn:
            return await conn.request(api_key, body, timeout=timeout)

    async def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        configs: Mapping[str, str] = {},
        *,
        assignment: Mapping[int, list[int]] | None = None,
    ) -> None:
        """CreateTopics; ``assignment`` (partition -> replicas) replaces the counts."""
        topic: dict[str, Any] = {
            "name": name,
            "num_partitions": partitions,
            "replication_factor": replication_factor,
            "configs": [{"name": k, "value": v} for k, v in configs.items()],
        }
        if assignment is not None:
            topic.update(
                num_partitions=-1,
                replication_factor=-1,
                assignments=[
                    {"partition_index": p, "broker_ids": r} for p, r in assignment.items()
                ],
            )
        body = {
            "topics": [topic],
            "timeout_ms": 20_000,
        }
        response = await self.request(self.live[0], ApiKey.CREATE_TOPICS, body, timeout=30)
        assert response["topics"][0]["error_code"] == 0, response

    async def metadata(self, topic: str) -> dict[str, Any]:
        """The topic's Metadata answer from the first live broker that answers."""
        last: Exception | None = None
        for broker_id in self.live:
            try:
                response = await self.request(
                    broker_id,
                    ApiKey.METADATA,
                    {"topics": [{"name": topic}], "allow_auto_topic_creation": False},
                )
            except Exception as exc:  # a broker going down mid-test: ask another
                last = exc
                continue
            topic_metadata: dict[str, Any] = response["topics"][0]
            return topic_metadata
        raise AssertionError(f"no broker answered Metadata: {last!r}")

    async def wait_until(self, condition: Any, what: str, timeout: float = 30.0) -> None:
        """Await ``condition()`` (async) until true; state lives in other processes."""
        with trio.move_on_after(timeout):
            while not await condition():
                await trio.sleep(0.1)
            return
        raise AssertionError(f"timed out waiting for {what}")


class LocalCluster:
    """ZooKeeper and N brokers as child processes of one `dev up` supervisor."""

    def __init__(
        self,
        data_dir: Path,
        brokers: int = 3,
        properties: tuple[str, ...] = (),
        *,
        kafka_listeners: bool = False,
        secure: bool = False,
        command: list[str] | None = None,
        cwd: Path = ROOT,
        env: dict[str, str] | None = None,
    ) -> None:
        """``secure``: `dev up --secure` (SASL_SSL, ACLs; ``client_properties`` logs in).
        ``command`` replaces ``minibroker dev up`` (a script that ends in it: the flags
        are appended), run in ``cwd`` with ``env`` (default: this checkout's)."""
        self.command = command
        self.cwd = cwd
        self.env = env
        self.data_dir = data_dir
        self.secure = secure
        self.brokers = brokers
        self.kafka_listeners = kafka_listeners  # each broker also speaks Kafka's protocol
        self.properties = LOCAL_PROPERTIES + properties
        self.process: subprocess.Popen[bytes] | None = None
        self.state: dict[str, Any] = {}
        self.restarted: dict[int, BrokerProcess] = {}  # brokers we started again

    # --- lifecycle -------------------------------------------------------------------

    def start(self) -> LocalCluster:
        argv = self.command or cli_command("dev", "up")
        argv = [
            *argv,
            *("--brokers", str(self.brokers), "--data-dir", str(self.data_dir)),
            *("--base-port", "0", "--zookeeper-port", "0", "--metrics-base-port", "0"),
        ]
        if self.kafka_listeners:
            argv += ["--kafka-base-port", "0"]
        if self.secure:
            argv += ["--secure"]
        for item in self.properties:
            argv += ["--set", item]
        self.data_dir.mkdir(parents=True, exist_ok=True)
        out = (self.data_dir / "dev-up.out").open("ab")
        # `dev up` records where it runs under MINIBROKER_HOME: not the user's home
        env = self.env or child_env() | {"MINIBROKER_HOME": str(self.data_dir / "home")}
        self.process = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=self.cwd,
            env=env,
            start_new_session=True,  # a test run's Ctrl-C reaches pytest, which cleans up
        )
        out.close()
        deadline = time.monotonic() + LOCAL_START_TIMEOUT_S
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
            raise RuntimeError(f"cluster not ready in {LOCAL_START_TIMEOUT_S:g} s: {self.output()}")
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop everything; children left by a crashed supervisor are killed by pid."""
        state = self.state or self._read_state()
        for broker in self.restarted.values():
            broker.stop(LOCAL_STOP_TIMEOUT_S)
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=LOCAL_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for pid in self._child_pids(state):
            if pid_running(pid):
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

    @property
    def kafka_bootstrap(self) -> str:
        """Kafka clients' bootstrap.servers (the cluster was started with kafka_listeners)."""
        brokers = sorted(self.state["brokers"].items())
        return ",".join(f"127.0.0.1:{b['kafka_port']}" for _, b in brokers)

    @property
    def client_properties(self) -> dict[str, str]:
        """The admin login `dev up --secure` wrote (Kafka's client property names)."""
        from minibroker.client.security import read_command_config

        return read_command_config(self.state["client_config"])

    def broker_port(self, broker_id: int) -> int:
        port: int = self.state["brokers"][str(broker_id)]["port"]
        return port

    def broker_pid(self, broker_id: int) -> int:
        pid: int = self.state["brokers"][str(broker_id)]["pid"]
        return pid

    def kill_broker(self, broker_id: int, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to a broker and wait for it to exit (SIGTERM = clean stop)."""
        os.kill(self.broker_pid(broker_id), sig)
        deadline = time.monotonic() + LOCAL_STOP_TIMEOUT_S
        while pid_running(self.broker_pid(broker_id)) and time.monotonic() < deadline:
            time.sleep(0.05)

    def pause_broker(self, broker_id: int) -> None:
        os.kill(self.broker_pid(broker_id), signal.SIGSTOP)

    def resume_broker(self, broker_id: int) -> None:
        os.kill(self.broker_pid(broker_id), signal.SIGCONT)

    async def restart_broker(self, broker_id: int) -> None:
        """Start a (killed or stopped) broker again: same id, port and log dirs."""
        if pid_running(self.broker_pid(broker_id)):
            raise RuntimeError(f"broker {broker_id} is still running")
        info = self.state["brokers"][str(broker_id)]
        home = self.data_dir / f"broker-{broker_id}"
        broker = self.restarted.setdefault(
            broker_id,
            BrokerProcess(
                broker_id,
                [home / "logs-0", home / "logs-1"],
                f"127.0.0.1:{self.state['zookeeper']['port']}",
                Path(info["log"]),
                self.properties,
                metrics_port=0,
                start_timeout=LOCAL_START_TIMEOUT_S,
                port=info["port"],
            ),
        )
        await broker.start()
        assert broker.proc is not None
        info["pid"] = broker.proc.pid

    def cli(
        self, *args: str, stdin: bytes | None = None, timeout: float = 60, bootstrap: bool = True
    ) -> subprocess.CompletedProcess[bytes]:
        """Run ``minibroker ARGS [--bootstrap-server <this cluster>]``; never raises on rc.

        Bytes in and out, unlike ``tests.support.cli.run_cli_sync``: its callers feed
        binary keys on stdin and decode the output themselves."""
        argv = cli_command(*args, bootstrap=self.bootstrap if bootstrap else None)
        return subprocess.run(
            argv, input=stdin, capture_output=True, timeout=timeout, cwd=ROOT, env=child_env()
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

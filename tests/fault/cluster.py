"""A cluster of broker subprocesses over a real ZooKeeper, for fault tests and benches.

Each broker is ``python -m client.cli.main broker`` in its own process group, with its
output in ``<root>/broker-<id>.out``; its port is read from the line it prints once it
listens and kept for restarts (so metadata held elsewhere stays right). Faults are
signals: ``kill`` (SIGKILL, the files stay as they were), ``pause`` / ``resume``
(SIGSTOP / SIGCONT), ``terminate`` (SIGTERM: controlled shutdown, clean stop).
``close`` kills whatever still runs (resuming paused ones first), so a failing test
leaves no process behind.

Cluster requests go through ``client.connection.Connection``; ``leader_of`` and
``isr_of`` read the partition state znodes through ``controller.zk_data``.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from client.connection import Connection
from protocol.api import ApiKey

ROOT = Path(__file__).resolve().parents[2]
READY = re.compile(r"broker (\d+) listening on port (\d+)")
START_TIMEOUT_S = 30.0
"""A broker starts in well under a second; loaded CI machines and log recovery add up."""
RESTART_ATTEMPTS = 20
"""After kill -9 the old ZooKeeper session holds /brokers/ids/N until it times out; a
restart that loses that race exits and is tried again (bounded)."""

TEST_PROPERTIES: dict[str, Any] = {
    "zookeeper.session.timeout.ms": 4000,
    "replica.fetch.backoff.ms": 100,
    "replica.fetch.wait.max.ms": 200,
    "replica.lag.time.max.ms": 3000,
    "controlled.shutdown.retry.backoff.ms": 200,
}


@dataclass
class BrokerProcess:
    broker_id: int
    log_dir: Path
    out_path: Path
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    paused: bool = False

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class ProcessCluster:
    def __init__(
        self, root: Path, zk_connect: str, *, size: int = 3, properties: Mapping[str, Any] = {}
    ) -> None:
        self.root = root
        self.zk_connect = zk_connect
        self.properties = {**TEST_PROPERTIES, **properties}
        self.brokers = {
            i: BrokerProcess(i, root / f"broker-{i}" / "logs", root / f"broker-{i}.out")
            for i in range(1, size + 1)
        }

    # -- processes --------------------------------------------------------------------

    async def start_all(self) -> None:
        async with trio.open_nursery() as nursery:
            for broker_id in self.brokers:
                nursery.start_soon(self.start, broker_id)

    async def start(self, broker_id: int) -> None:
        broker = self.brokers[broker_id]
        for _ in range(RESTART_ATTEMPTS):
            if await self._spawn(broker):
                return
            await trio.sleep(0.5)
        raise AssertionError(f"broker {broker_id} did not start: {self.output(broker_id)[-2000:]}")

    async def _spawn(self, broker: BrokerProcess) -> bool:
        args = [
            sys.executable,
            "-m",
            "client.cli.main",
            "broker",
            "--broker-id",
            str(broker.broker_id),
            "--listen",
            f"127.0.0.1:{broker.port}",
            "--log-dirs",
            str(broker.log_dir),
            "--zookeeper",
            self.zk_connect,
        ]
        for key, value in self.properties.items():
            args += ["--set", f"{key}={value}"]
        broker.out_path.parent.mkdir(parents=True, exist_ok=True)
        with broker.out_path.open("ab") as out:
            broker.proc = subprocess.Popen(
                args,
                cwd=ROOT,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        broker.paused = False
        start = broker.out_path.stat().st_size if broker.out_path.exists() else 0
        with trio.move_on_after(START_TIMEOUT_S):
            while broker.proc.poll() is None:
                text = broker.out_path.read_bytes()[start:].decode(errors="replace")
                found = READY.search(text)
                if found:
                    broker.port = int(found.group(2))
                    return True
                await trio.sleep(0.05)
            return False  # it exited (e.g. its old registration is still there)
        self.kill(broker.broker_id)
        return False

    def output(self, broker_id: int) -> str:
        path = self.brokers[broker_id].out_path
        return path.read_text(errors="replace") if path.exists() else ""

    def kill(self, broker_id: int) -> None:
        broker = self.brokers[broker_id]
        if broker.proc is not None and broker.proc.poll() is None:
            broker.proc.send_signal(signal.SIGKILL)
            broker.proc.wait()
        broker.paused = False

    def pause(self, broker_id: int) -> None:
        broker = self.brokers[broker_id]
        assert broker.proc is not None
        broker.proc.send_signal(signal.SIGSTOP)
        broker.paused = True

    def resume(self, broker_id: int) -> None:
        broker = self.brokers[broker_id]
        assert broker.proc is not None
        broker.proc.send_signal(signal.SIGCONT)
        broker.paused = False

    async def terminate(self, broker_id: int, timeout: float = 30.0) -> int | None:
        broker = self.brokers[broker_id]
        assert broker.proc is not None
        broker.proc.send_signal(signal.SIGTERM)
        proc = broker.proc
        with trio.move_on_after(timeout):
            while proc.poll() is None:
                await trio.sleep(0.05)
        if proc.poll() is None:
            self.kill(broker_id)
        return proc.returncode

    def close(self) -> None:
        for broker in self.brokers.values():
            if broker.proc is not None and broker.proc.poll() is None:
                if broker.paused:
                    broker.proc.send_signal(signal.SIGCONT)
                broker.proc.send_signal(signal.SIGKILL)
                broker.proc.wait()

    @property
    def live(self) -> list[int]:
        return [i for i, b in self.brokers.items() if b.running and not b.paused]

    # -- requests ---------------------------------------------------------------------

    async def request(
        self, broker_id: int, api_key: ApiKey, body: dict[str, Any], timeout: float = 10.0
    ) -> Any:
        port = self.brokers[broker_id].port
        async with Connection("127.0.0.1", port, connect_timeout=timeout) as conn:
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
                    broker_id, ApiKey.METADATA, {"topics": [{"name": topic}]}
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

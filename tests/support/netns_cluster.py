"""A broker cluster on a private network of namespaces, for network-fault tests.

``NetnsCluster(root, size=3)`` is a ``ProcessCluster`` (tests/support/cluster.py: start,
kill, pause, resume, terminate, request, metadata, create_topic, wait_until) whose
ZooKeeper and brokers each run in their own network namespace of a
``tests.support.netns.Network``, with nodes ``zk``, ``b1`` .. ``bN`` and ``client``.
Broker ``i`` listens on ``<its address>:9092`` and so advertises that address;
ZooKeeper listens on ``<zk's address>:2181``.

The test process stays in the root namespace. It reaches every broker (its Kafka port
and its metrics port) and ZooKeeper through a gateway (tests/support/netns_gateway.py)
whose connections leave from the ``client`` namespace: ``address(broker_id)``,
``metrics_address(broker_id)`` and ``zk_connect_local`` are those loopback ports. So
every request the test makes is, for the network, a client's request, and a fault that
cuts the client off a broker cuts the test's requests too.

Network faults take broker ids or the names ``"zk"`` and ``"client"``: ``cut(a, b)`` (one
way), ``partition(groups)``, ``isolate(node)``, ``slow(node, ms, loss)``, ``heal()``.

``start_all()`` builds the network, then starts ZooKeeper, the gateway and the brokers;
``close()`` kills every process and deletes every namespace, so a failing test leaves
nothing behind.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import urllib.request
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import trio

from tests.support.broker_process import ROOT, child_env
from tests.support.cluster import ProcessCluster
from tests.support.netns import Network

BROKER_PORT = 9092  # every broker has its own address, so all can use Kafka's port
METRICS_PORT = 9404
ZK_PORT = 2181
ZK_START_TIMEOUT_S = 60.0  # a cold JVM on a loaded two-core machine
METRICS_TIMEOUT_S = 5.0

Node = int | str
"""A broker id, or "zk" / "client"."""


def node_name(node: Node) -> str:
    return f"b{node}" if isinstance(node, int) else node


class NetnsCluster(ProcessCluster):
    def __init__(
        self,
        root: Path,
        *,
        size: int = 3,
        properties: Mapping[str, Any] = {},
        rng: random.Random | None = None,
    ) -> None:
        self.network = Network(
            ["zk", *(node_name(i) for i in range(1, size + 1)), "client"], rng=rng
        )
        zk_host = self.network.addresses["zk"]
        super().__init__(root, f"{zk_host}:{ZK_PORT}", size=size, properties=properties)
        for broker_id, broker in self.brokers.items():
            broker.listen_host = self.network.addresses[node_name(broker_id)]
            broker.port = BROKER_PORT
            broker.metrics_port = METRICS_PORT
            broker.command_prefix = self.network.exec_prefix(node_name(broker_id))
        self.zookeeper: subprocess.Popen[bytes] | None = None
        self.gateway: subprocess.Popen[bytes] | None = None
        self._local: dict[str, int] = {}

    # -- processes --------------------------------------------------------------------

    async def start_all(self) -> None:
        await trio.to_thread.run_sync(self.network.create)
        await self._start_zookeeper()
        await trio.to_thread.run_sync(self._start_gateway)
        await super().start_all()

    async def _start_zookeeper(self) -> None:
        out_path = self.root / "zookeeper.out"
        self.root.mkdir(parents=True, exist_ok=True)
        argv = [
            *self.network.exec_prefix("zk"),
            *(sys.executable, "-m", "minibroker", "zookeeper"),
            *("--host", self.network.addresses["zk"], "--port", str(ZK_PORT)),
            *("--data-dir", str(self.root / "zookeeper")),
        ]
        with out_path.open("ab") as out:
            self.zookeeper = subprocess.Popen(
                argv, cwd=ROOT, env=child_env(), stdout=out, stderr=subprocess.STDOUT
            )
        with trio.move_on_after(ZK_START_TIMEOUT_S):
            while self.zookeeper.poll() is None:
                if b"ZooKeeper running" in out_path.read_bytes():
                    return
                await trio.sleep(0.1)
        raise AssertionError(f"ZooKeeper did not start: {out_path.read_text()[-2000:]}")

    def _start_gateway(self) -> None:
        targets = [f"{self.network.addresses['zk']}:{ZK_PORT}"]
        for broker_id in self.brokers:
            host = self.network.addresses[node_name(broker_id)]
            targets += [f"{host}:{BROKER_PORT}", f"{host}:{METRICS_PORT}"]
        argv = [
            *(sys.executable, "-m", "tests.support.netns_gateway"),
            *("--netns", self.network.namespace("client"), *targets),
        ]
        self.gateway = subprocess.Popen(argv, cwd=ROOT, env=child_env(), stdout=subprocess.PIPE)
        assert self.gateway.stdout is not None
        line = self.gateway.stdout.readline()
        if not line:
            raise AssertionError("the gateway into the client namespace did not start")
        self._local = json.loads(line)

    def close(self) -> None:
        super().close()
        for process in (self.zookeeper, self.gateway):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
        self.network.destroy()

    def client_process(self, argv: list[str], **popen: Any) -> subprocess.Popen[bytes]:
        """Start ``argv`` inside the client namespace (killed by ``close()`` at the latest)."""
        argv = [*self.network.exec_prefix("client"), *argv]
        return subprocess.Popen(argv, cwd=ROOT, env=child_env(), **popen)

    @property
    def bootstrap(self) -> str:
        """The brokers' own addresses: for clients inside the client namespace."""
        return ",".join(
            f"{self.network.addresses[node_name(b)]}:{BROKER_PORT}" for b in self.brokers
        )

    # -- where the test process reaches things ------------------------------------------

    def address(self, broker_id: int) -> tuple[str, int]:
        host = self.network.addresses[node_name(broker_id)]
        return "127.0.0.1", self._local[f"{host}:{BROKER_PORT}"]

    def metrics_address(self, broker_id: int) -> tuple[str, int]:
        host = self.network.addresses[node_name(broker_id)]
        return "127.0.0.1", self._local[f"{host}:{METRICS_PORT}"]

    @property
    def zk_connect_local(self) -> str:
        """A ZooKeeper connect string for the test process (through the client node)."""
        zk = f"{self.network.addresses['zk']}:{ZK_PORT}"
        return f"127.0.0.1:{self._local[zk]}"

    async def gauge(self, broker_id: int, name: str) -> float | None:
        """An unlabelled metric's value from the broker's /metrics; None if unreachable."""
        host, port = self.metrics_address(broker_id)

        def scrape() -> str:
            url = f"http://{host}:{port}/metrics"
            with urllib.request.urlopen(url, timeout=METRICS_TIMEOUT_S) as answer:
                text: str = answer.read().decode()
                return text

        try:
            text = await trio.to_thread.run_sync(scrape)
        except OSError:
            return None
        for line in text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return None

    # -- network faults -----------------------------------------------------------------

    def cut(self, a: Node, b: Node) -> None:
        self.network.cut(node_name(a), node_name(b))

    def partition(self, groups: Iterable[Iterable[Node]]) -> None:
        self.network.partition([[node_name(n) for n in group] for group in groups])

    def isolate(self, node: Node) -> None:
        self.network.isolate(node_name(node))

    def slow(self, node: Node, ms: int, loss: float = 0.0) -> None:
        self.network.slow(node_name(node), ms, loss)

    def heal(self) -> None:
        self.network.heal()

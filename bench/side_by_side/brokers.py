"""The two brokers of bench/vs_kafka.py, started the same way: N broker processes over
one ZooKeeper chroot, each client-facing listener on ``base_port + i - 1``.

``KafkaBrokers`` runs ``kafka.Kafka`` from the jars java/pom.xml pins with a
server.properties of Kafka's shipped defaults (no fsync per write: the page cache, as
Kafka ships) and the heap and JVM flags Kafka's own start scripts use (``-Xmx1G -Xms1G``,
G1). ``MinibrokerBrokers`` runs ``minibroker broker`` with its defaults and a Kafka
listener on the same port (its msgpack listener, which Kafka clients never see, on
``base_port + 100 + i - 1``). Both get the same few test settings, ``SHARED``, and
whatever ``settings`` a caller adds (to both alike).

A broker is ready once its id is registered in ZooKeeper and a Kafka client
bootstrapped at it sees every broker of the cluster; that is also the test after a
restart. ``pids()`` gives each live broker's process id, for RSS and CPU readings.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import confluent_kafka
from confluent_kafka.admin import AdminClient
from kazoo.client import KazooClient

from tests.support.broker_process import ROOT, child_env

SHARED: dict[str, str] = {
    "zookeeper.session.timeout.ms": "6000",  # a killed broker's znode goes in 6 s, not 18
    "group.initial.rebalance.delay.ms": "0",  # as Kafka's shipped server.properties
    "auto.leader.rebalance.enable": "false",  # no leadership moves in the middle of a run
}
"""Settings both brokers get, on top of their defaults."""
KAFKA_HEAP = ("-Xmx1G", "-Xms1G")
"""kafka-server-start.sh's KAFKA_HEAP_OPTS."""
KAFKA_JVM = (
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:MaxInlineLevel=15",
    "-Djava.awt.headless=true",
)
"""kafka-run-class.sh's KAFKA_JVM_PERFORMANCE_OPTS."""
KAFKA_LOG4J = """\
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={path}
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.state.change.logger=WARN
"""
"""Kafka's shipped log4j.properties, reduced to one file appender."""
MSGPACK_PORT_OFFSET = 100
READY_TIMEOUT_S = 120.0
POLL_S = 0.05


class Brokers:
    """N broker processes of one kind over ``zk_connect`` (``host:port/chroot``)."""

    name = ""

    def __init__(
        self,
        root: Path,
        zk_connect: str,
        base_port: int,
        size: int,
        settings: Mapping[str, str] = {},
    ) -> None:
        self.settings = {**SHARED, **settings}
        self.root = root
        self.zk_connect = zk_connect
        self.base_port = base_port
        self.size = size
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        host, _, chroot = zk_connect.partition("/")
        self.zk_hosts = host
        self.chroot = "/" + chroot
        self.zk = KazooClient(hosts=host)
        self.zk.start(timeout=30)
        self.zk.ensure_path(self.chroot)

    # -- what differs between the two ---------------------------------------------------

    def argv(self, broker_id: int) -> list[str]:
        raise NotImplementedError

    # -- processes ----------------------------------------------------------------------

    def port(self, broker_id: int) -> int:
        return self.base_port + broker_id - 1

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{self.port(i)}" for i in range(1, self.size + 1))

    def log_dir(self, broker_id: int) -> Path:
        return self.root / f"broker-{broker_id}" / "logs"

    def start_all(self) -> None:
        for broker_id in range(1, self.size + 1):
            self.spawn(broker_id)
        for broker_id in range(1, self.size + 1):
            self.wait_ready(broker_id)

    def spawn(self, broker_id: int) -> None:
        out = self.root / f"broker-{broker_id}.out"
        out.parent.mkdir(parents=True, exist_ok=True)
        with out.open("ab") as sink:
            self.procs[broker_id] = subprocess.Popen(
                self.argv(broker_id),
                cwd=ROOT,
                env=child_env(),
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def wait_ready(self, broker_id: int, timeout: float = READY_TIMEOUT_S) -> None:
        """Until the broker is registered and a client bootstrapped at it sees all of
        the cluster's brokers and a controller."""
        deadline = time.monotonic() + timeout
        znode = f"{self.chroot}/brokers/ids/{broker_id}"
        while self.zk.exists(znode) is None:
            self.check_alive(broker_id, deadline)
            time.sleep(POLL_S)
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{self.port(broker_id)}"})
        while True:
            self.check_alive(broker_id, deadline)
            try:
                # a controller too: librdkafka's admin waits for the next metadata
                # refresh (minutes) if its first Metadata named none
                metadata = admin.list_topics(timeout=2)
                if len(metadata.brokers) >= len(self.live()) and metadata.controller_id >= 0:
                    return
            except confluent_kafka.KafkaException:
                pass
            time.sleep(POLL_S)

    def check_alive(self, broker_id: int, deadline: float) -> None:
        proc = self.procs[broker_id]
        if proc.poll() is not None:
            tail = (self.root / f"broker-{broker_id}.out").read_text(errors="replace")[-3000:]
            log = self.root / f"broker-{broker_id}" / "server.log"  # Kafka's log4j file
            if log.exists():
                tail += log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"{self.name} broker {broker_id} exited ({proc.returncode}): {tail}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{self.name} broker {broker_id} not ready in time")

    def live(self) -> list[int]:
        return [i for i, p in self.procs.items() if p.poll() is None]

    def pids(self) -> list[int]:
        return [self.procs[i].pid for i in self.live()]

    def kill(self, broker_id: int) -> None:
        """kill -9, reaped; returns once ZooKeeper has dropped its registration (the
        session timeout), so a restart measures the start, not the wait for that."""
        proc = self.procs[broker_id]
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        znode = f"{self.chroot}/brokers/ids/{broker_id}"
        deadline = time.monotonic() + 60
        while self.zk.exists(znode) is not None and time.monotonic() < deadline:
            time.sleep(POLL_S)

    def isr(self, topic: str, partition: int) -> list[int]:
        path = f"{self.chroot}/brokers/topics/{topic}/partitions/{partition}/state"
        data, _ = self.zk.get(path)
        isr: list[int] = json.loads(data)["isr"]
        return isr

    def stop(self) -> None:
        """SIGTERM every broker at once, SIGKILL what is left after 30 s."""
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 30
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.zk.stop()
        self.zk.close()


class KafkaBrokers(Brokers):
    name = "kafka"

    def __init__(
        self,
        root: Path,
        zk_connect: str,
        base_port: int,
        size: int,
        settings: Mapping[str, str] = {},
        *,
        classpath: str,
    ) -> None:
        super().__init__(root, zk_connect, base_port, size, settings)
        self.classpath = classpath

    def argv(self, broker_id: int) -> list[str]:
        home = self.root / f"broker-{broker_id}"
        home.mkdir(parents=True, exist_ok=True)
        log4j = home / "log4j.properties"
        log4j.write_text(KAFKA_LOG4J.format(path=home / "server.log"))
        replicas = str(min(self.size, 3))
        properties: Mapping[str, str] = {
            "broker.id": str(broker_id),
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port(broker_id)}",
            "log.dirs": str(self.log_dir(broker_id)),
            "zookeeper.connect": self.zk_connect,
            "offsets.topic.replication.factor": replicas,
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": "1",
            **self.settings,
        }
        config = home / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in properties.items()))
        return [
            "java",
            *KAFKA_HEAP,
            *KAFKA_JVM,
            f"-Dlog4j.configuration=file:{log4j}",
            f"-Dkafka.logs.dir={home}",
            "-cp",
            self.classpath,
            "kafka.Kafka",
            str(config),
        ]


class MinibrokerBrokers(Brokers):
    name = "minibroker"

    def argv(self, broker_id: int) -> list[str]:
        settings = {
            "offsets.topic.replication.factor": str(min(self.size, 3)),
            **self.settings,
        }
        argv = [
            sys.executable,
            "-m",
            "minibroker",
            "broker",
            *("--broker-id", str(broker_id)),
            *("--listen", f"127.0.0.1:{self.port(broker_id) + MSGPACK_PORT_OFFSET}"),
            *("--kafka-listen", f"127.0.0.1:{self.port(broker_id)}"),
            *("--log-dirs", str(self.log_dir(broker_id))),
            *("--zookeeper", self.zk_connect),
            *("--metrics-port", "-1"),
        ]
        for key, value in settings.items():
            argv += ["--set", f"{key}={value}"]
        return argv


def rss_bytes(pid: int) -> int:
    """Resident set size of ``pid`` and its children (Linux /proc), 0 once it is gone."""
    total = 0
    pending = [pid]
    while pending:
        current = pending.pop()
        try:
            status = Path(f"/proc/{current}/status").read_text()
            tasks = os.listdir(f"/proc/{current}/task")
            for tid in tasks:
                children = Path(f"/proc/{current}/task/{tid}/children").read_text().split()
                pending.extend(int(c) for c in children)
        except (FileNotFoundError, ProcessLookupError):
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1]) * 1024
    return total


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` so far, 0 once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return 0.0
    fields = stat.rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

"""minibroker beside Apache Kafka on this machine, with the same clients, in one run.

    python bench/vs_kafka.py [--rounds 3] [--quick] [--base-port P] [--no-java]

One ZooKeeper (minibroker's harness: Apache ZooKeeper from pyspark's jars) serves both
brokers, each cluster in a chroot of its own. Kafka 3.9 (the jars java/pom.xml pins,
ZooKeeper mode, Kafka's shipped defaults: no fsync per write, ``-Xmx1G -Xms1G``) and
minibroker (its defaults) run one at a time on the same ports, the one that goes first
alternating from round to round, and each goes through the same steps:

1. one broker: RSS after start; a warm-up (200,000 1 KiB records produced and read
   back, so Kafka's JIT has compiled its hot paths; not with ``--quick``);
   confluent-kafka produces 100 B and 1 KiB records at
   acks=1 and acks=all, then reads the 1 KiB topic from the start (RSS sampled every
   0.1 s throughout: the peak is "under load"); end-to-end latency at 1,000 and
   20,000 records/s; Kafka's ProducerPerformance, ConsumerPerformance and
   EndToEndLatency (not with ``--no-java``); many of what a broker holds idle: a topic
   of 1,000 partitions created (seconds until each has a leader) and 500,000 100 B
   records sent round-robin over them, 1 KiB acks=1 produced beside 1,000 connections
   that asked ApiVersions and went quiet (and the RSS with them), a group of three
   consumers, each a process, reading 300,000 1 KiB records over 6 partitions (MB/s
   from the subscribe, seconds until the last assignment); ``--quick``: 100 partitions,
   200 connections, no group); then a topic of 2 GiB (32 MiB with ``--quick``), kill
   -9 once ZooKeeper dropped the broker, start again: seconds until a consumer
   bootstrapped at it reads the last record (the broker reloads every topic above);
2. three brokers, RF 3: confluent-kafka produces 1 KiB at acks=1 and acks=all and 100 B
   at acks=all, ProducerPerformance at acks=all; then (not with ``--quick``) a follower
   of a 2 GiB topic (filled at acks=1, then one record at acks=all once the follower
   is back in the ISR) is killed and started again: seconds until it is ready and
   until ZooKeeper's ISR names it.

A workload that fails (a timeout under load) is one run's ``errors`` entry and its
figures are left out; the run goes on.

Output: one JSON line per run (one system, one round: its figures, the load average
before and after), a Markdown table (median, min-max and minibroker/Kafka ratio of
each workload) with ``uptime`` and the CPU model, and last one JSON object,
``{"summary": {WORKLOAD: {"minibroker", "kafka", "ratio", "unit", "better", "range",
"runs"}}}``. ``--quick`` (one round, small counts, no Java tools, no RF 3 restart, a
3 s ZooKeeper session so that each kill waits less for its expiry) is the smoke test
tests/judges/test_vs_kafka.py runs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.side_by_side.brokers import (
    MSGPACK_PORT_OFFSET,
    Brokers,
    KafkaBrokers,
    MinibrokerBrokers,
    cpu_seconds,
    rss_bytes,
)
from bench.side_by_side.java_tools import (
    JavaConsume,
    JavaEndToEnd,
    JavaProduce,
    JavaTool,
    run_java_tools,
)
from bench.side_by_side.report import SYSTEMS, summarize, table
from bench.side_by_side.workloads import (
    MB,
    consume_rate,
    create_topic,
    e2e_latency,
    group_consume,
    idle_connections,
    produce_rate,
    produce_spread,
    restart_until_in_isr,
    restart_until_serving,
)
from minibroker.zk.server import ZooKeeperServer
from tests.support.judges import kafka_classpath

KIB = 1024
RSS_SAMPLE_S = 0.1
PORT_RANGE = (20_000, 32_000)
JAVA_RECORDS = 50_000
GROUP_MEMBERS = 3
ISR_TIMEOUT_S = 300.0
GROUP_PARTITIONS = 6
"""1 KiB records per run of Kafka's perf tools (100 B: five times as many): their
producer's defaults (linger.ms 0, 16 KiB batches) make it far slower than librdkafka's."""


@dataclass(frozen=True)
class Sizes:
    records_100b: int
    records_1kib: int
    records_rf3: int
    e2e_seconds: dict[int, float]  # seconds at each rate (records/s)
    restart_bytes: int  # what the one broker holds when it is killed
    restart_rf3_bytes: int  # what the RF 3 follower holds when it is killed
    many_partitions: int  # the partitions of the many-partitions topic
    records_many_partitions: int  # 100 B records sent round-robin over them
    idle_connections: int  # quiet Kafka connections held open beside one producer
    records_group: int  # 1 KiB records a group of GROUP_MEMBERS consumers reads
    java: bool
    full: bool  # the RF 3 restart and the other RF 3 workloads
    warmup_records: int  # 1 KiB records produced and consumed before measuring (the JIT)
    settings: dict[str, str]  # broker settings both systems get on top of SHARED


FULL = Sizes(
    records_100b=1_000_000,
    records_1kib=300_000,
    records_rf3=100_000,
    e2e_seconds={1000: 10.0, 20_000: 6.0},
    restart_bytes=2 << 30,
    restart_rf3_bytes=2 << 30,
    many_partitions=1000,
    records_many_partitions=500_000,
    idle_connections=1000,
    records_group=300_000,
    java=True,
    full=True,
    warmup_records=200_000,
    settings={},
)
QUICK = Sizes(
    records_100b=200_000,
    records_1kib=40_000,
    records_rf3=20_000,
    e2e_seconds={1000: 2.5},
    restart_bytes=32 << 20,
    restart_rf3_bytes=0,
    many_partitions=100,
    records_many_partitions=100_000,
    idle_connections=200,
    records_group=0,  # none: spawning its three processes costs ~15 s a system
    java=False,
    full=False,
    warmup_records=0,
    settings={"zookeeper.session.timeout.ms": "3000"},  # each kill waits for the expiry
)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="one short round: the smoke test")
    p.add_argument("--base-port", type=int, default=0, help="default: a free range")
    p.add_argument("--no-java", action="store_true", help="leave Kafka's perf tools out")
    p.add_argument("--only", choices=SYSTEMS, help="run one system (no ratios)")
    return p.parse_args()


def main() -> None:
    args = parse_args()
    sizes = QUICK if args.quick else FULL
    if args.no_java:
        sizes = Sizes(**{**sizes.__dict__, "java": False})
    rounds = 1 if args.quick else args.rounds
    base_port = args.base_port or free_port_range()
    classpath = kafka_classpath() if sizes.java else kafka_jars()
    runs: list[dict[str, Any]] = []
    with (
        tempfile.TemporaryDirectory(prefix="vs-kafka-") as tmp,
        ZooKeeperServer(Path(tmp) / "zookeeper", force_sync=False) as zookeeper,
    ):
        for round_number in range(rounds):
            order = SYSTEMS if round_number % 2 == 0 else SYSTEMS[::-1]
            for system in order:
                if args.only and system != args.only:
                    continue
                load_before = os.getloadavg()
                root = Path(tmp) / f"{system}-{round_number}"
                chroot = f"{zookeeper.connect_string}/{system}-{round_number}"
                cluster = ClusterMaker(system, root, chroot, base_port, classpath, sizes.settings)
                errors: list[str] = []
                figures = run_system(cluster, sizes, errors)
                run = {
                    "round": round_number,
                    "system": system,
                    "figures": {k: round(v, 4) for k, v in figures.items()},
                    "errors": errors,
                    "load_before": [round(x, 2) for x in load_before],
                    "load_after": [round(x, 2) for x in os.getloadavg()],
                }
                print(json.dumps(run), flush=True)
                runs.append(run)
                shutil.rmtree(root, ignore_errors=True)
    summary = summarize(runs)
    print(f"\n{table(summary)}\n")
    print(f"uptime: {machine('uptime')}")
    print(f"CPU: {cpu_model()}, {os.cpu_count()} cores\n")
    print(json.dumps({"summary": summary}))


@dataclass(frozen=True)
class ClusterMaker:
    """Makes one system's clusters of a run: each size in its own chroot and dir."""

    system: str
    root: Path
    chroot: str
    base_port: int
    classpath: str
    settings: dict[str, str]

    def __call__(self, size: int) -> Brokers:
        connect = f"{self.chroot}-{size}"
        data = self.root / f"size-{size}"
        if self.system == "kafka":
            return KafkaBrokers(
                data, connect, self.base_port, size, self.settings, classpath=self.classpath
            )
        return MinibrokerBrokers(data, connect, self.base_port, size, self.settings)


def run_system(cluster: ClusterMaker, sizes: Sizes, errors: list[str]) -> dict[str, float]:
    figures: dict[str, float] = {}
    brokers: Brokers = cluster(1)
    try:
        with step(f"{brokers.name}: start 1 broker"):
            brokers.start_all()
        one_broker(brokers, sizes, figures, errors)
    finally:
        brokers.stop()
    brokers = cluster(3)
    try:
        with step(f"{brokers.name}: start 3 brokers"):
            brokers.start_all()
        three_brokers(brokers, sizes, figures, errors)
    finally:
        brokers.stop()
    return figures


def one_broker(
    brokers: Brokers, sizes: Sizes, figures: dict[str, float], errors: list[str]
) -> None:
    bootstrap = brokers.bootstrap
    (pid,) = brokers.pids()
    figures["rss_mb_at_rest"] = rss_bytes(pid) / MB
    if sizes.warmup_records:
        create_topic(bootstrap, "warmup")
        with step("warm-up"):
            produce_rate(bootstrap, "warmup", sizes.warmup_records, KIB, "1")
            consume_rate(bootstrap, "warmup", sizes.warmup_records)
    with RssPeak(pid) as peak, step("produce and consume"):
        for size, count, label in (
            (100, sizes.records_100b, "100b"),
            (KIB, sizes.records_1kib, "1kib"),
        ):
            for acks, acks_label in (("1", "acks1"), ("all", "acksall")):
                name = f"produce_{label}_{acks_label}"
                create_topic(bootstrap, name)
                cpu = cpu_seconds(pid)
                rate = produce_rate(bootstrap, name, count, size, acks)
                figures[name] = rate["records_per_s" if size == 100 else "mb_per_s"]
                if name == "produce_1kib_acks1":
                    spent_ms = (cpu_seconds(pid) - cpu) * 1000
                    figures["broker_cpu_ms_per_mb_produce_1kib"] = spent_ms / (count * size / MB)
        figures["consume_1kib"] = consume_rate(bootstrap, "produce_1kib_acks1", sizes.records_1kib)
    figures["rss_mb_under_load"] = peak.peak / MB
    with attempt("many partitions, connections and members", errors):
        many(brokers, sizes, figures)
    for rate, seconds in sizes.e2e_seconds.items():
        topic = f"e2e-{rate}"
        create_topic(bootstrap, topic)
        with step(f"end to end at {rate}/s"), attempt(f"end to end at {rate}/s", errors):
            for label, value in e2e_latency(bootstrap, topic, rate, seconds).items():
                figures[f"e2e_{label}_{rate}rps"] = value
    if sizes.java:
        create_topic(bootstrap, "java-e2e")
        tools: list[JavaTool] = [
            JavaProduce("java_produce_100b_acks1", "java-100b", JAVA_RECORDS * 5, 100, "1"),
            JavaProduce("java_produce_1kib_acks1", "java-1kib", JAVA_RECORDS, KIB, "1"),
            JavaProduce("java_produce_1kib_acksall", "java-1kib-all", JAVA_RECORDS, KIB, "all"),
            JavaConsume("java_consume_1kib", "java-1kib", JAVA_RECORDS),
            JavaEndToEnd("java_e2e", "java-e2e", 5000, 100),
        ]
        for topic in ("java-100b", "java-1kib", "java-1kib-all"):
            create_topic(bootstrap, topic)
        with step("Java tools"):
            found = run_java_tools(bootstrap, tools)
        for name, values in found.items():
            if name == "java_e2e":
                figures |= {f"java_e2e_{k}": v for k, v in values.items() if k != "p999_ms"}
            else:
                figures[name] = values["records_per_s" if "100b" in name else "mb_per_s"]
    count = sizes.restart_bytes // KIB
    create_topic(bootstrap, "restart")
    with step("fill for the restart"):
        produce_rate(bootstrap, "restart", count, KIB, "1")
    with step("kill -9, ZooKeeper drops it"):
        brokers.kill(1)
    with step("restart until serving"):
        figures["restart_to_serving_s"] = restart_until_serving(brokers, 1, "restart", count - 1)


def many(brokers: Brokers, sizes: Sizes, figures: dict[str, float]) -> None:
    """One broker: a topic of many partitions (created, then written round-robin), one
    producer beside many idle connections, and a consumer group of three."""
    bootstrap = brokers.bootstrap
    (pid,) = brokers.pids()
    started = time.monotonic()
    with step(f"create {sizes.many_partitions} partitions"):
        create_topic(bootstrap, "many", partitions=sizes.many_partitions)
    figures["many_partitions_create_s"] = time.monotonic() - started
    with step(f"produce over {sizes.many_partitions} partitions"):
        rate = produce_spread(
            bootstrap, "many", sizes.records_many_partitions, 100, sizes.many_partitions
        )
    figures["produce_100b_many_partitions"] = rate["records_per_s"]
    create_topic(bootstrap, "beside-idle")
    with (
        step(f"produce beside {sizes.idle_connections} idle connections"),
        idle_connections(bootstrap, sizes.idle_connections),
    ):
        figures["rss_mb_idle_connections"] = rss_bytes(pid) / MB
        rate = produce_rate(bootstrap, "beside-idle", sizes.records_1kib, KIB, "1")
        figures["produce_1kib_idle_connections"] = rate["mb_per_s"]
    if not sizes.records_group:
        return
    create_topic(bootstrap, "group", partitions=GROUP_PARTITIONS)
    produce_spread(bootstrap, "group", sizes.records_group, KIB, GROUP_PARTITIONS)
    with step(f"a group of {GROUP_MEMBERS} consumes"):
        found = group_consume(bootstrap, "group", sizes.records_group, GROUP_MEMBERS)
    figures["group3_consume_1kib"] = found["mb_per_s"]
    figures["group3_settled_s"] = found["settled_s"]


def three_brokers(
    brokers: Brokers, sizes: Sizes, figures: dict[str, float], errors: list[str]
) -> None:
    bootstrap = brokers.bootstrap
    workloads = [(KIB, "all", "produce_1kib_rf3_acksall")]
    if sizes.full:  # --quick keeps to the workloads the summary must have
        workloads += [
            (KIB, "1", "produce_1kib_rf3_acks1"),
            (100, "all", "produce_100b_rf3_acksall"),
        ]
    for size, acks, name in workloads:
        create_topic(bootstrap, name, replication_factor=3)
        count = sizes.records_rf3 if size == KIB else sizes.records_rf3 * 10
        with step(name):
            rate = produce_rate(bootstrap, name, count, size, acks)
        figures[name] = rate["records_per_s" if size == 100 else "mb_per_s"]
    if sizes.java:
        create_topic(bootstrap, "java-rf3", replication_factor=3)
        tool = JavaProduce(
            "java_produce_1kib_rf3_acksall", "java-rf3", JAVA_RECORDS // 2, KIB, "all"
        )
        figures[tool.workload] = run_java_tools(bootstrap, [tool])[tool.workload]["mb_per_s"]
    if sizes.full:
        with attempt("RF 3 restart", errors):
            restart_follower(brokers, sizes, figures)


def restart_follower(brokers: Brokers, sizes: Sizes, figures: dict[str, float]) -> None:
    """RF 3: fill a partition, kill -9 a follower, start it again."""
    bootstrap = brokers.bootstrap
    create_topic(bootstrap, "restart-rf3", assignment=[[1, 2, 3]])
    with step("fill RF 3 for the restart"):
        # acks=1 (RF 3 acks=all fills 2 GiB in minutes on Kafka here), then one
        # record at acks=all: acknowledged once every replica in the ISR has it all; a
        # follower the fill left behind is out of the ISR until it has caught up
        produce_rate(bootstrap, "restart-rf3", sizes.restart_rf3_bytes // KIB, KIB, "1")
        deadline = time.monotonic() + ISR_TIMEOUT_S
        while True:
            produce_rate(bootstrap, "restart-rf3", 1, KIB, "all")
            if 3 in brokers.isr("restart-rf3", 0):
                break
            if time.monotonic() > deadline:
                raise RuntimeError("the follower to restart is not in the ISR")
            time.sleep(1.0)
    brokers.kill(3)
    with step("restart a follower until in ISR"):
        timings = restart_until_in_isr(brokers, 3, "restart-rf3")
    figures["restart_rf3_to_ready_s"] = timings["ready_s"]
    figures["restart_rf3_to_isr_s"] = timings["in_isr_s"]


@contextlib.contextmanager
def attempt(name: str, errors: list[str]) -> Iterator[None]:
    """A workload whose failure is reported (stderr, the run's ``errors``) and leaves
    its figures out instead of ending the whole run: a round takes many minutes."""
    try:
        yield
    except Exception as failure:
        message = f"{name}: {type(failure).__name__}: {failure}"
        print(f"  FAILED {message}", file=sys.stderr, flush=True)
        errors.append(message)


@contextlib.contextmanager
def step(name: str) -> Iterator[None]:
    """Say on stderr how long a step took (where a run's time goes)."""
    started = time.monotonic()
    yield
    print(f"  {name}: {time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)


class RssPeak:
    """The highest RSS of a process while the block runs, sampled in a thread."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._done.wait(RSS_SAMPLE_S):
            self.peak = max(self.peak, rss_bytes(self.pid))

    def __enter__(self) -> RssPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()
        self.peak = max(self.peak, rss_bytes(self.pid))


def free_port_range(size: int = 3) -> int:
    """A base port whose ``size`` ports, and the msgpack ones above them, are free; below
    Linux's ephemeral range (32768 on), so no client connection takes one between the
    runs that listen on it."""
    rng = random.Random()
    for _ in range(100):
        base = rng.randrange(*PORT_RANGE)
        ports = [base + i for i in range(size)] + [
            base + MSGPACK_PORT_OFFSET + i for i in range(size)
        ]
        if all(_port_free(p) for p in ports):
            return base
    raise RuntimeError("no free port range")


def _port_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def kafka_jars() -> str:
    """Kafka's class path without compiling java/ (only the perf tools' runner needs it)."""
    script = Path(__file__).resolve().parents[1] / "scripts" / "kafka-classpath"
    return subprocess.run([str(script)], capture_output=True, text=True, check=True).stdout.strip()


def machine(command: str) -> str:
    return subprocess.run([command], capture_output=True, text=True, check=False).stdout.strip()


def cpu_model() -> str:
    for line in machine("lscpu").splitlines():
        if line.startswith("Model name:"):
            return line.partition(":")[2].strip()
    return "unknown"


if __name__ == "__main__":
    main()

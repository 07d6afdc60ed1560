"""Exactly once under faults: a consume-transform-produce loop (confluent-kafka: a
read_committed group consumer and a transactional producer that commits the consumer's
offsets in each transaction) runs while a nemesis kill -9s the output partitions'
leaders, the transaction coordinator and the group coordinator, one broker at a time,
and restarts them (``dev stop-broker --kill`` / ``dev start-broker``), or SIGSTOPs one
past the producer's request timeout and the ZooKeeper session and lets it go on.

The checker (tests/support/eos.py) then reads the output read_committed and proves
exactly once: every input's output visible once, no transaction torn, none whose commit
returned lost, nothing foreign. A second test kills every broker mid-transaction and
restarts them: the open transaction is aborted by its timeout after the restart, the
producer state, snapshots and ``.txnindex`` are rebuilt, and a read_committed reader
sees only what was committed before.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import threading
import time
from collections.abc import Iterator

import confluent_kafka
import pytest

from tests.support.cluster import LocalCluster
from tests.support.eos import EosChecker, output_value
from tests.support.kafka_groups import create_topic
from tests.support.transactions import READERS, values, write_sentinels

pytestmark = [pytest.mark.timeout(240)]

IN, OUT, GROUP, TXN_ID = "eos-in", "eos-out", "eos", "eos-app"
PARTITIONS = 3
INPUTS = 900
PER_TRANSACTION = 10
PACE_S = 0.35
"""Pause between transactions: the loop spans the nemesis' run instead of finishing
before its first kill."""
FAULT_S = 30.0
"""How long the nemesis runs; the loop then finishes what is left."""
FINISH_S = 60.0
PROPERTIES = (
    "replica.lag.time.max.ms=3000",
    "min.insync.replicas=2",
    "group.initial.rebalance.delay.ms=0",
    "offsets.topic.num.partitions=5",
    "transaction.state.log.num.partitions=5",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms=1000",
)
TXN_SETTINGS = {
    "transaction.timeout.ms": 15000,
    "message.timeout.ms": 15000,
    "request.timeout.ms": 5000,
}
PAUSE_S = (6.5, 8.0)
"""How long a SIGSTOPped broker sleeps: past the producer's request timeout (5 s) and
the brokers' ZooKeeper session (6 s, tests/support/cluster.py)."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """One cluster for both tests, in file order: the recovery test's restart of every
    broker comes last."""
    data = tmp_path_factory.mktemp("cluster")
    with LocalCluster(data, properties=PROPERTIES, kafka_listeners=True) as c:
        yield c
        # Brokers `dev start-broker` restarted are not the supervisor's children:
        # whatever of them outlives its stop goes below (their pids are in dev.json).
        state = json.loads((data / "dev.json").read_text())
    for info in state.get("brokers", {}).values():
        with contextlib.suppress(ProcessLookupError):
            os.kill(info["pid"], signal.SIGKILL)


def dev(cluster: LocalCluster, *args: str) -> None:
    done = cluster.cli("dev", *args, "--data-dir", str(cluster.data_dir), bootstrap=False)
    assert done.returncode == 0, done.stderr.decode()


def leaders(cluster: LocalCluster, topic: str) -> list[int]:
    done = cluster.cli("topic", "describe", topic, "--format", "json")
    if done.returncode != 0:
        return []
    return [p["leader"] for p in json.loads(done.stdout)[0]["partitions"] if p["leader"] > 0]


def coordinator(cluster: LocalCluster) -> list[int]:
    done = cluster.cli("transactions", "describe", TXN_ID, "--format", "json")
    return [json.loads(done.stdout)["coordinator"]] if done.returncode == 0 else []


def broker_pid(cluster: LocalCluster, broker_id: int) -> int:
    """The broker's pid now (``dev start-broker`` records a restarted one's)."""
    state = json.loads((cluster.data_dir / "dev.json").read_text())
    pid: int = state["brokers"][str(broker_id)]["pid"]
    return pid


def pause(cluster: LocalCluster, victim: int, seconds: float) -> None:
    """SIGSTOP ``victim`` for ``seconds`` (past the clients' request timeout and the
    ZooKeeper session: its partitions and coordinators move while it sleeps), then
    SIGCONT: it wakes up as a zombie that must learn it was replaced."""
    pid = broker_pid(cluster, victim)
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(seconds)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


def nemesis(
    cluster: LocalCluster, rng: random.Random, stop: threading.Event, log: list[str]
) -> None:
    """One broker at a time (an output leader, the transaction coordinator, or any):
    kill -9 it and restart it a moment later, or SIGSTOP it past the request timeout
    and let it go on."""
    kinds = ["txn-coordinator", "output-leader", "pause-txn-coordinator", "any"]
    others = ["output-leader", "txn-coordinator", "any", "pause-output-leader", "pause-any"]
    while not stop.wait(rng.uniform(0.5, 1.5)):
        kind = kinds.pop(0) if kinds else rng.choice(others)
        if kind.endswith("output-leader"):
            candidates = leaders(cluster, OUT)
        elif kind.endswith("txn-coordinator"):
            candidates = coordinator(cluster)
        else:
            candidates = [1, 2, 3]
        victim = rng.choice(candidates or [1, 2, 3])
        started = time.monotonic()
        if kind.startswith("pause"):
            pause(cluster, victim, rng.uniform(*PAUSE_S))
            log.append(f"SIGSTOP {kind} {victim} ({time.monotonic() - started:.1f} s)")
            continue
        dev(cluster, "stop-broker", str(victim), "--kill")
        time.sleep(rng.uniform(0.5, 1.5))
        dev(cluster, "start-broker", str(victim))
        log.append(f"kill -9 {kind} {victim} ({time.monotonic() - started:.1f} s down)")


def produce_inputs(bootstrap: str) -> list[bytes]:
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True}
    )
    inputs = [b"in-%d" % i for i in range(INPUTS)]
    for i, value in enumerate(inputs):
        producer.produce(IN, value, partition=i % PARTITIONS)
    assert producer.flush(60) == 0
    return inputs


COORDINATOR_MOVING = frozenset(
    {
        confluent_kafka.KafkaError.NOT_COORDINATOR,
        confluent_kafka.KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        confluent_kafka.KafkaError.COORDINATOR_NOT_AVAILABLE,
        confluent_kafka.KafkaError._TIMED_OUT,
        confluent_kafka.KafkaError._TRANSPORT,
    }
)
"""Answers a committed() gets while the group's coordinator is killed, paused or moving."""


class Transformer:
    """The application: read, write one output per input, commit offsets with it."""

    def __init__(self, bootstrap: str, checker: EosChecker) -> None:
        self.bootstrap = bootstrap
        self.checker = checker
        self.attempt = 0
        self.done_offsets: dict[int, int] = {}
        self.errors: list[str] = []
        self.consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": GROUP,
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        self.consumer.subscribe([IN])
        self.producer = self._producer()

    def _producer(self) -> confluent_kafka.Producer:
        producer = confluent_kafka.Producer(
            {"bootstrap.servers": self.bootstrap, "transactional.id": TXN_ID, **TXN_SETTINGS}
        )
        producer.init_transactions(60)
        return producer

    def finished(self) -> bool:
        return all(self.done_offsets.get(p, 0) >= INPUTS // PARTITIONS for p in range(PARTITIONS))

    def run(self, deadline: float) -> None:
        while not self.finished() and time.monotonic() < deadline:
            batch = self.consumer.consume(PER_TRANSACTION, timeout=0.5)
            messages = [m for m in batch if m.error() is None]
            if not messages:
                continue
            time.sleep(PACE_S)
            try:
                self._transform(messages)
            except confluent_kafka.KafkaException as exc:
                self.errors.append(str(exc.args[0]))
                self._recover(exc.args[0])

    def _transform(self, messages: list[confluent_kafka.Message]) -> None:
        self.attempt += 1
        attempt = self.attempt
        self.producer.begin_transaction()
        outputs = [output_value(m.value(), attempt) for m in messages]
        self.checker.attempted(attempt, outputs)
        for message, value in zip(messages, outputs, strict=True):
            self.producer.produce(OUT, value, partition=message.partition())
        positions = self.consumer.position(self.consumer.assignment())
        self.producer.send_offsets_to_transaction(
            positions, self.consumer.consumer_group_metadata(), 60
        )
        self._commit()
        self.checker.committed(attempt)
        for tp in positions:
            if tp.offset >= 0:
                self.done_offsets[tp.partition] = tp.offset

    def _commit(self) -> None:
        while True:
            try:
                self.producer.commit_transaction(60)
                return
            except confluent_kafka.KafkaException as exc:
                if not exc.args[0].retriable():
                    raise

    def _recover(self, error: confluent_kafka.KafkaError) -> None:
        """Abort (or start a new producer, fencing the old), then read again from the
        committed offsets: what the aborted transaction consumed is processed again."""
        if error.fatal():  # fenced: only a new producer (a new epoch) goes on
            self.producer = self._producer()
        else:
            try:
                self.producer.abort_transaction(60)
            except confluent_kafka.KafkaException:
                self.producer = self._producer()
        for tp in self._committed():
            offset = tp.offset if tp.offset >= 0 else confluent_kafka.OFFSET_BEGINNING
            self.consumer.seek(confluent_kafka.TopicPartition(tp.topic, tp.partition, offset))

    def _committed(self) -> list[confluent_kafka.TopicPartition]:
        """The group's committed offsets, asked again while the group's coordinator
        moves (a killed or paused broker: NOT_COORDINATOR until the client finds the
        new one), as an application must."""
        deadline = time.monotonic() + 60
        while True:
            try:
                committed: list[confluent_kafka.TopicPartition] = self.consumer.committed(
                    self.consumer.assignment(), timeout=30
                )
                return committed
            except confluent_kafka.KafkaException as exc:
                error = exc.args[0]
                moving = error.code() in COORDINATOR_MOVING or error.retriable()
                if not moving or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)  # the client looks the coordinator up again meanwhile

    def close(self) -> None:
        self.consumer.close()


@pytest.mark.extended
def test_consume_transform_produce_is_exactly_once_through_kills(cluster: LocalCluster) -> None:
    create_topic(cluster, IN, PARTITIONS)
    create_topic(cluster, OUT, PARTITIONS)
    inputs = produce_inputs(cluster.kafka_bootstrap)
    checker = EosChecker()
    transformer = Transformer(cluster.kafka_bootstrap, checker)
    stop = threading.Event()
    history: list[str] = []
    faults = threading.Thread(
        target=nemesis, args=(cluster, random.Random(34), stop, history), daemon=True
    )
    try:
        faults.start()
        transformer.run(time.monotonic() + FAULT_S)
        stop.set()
        faults.join(60)
        transformer.run(time.monotonic() + FINISH_S)
        assert transformer.finished(), f"the loop did not finish: faults {history}"
    finally:
        stop.set()
        transformer.close()
    write_sentinels(cluster.kafka_bootstrap, OUT, PARTITIONS, "eos")
    found = READERS["confluent-kafka"](cluster.kafka_bootstrap, OUT, PARTITIONS, PARTITIONS)
    report = checker.check(inputs, values(found))
    print(f"{report.summary()}; faults: {history}; errors: {transformer.errors[:5]}")
    assert report.ok, f"faults {history}: {report.summary()}"


def test_a_transaction_open_when_every_broker_is_killed_is_aborted_after_restart(
    cluster: LocalCluster,
) -> None:
    topic = "eos-recovery"
    create_topic(cluster, topic, 1)
    committed = confluent_kafka.Producer(
        {"bootstrap.servers": cluster.kafka_bootstrap, "transactional.id": "recovery-1"}
    )
    committed.init_transactions(30)
    committed.begin_transaction()
    committed.produce(topic, b"kept", partition=0)
    committed.commit_transaction(30)
    hanging = confluent_kafka.Producer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap,
            "transactional.id": "recovery-2",
            "transaction.timeout.ms": 3000,
            "message.timeout.ms": 3000,
        }
    )
    hanging.init_transactions(30)
    hanging.begin_transaction()
    hanging.produce(topic, b"in-flight", partition=0)
    hanging.flush(30)
    for broker in (1, 2, 3):
        dev(cluster, "stop-broker", str(broker), "--kill")
    for broker in (1, 2, 3):  # one at a time: each `dev start-broker` records its pid
        dev(cluster, "start-broker", str(broker))
    write_sentinels(cluster.kafka_bootstrap, topic, 1, "recovery")
    found = READERS["confluent-kafka"](cluster.kafka_bootstrap, topic, 1, 1)
    assert values(found) == [b"kept"]
    txnindex = sorted(cluster.data_dir.glob(f"broker-*/logs-*/{topic}-0/*.txnindex"))
    assert txnindex, "the abort after the restart is indexed on every replica"

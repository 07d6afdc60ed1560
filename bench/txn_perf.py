"""What transactions cost, measured with confluent-kafka against one broker.

    python3 bench/txn_perf.py [--records 300000] [--record-size 100]
        [--transaction-size 1000] [--consume-records 100000] [--consume-record-size 1024]
        [--runs 3] [--kafka]

Two comparisons, each run ``--runs`` times alternating the two sides (the machine is
shared: alternating keeps a load change from favouring one side); one JSON line of
figures at the end, each a list over the runs and the ratio of the medians:

- ``produce``: ``--records`` records of ``--record-size`` bytes, acks=all, linger.ms 5,
  1 MB batches, first with idempotence only, then in transactions of
  ``--transaction-size`` records (begin, produce, commit: each commit waits for its
  markers). Target (issue 34): transactional >= 0.8x idempotent records/s. The broker's
  CPU seconds per run are listed too: on a machine whose cores are busy with other work
  the rates follow the CPU each side costs, on an idle one the round trips of each
  transaction. So are the application's medians per transaction (``transaction_ms``:
  ``begin``, the ``produce`` calls, ``commit``): librdkafka sends AddPartitionsToTxn
  only once the commit starts, then the batch, then EndTxn, one after the other.
- ``consume``: a topic filled in transactions of ``--transaction-size`` records of
  ``--consume-record-size`` bytes (so it holds a marker per transaction), read whole by
  a consumer with ``isolation.level`` read_uncommitted, then read_committed. Target:
  read_committed >= 0.95x read_uncommitted MB/s.

A standalone broker (bench/standalone.py) with a Kafka listener is started; it plays its
own controller, so ``__transaction_state`` is made one partition it leads. ``--kafka``
runs the same against Apache Kafka instead (the jars java/pom.xml pins, one broker in
ZooKeeper mode, as bench/vs_kafka.py starts it), after one untimed run of each kind so
that its JIT has compiled the paths measured.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import trio
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.kafka_client_perf import CONSUME_BATCH, CONSUME_QUEUE_BACKOFF_MS, _kafka_address
from bench.side_by_side.brokers import KafkaBrokers
from bench.standalone import lead, process_cpu_seconds, standalone_broker_process
from bench.vs_kafka import free_port_range, kafka_jars
from minibroker.protocol.transaction_log import TRANSACTION_STATE_TOPIC
from minibroker.zk.server import ZooKeeperServer

PRODUCER_SETTINGS: dict[str, Any] = {
    "acks": "all",
    "compression.type": "none",
    "linger.ms": 5,
    "batch.size": 1_000_000,
    "batch.num.messages": 1_000_000,
    "queue.buffering.max.messages": 1_000_000,
    "queue.buffering.max.kbytes": 2_000_000,
}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--record-size", type=int, default=100)
    parser.add_argument("--transaction-size", type=int, default=1000)
    parser.add_argument("--consume-records", type=int, default=100_000)
    parser.add_argument("--consume-record-size", type=int, default=1024)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--kafka", action="store_true", help="against Apache Kafka (java/pom.xml's jars)"
    )
    return parser.parse_args()


def produce(
    kafka: str,
    topic: str,
    count: int,
    size: int,
    transaction_size: int | None,
    steps: dict[str, list[float]] | None = None,
) -> float:
    """Seconds to send ``count`` records and have them acknowledged (committed, in
    transactions of ``transaction_size``; None: idempotence only). ``steps``: gets each
    transaction's ``begin``, ``produce`` and ``commit`` seconds."""
    settings = {"bootstrap.servers": kafka, "enable.idempotence": True, **PRODUCER_SETTINGS}
    if transaction_size is not None:
        settings["transactional.id"] = f"txn-perf-{topic}"
    producer = confluent_kafka.Producer(settings)
    if transaction_size is not None:
        producer.init_transactions(30)
    payload = os.urandom(size)
    send = producer.produce
    started = time.perf_counter()
    step = transaction_size or count
    clock = time.perf_counter
    for first in range(0, count, step):
        begun = clock()
        if transaction_size is not None:
            producer.begin_transaction()
        produced = clock()
        for _ in range(min(step, count - first)):
            try:
                send(topic, payload, None, 0)
            except BufferError:
                producer.poll(0.01)
                send(topic, payload, None, 0)
        committed = clock()
        if transaction_size is not None:
            producer.commit_transaction(60)
        if steps is not None:
            steps.setdefault("begin", []).append(produced - begun)
            steps.setdefault("produce", []).append(committed - produced)
            steps.setdefault("commit", []).append(clock() - committed)
    if producer.flush(600) != 0:
        raise RuntimeError("records were not delivered")
    return time.perf_counter() - started


def consume(kafka: str, topic: str, count: int, isolation: str) -> float:
    """Seconds a consumer with ``isolation`` takes to read ``count`` records."""
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": kafka,
            "group.id": "txn-perf",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "fetch.max.bytes": 52_428_800,
            "max.partition.fetch.bytes": 10_485_760,
            "fetch.queue.backoff.ms": CONSUME_QUEUE_BACKOFF_MS,
        }
    )
    partition = confluent_kafka.TopicPartition(topic, 0, 0)
    consumer.get_watermark_offsets(partition, timeout=30)  # connected, metadata known
    seen = 0
    started = time.perf_counter()
    consumer.assign([partition])
    try:
        while seen < count:
            for message in consumer.consume(CONSUME_BATCH, 1.0):
                if message.error() is None:
                    seen += 1
    finally:
        elapsed = time.perf_counter() - started
        consumer.close()
    return elapsed


def ratio(numerator: list[float], denominator: list[float]) -> float:
    return round(statistics.median(numerator) / statistics.median(denominator), 3)


@contextlib.contextmanager
def minibroker(topics: list[str]) -> Iterator[tuple[str, int]]:
    """A standalone broker leading ``topics``: (its Kafka listener, its pid)."""
    with standalone_broker_process("kafka.listeners=127.0.0.1:0") as (bootstrap, process):
        kafka = trio.run(_kafka_address, bootstrap)
        for topic in [*topics, TRANSACTION_STATE_TOPIC]:
            trio.run(lead, bootstrap, topic, 1, kafka)
        yield kafka, process.pid


@contextlib.contextmanager
def apache_kafka(topics: list[str]) -> Iterator[tuple[str, int]]:
    """One Apache Kafka broker (ZooKeeper mode) with ``topics``: (its address, its pid)."""
    with (
        tempfile.TemporaryDirectory(prefix="txn-perf-kafka-") as tmp,
        ZooKeeperServer(Path(tmp) / "zookeeper", force_sync=False) as zookeeper,
    ):
        brokers = KafkaBrokers(
            Path(tmp) / "kafka",
            f"{zookeeper.connect_string}/kafka",
            free_port_range(1),
            1,
            classpath=kafka_jars(),
        )
        try:
            brokers.start_all()
            admin = AdminClient({"bootstrap.servers": brokers.bootstrap})
            created = admin.create_topics([NewTopic(t, 1, 1) for t in topics])
            for future in created.values():
                future.result(60)
            [pid] = brokers.pids()
            yield brokers.bootstrap, pid
        finally:
            brokers.stop()


def main() -> None:
    args = parse_args()
    figures: dict[str, Any] = {"load_average_before": os.getloadavg()[0]}
    topics = [f"idempotent-{i}" for i in range(args.runs)]
    topics += [f"transactional-{i}" for i in range(args.runs)]
    topics += ["consumed", "warm-up"]
    with (apache_kafka if args.kafka else minibroker)(topics) as (kafka, pid):
        if args.kafka:  # its JIT compiles the paths measured below
            for size in (None, args.transaction_size):
                produce(kafka, "warm-up", args.records, args.record_size, size)
        idempotent, transactional = [], []
        cpu: dict[str, list[float]] = {"idempotent": [], "transactional": []}
        steps: dict[str, list[float]] = {}
        for run in range(args.runs):
            for kind, rates, size in (
                ("idempotent", idempotent, None),
                ("transactional", transactional, args.transaction_size),
            ):
                before = process_cpu_seconds(pid)
                run_steps: dict[str, list[float]] = {}
                seconds = produce(
                    kafka, f"{kind}-{run}", args.records, args.record_size, size, run_steps
                )
                cpu[kind].append(round(process_cpu_seconds(pid) - before, 2))
                rates.append(round(args.records / seconds))
                if size is not None:
                    for step, times in run_steps.items():
                        median = round(statistics.median(times) * 1000, 3)
                        steps.setdefault(step, []).append(median)
        figures["produce"] = {
            "system": "kafka" if args.kafka else "minibroker",
            "records": args.records,
            "record_size": args.record_size,
            "transaction_size": args.transaction_size,
            "idempotent_records_per_s": idempotent,
            "transactional_records_per_s": transactional,
            "ratio": ratio(transactional, idempotent),
            "idempotent_broker_cpu_s": cpu["idempotent"],
            "transactional_broker_cpu_s": cpu["transactional"],
            "transaction_ms": steps,
        }
        produce(
            kafka,
            "consumed",
            args.consume_records,
            args.consume_record_size,
            args.transaction_size,
        )
        mb = args.consume_records * args.consume_record_size / 1e6
        uncommitted, committed = [], []
        for _ in range(args.runs):
            uncommitted.append(
                round(mb / consume(kafka, "consumed", args.consume_records, "read_uncommitted"), 1)
            )
            committed.append(
                round(mb / consume(kafka, "consumed", args.consume_records, "read_committed"), 1)
            )
        figures["consume"] = {
            "records": args.consume_records,
            "record_size": args.consume_record_size,
            "read_uncommitted_mb_per_s": uncommitted,
            "read_committed_mb_per_s": committed,
            "ratio": ratio(committed, uncommitted),
        }
    figures["load_average_after"] = os.getloadavg()[0]
    print(json.dumps(figures))


if __name__ == "__main__":
    main()

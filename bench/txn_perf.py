"""What transactions cost, measured with confluent-kafka against one broker.

    python3 bench/txn_perf.py [--records 300000] [--record-size 100]
        [--transaction-size 1000] [--consume-records 100000] [--consume-record-size 1024]
        [--runs 3]

Two comparisons, each run ``--runs`` times alternating the two sides (the machine is
shared: alternating keeps a load change from favouring one side); one JSON line of
figures at the end, each a list over the runs and the ratio of the medians:

- ``produce``: ``--records`` records of ``--record-size`` bytes, acks=all, linger.ms 5,
  1 MB batches, first with idempotence only, then in transactions of
  ``--transaction-size`` records (begin, produce, commit: each commit waits for its
  markers). Target (issue 34): transactional >= 0.8x idempotent records/s. The broker's
  CPU seconds per run are listed too: on a machine whose cores are busy with other work
  the rates follow the CPU each side costs, on an idle one the round trips of each
  transaction.
- ``consume``: a topic filled in transactions of ``--transaction-size`` records of
  ``--consume-record-size`` bytes (so it holds a marker per transaction), read whole by
  a consumer with ``isolation.level`` read_uncommitted, then read_committed. Target:
  read_committed >= 0.95x read_uncommitted MB/s.

A standalone broker (bench/standalone.py) with a Kafka listener is started; it plays its
own controller, so ``__transaction_state`` is made one partition it leads.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import confluent_kafka
import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.kafka_client_perf import CONSUME_BATCH, CONSUME_QUEUE_BACKOFF_MS, _kafka_address
from bench.standalone import lead, process_cpu_seconds, standalone_broker_process
from minibroker.protocol.transaction_log import TRANSACTION_STATE_TOPIC

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
    return parser.parse_args()


def produce(kafka: str, topic: str, count: int, size: int, transaction_size: int | None) -> float:
    """Seconds to send ``count`` records and have them acknowledged (committed, in
    transactions of ``transaction_size``; None: idempotence only)."""
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
    for first in range(0, count, step):
        if transaction_size is not None:
            producer.begin_transaction()
        for _ in range(min(step, count - first)):
            try:
                send(topic, payload, None, 0)
            except BufferError:
                producer.poll(0.01)
                send(topic, payload, None, 0)
        if transaction_size is not None:
            producer.commit_transaction(60)
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


def main() -> None:
    args = parse_args()
    figures: dict[str, Any] = {"load_average_before": os.getloadavg()[0]}
    with standalone_broker_process("kafka.listeners=127.0.0.1:0") as (bootstrap, process):
        kafka = trio.run(_kafka_address, bootstrap)
        topics = [f"idempotent-{i}" for i in range(args.runs)]
        topics += [f"transactional-{i}" for i in range(args.runs)]
        for topic in [*topics, "consumed", TRANSACTION_STATE_TOPIC]:
            trio.run(lead, bootstrap, topic, 1, kafka)
        idempotent, transactional = [], []
        cpu: dict[str, list[float]] = {"idempotent": [], "transactional": []}
        for run in range(args.runs):
            for kind, rates, size in (
                ("idempotent", idempotent, None),
                ("transactional", transactional, args.transaction_size),
            ):
                before = process_cpu_seconds(process.pid)
                seconds = produce(kafka, f"{kind}-{run}", args.records, args.record_size, size)
                cpu[kind].append(round(process_cpu_seconds(process.pid) - before, 2))
                rates.append(round(args.records / seconds))
        figures["produce"] = {
            "records": args.records,
            "record_size": args.record_size,
            "transaction_size": args.transaction_size,
            "idempotent_records_per_s": idempotent,
            "transactional_records_per_s": transactional,
            "ratio": ratio(transactional, idempotent),
            "idempotent_broker_cpu_s": cpu["idempotent"],
            "transactional_broker_cpu_s": cpu["transactional"],
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

"""Producer throughput, like Kafka's kafka-producer-perf-test.sh.

    python3 bench/producer_perf.py [--num-records 1000000] [--record-size 100]
        [--throughput -1] [--bootstrap-server H:P] [--acks 1] [--linger-ms 5]
        [--batch-size 262144] [--compression none|gzip|snappy|lz4|zstd] [--partitions 1]
        [--profile FILE]
        [--idempotence on|off]

Without ``--bootstrap-server`` it starts its own standalone broker (bench/standalone.py)
and makes it leader of the topic's partitions. Records are one random payload of
``--record-size`` bytes with null keys (Kafka's perf test does the same); every 1000th
record's latency (send to acknowledgement) is sampled. Progress goes to stderr every 5 s;
the last line of stdout is one JSON object of figures.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.standalone import run_perf_tool
from minibroker.client.accumulator import Delivery
from minibroker.client.producer import Producer
from minibroker.protocol.compression import CODEC_NAMES

SAMPLE_EVERY = 1000  # records between latency samples: sampling keeps the hot loop lean
REPORT_EVERY_S = 5.0  # Kafka's perf test reports every 5 s too
YIELD_EVERY = 200  # records between yields to the sender (SAMPLE_EVERY is a multiple)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--topic", default="perf-test")
    p.add_argument("--num-records", type=int, default=1_000_000)
    p.add_argument("--record-size", type=int, default=100)
    p.add_argument("--throughput", type=float, default=-1, help="records/s cap; -1 = none")
    p.add_argument("--bootstrap-server", help="default: start a standalone broker")
    p.add_argument("--acks", default="1", choices=("all", "-1", "0", "1"))
    p.add_argument("--linger-ms", type=float, default=5)
    p.add_argument("--batch-size", type=int, default=262_144)
    p.add_argument("--max-in-flight", type=int, default=5)
    p.add_argument("--compression", default="none", choices=tuple(CODEC_NAMES))
    p.add_argument(
        "--unordered",
        action="store_true",
        help="preserve_order=False: pipeline batches of one partition too",
    )
    p.add_argument(
        "--idempotence",
        choices=("on", "off"),
        help="enable_idempotence (default: the producer's own, on exactly with acks=all)",
    )
    p.add_argument("--partitions", type=int, default=1, help="partitions (standalone mode)")
    p.add_argument("--profile", help="write a cProfile of the client to this file")
    return p.parse_args()


async def produce(args: argparse.Namespace) -> dict[str, float]:
    payload = os.urandom(args.record_size)
    latencies: list[float] = []

    async def sample(delivery: Delivery, sent_at: float) -> None:
        await delivery.result()
        latencies.append(time.perf_counter() - sent_at)

    async with (
        trio.open_nursery() as nursery,
        Producer(
            args.bootstrap_server,
            acks=args.acks,
            linger_ms=args.linger_ms,
            batch_size=args.batch_size,
            max_in_flight=args.max_in_flight,
            preserve_order=not args.unordered,
            compression=None if args.compression == "none" else args.compression,
            enable_idempotence=None if args.idempotence is None else args.idempotence == "on",
        ) as producer,
    ):
        await producer.send(args.topic, payload)  # metadata and connection warmed up
        start = last_report = time.perf_counter()
        cpu_start = time.process_time()
        reported = 0
        send = producer.send_nowait
        topic = args.topic
        for i in range(args.num_records):
            delivery = send(topic, payload)
            if i % YIELD_EVERY == 0:
                await producer.wait_for_room()  # back-pressure, and the sender's turn
                if i % SAMPLE_EVERY == 0:
                    now = time.perf_counter()
                    nursery.start_soon(sample, delivery, now)
                    if args.throughput > 0:
                        ahead = i / args.throughput - (now - start)
                        if ahead > 0:
                            await trio.sleep(ahead)
                    if now - last_report >= REPORT_EVERY_S:
                        rate = (i - reported) / (now - last_report)
                        print(
                            f"{i} records sent, {rate:,.0f} records/sec "
                            f"({rate * args.record_size / 1e6:.2f} MB/sec)",
                            file=sys.stderr,
                        )
                        last_report, reported = now, i
        await producer.flush()
        elapsed = time.perf_counter() - start
        cpu = time.process_time() - cpu_start
    latencies.sort()
    n = len(latencies)
    return {
        "records": args.num_records,
        "record_size": args.record_size,
        "acks": args.acks,
        "batch_size": args.batch_size,
        "preserve_order": not args.unordered,
        "idempotence": producer.enable_idempotence,
        "seconds": round(elapsed, 3),
        "records_per_s": round(args.num_records / elapsed),
        "mb_per_s": round(args.num_records * args.record_size / elapsed / 1e6, 2),
        # The producer process's own CPU time: near ``seconds`` means the client, not
        # the broker or the network, sets the pace.
        "producer_cpu_seconds": round(cpu, 3),
        "avg_latency_ms": round(sum(latencies) / n * 1000, 2) if n else -1,
        "p50_latency_ms": round(latencies[n // 2] * 1000, 2) if n else -1,
        "p99_latency_ms": round(latencies[min(n - 1, n * 99 // 100)] * 1000, 2) if n else -1,
        "max_latency_ms": round(latencies[-1] * 1000, 2) if n else -1,
    }


def main() -> None:
    run_perf_tool(parse_args(), produce)


if __name__ == "__main__":
    main()

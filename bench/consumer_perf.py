"""Consumer throughput, like Kafka's kafka-consumer-perf-test.sh.

    python3 bench/consumer_perf.py [--num-records 300000] [--record-size 1024]
        [--bootstrap-server H:P --topic T] [--partitions 1] [--fetch-bytes 4194304]
        [--batches] [--profile FILE]

Without ``--bootstrap-server`` it starts its own standalone broker (bench/standalone.py),
fills the topic with ``--num-records`` records of ``--record-size`` bytes using the
bundled producer, then times reading them back from the beginning. With a server given
it reads ``--num-records`` records of an existing topic from the beginning. Records are
fully decoded into ConsumerRecord tuples (CRC checked) - what an application gets.
With ``--batches`` it reads with ``Consumer.poll_batches`` instead, the zero-object path:
CRC and structure checked the same, every value taken as a memoryview slice of the
fetched bytes.
The last line of stdout is one JSON object of figures.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.standalone import run_perf_tool
from minibroker.client.consumer import Consumer
from minibroker.client.producer import Producer


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--topic", default="consumer-perf-test")
    p.add_argument("--num-records", type=int, default=300_000)
    p.add_argument("--record-size", type=int, default=1024)
    p.add_argument("--bootstrap-server", help="default: start and fill a standalone broker")
    p.add_argument("--partitions", type=int, default=1, help="partitions (standalone mode)")
    p.add_argument(
        "--fetch-bytes",
        type=int,
        default=4 * 1024 * 1024,
        help="max bytes per partition per fetch (default 4 MiB)",
    )
    p.add_argument(
        "--batches", action="store_true", help="read with poll_batches (no record objects)"
    )
    p.add_argument("--profile", help="write a cProfile of the consumer to this file")
    return p.parse_args()


async def fill(args: argparse.Namespace) -> None:
    payload = os.urandom(args.record_size)
    async with Producer(args.bootstrap_server, acks=1, batch_size=1 << 20, linger_ms=20) as p:
        for _ in range(args.num_records):
            await p.enqueue(args.topic, payload)


async def consume(args: argparse.Namespace) -> dict[str, float]:
    async with Consumer(args.bootstrap_server, max_partition_fetch_bytes=args.fetch_bytes) as c:
        meta = await c.cluster.topic(args.topic, timeout_s=10)
        c.assign([(args.topic, p.partition) for p in meta.partitions])
        await c.seek_to_beginning()
        count = size = 0
        start, cpu_start = time.perf_counter(), time.process_time()
        while count < args.num_records and not args.batches:
            records = await c.poll(10_000, 100_000)
            if not records:
                break
            count += len(records)
            size += sum(len(r.value or b"") for r in records)
        while count < args.num_records and args.batches:
            views = await c.poll_batches(10_000)
            if not views:
                break
            for view in views:
                values = view.values()
                count += len(values)
                size += sum(map(len, filter(None, values)))  # None: a null value
        elapsed = time.perf_counter() - start
        cpu = time.process_time() - cpu_start
    return {
        "records": count,
        "record_size": args.record_size,
        "api": "poll_batches" if args.batches else "poll",
        "seconds": round(elapsed, 3),
        "records_per_s": round(count / elapsed),
        "mb_per_s": round(size / elapsed / 1e6, 2),
        # The consumer process's own CPU time: near ``seconds`` means decoding, not the
        # broker or the network, sets the pace.
        "consumer_cpu_seconds": round(cpu, 3),
    }


def main() -> None:
    run_perf_tool(parse_args(), consume, fill=fill)


if __name__ == "__main__":
    main()

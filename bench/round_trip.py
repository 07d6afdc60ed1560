"""One-record send-and-wait latency with the bundled Producer, and what it costs the broker.

    python3 bench/round_trip.py [--num-records 20000] [--record-size 100] [--acks 1]
        [--warmup 2000] [--profile FILE] [--broker-profile FILE]

Starts a standalone broker (bench/standalone.py), then sends ``--num-records`` records
one at a time with ``Producer(acks=..., linger_ms=0)``, each ``await send(...)`` waiting
for its acknowledgement before the next one starts. Reports the latency percentiles,
sequential produces per second, and the broker process's CPU time per request (user +
system, and each apart), read from /proc/<pid>/stat before and after (the clock-tick
resolution is 10 ms, hence the many requests). ``--profile`` / ``--broker-profile``
write cProfiles of the client / the broker timed by CPU time, not the wall clock. The
last line of stdout is one JSON object.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import sys
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.standalone import lead, standalone_broker_process
from minibroker.client.producer import Producer

TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--topic", default="round-trip")
    p.add_argument("--num-records", type=int, default=20_000)
    p.add_argument("--record-size", type=int, default=100)
    p.add_argument("--acks", default="1", choices=("all", "-1", "1"))
    p.add_argument("--warmup", type=int, default=2_000, help="sends before measuring")
    p.add_argument("--profile", help="write a cProfile of the client to this file")
    p.add_argument("--broker-profile", help="run the broker under cProfile, dump here")
    return p.parse_args()


def cpu_seconds(pid: int) -> tuple[float, float]:
    """User and system CPU time of process ``pid`` (all its threads), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) / TICKS_PER_S, int(fields[12]) / TICKS_PER_S  # utime, stime


def percentile(sorted_values: list[float], fraction: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * fraction))]


async def measure(args: argparse.Namespace) -> dict[str, object]:
    payload = os.urandom(args.record_size)
    latencies: list[float] = []
    async with Producer(args.bootstrap_server, acks=args.acks, linger_ms=0) as producer:
        for _ in range(args.warmup):
            await producer.send(args.topic, payload)
        send = producer.send
        topic = args.topic
        clock = time.perf_counter
        broker_cpu = cpu_seconds(args.broker_pid)
        cpu = time.process_time()
        start = clock()
        for _ in range(args.num_records):
            sent = clock()
            await send(topic, payload)
            latencies.append(clock() - sent)
        elapsed = clock() - start
        cpu = time.process_time() - cpu
        user, system = cpu_seconds(args.broker_pid)
        broker_user, broker_system = user - broker_cpu[0], system - broker_cpu[1]
    latencies.sort()
    n = args.num_records
    return {
        "records": n,
        "record_size": args.record_size,
        "acks": args.acks,
        "seconds": round(elapsed, 3),
        "produces_per_s": round(n / elapsed),
        "p50_ms": round(percentile(latencies, 0.50) * 1000, 3),
        "p99_ms": round(percentile(latencies, 0.99) * 1000, 3),
        "p999_ms": round(percentile(latencies, 0.999) * 1000, 3),
        "max_ms": round(latencies[-1] * 1000, 3),
        "broker_cpu_us_per_request": round((broker_user + broker_system) / n * 1e6, 1),
        "broker_user_us_per_request": round(broker_user / n * 1e6, 1),
        "broker_system_us_per_request": round(broker_system / n * 1e6, 1),
        "client_cpu_us_per_request": round(cpu / n * 1e6, 1),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def main() -> None:
    args = parse_args()
    with standalone_broker_process(profile=args.broker_profile) as (bootstrap, process):
        args.bootstrap_server = bootstrap
        args.broker_pid = process.pid
        trio.run(lead, bootstrap, args.topic, 1)
        profiler = cProfile.Profile(time.process_time) if args.profile else None
        if profiler:
            profiler.enable()
        figures = trio.run(measure, args)
        if profiler:
            profiler.disable()
            profiler.dump_stats(args.profile)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()

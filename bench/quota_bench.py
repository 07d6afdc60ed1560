"""Client quota bench: how closely a producer is held to its quota, and what quotas
cost the broker per request.

Starts ZooKeeper and one broker as processes (``minibroker zookeeper``, ``minibroker
broker`` with a Kafka listener) on free loopback ports, then, with confluent-kafka:

1. **held**: a producer whose client id has ``producer_byte_rate`` = ``--quota``
   (``minibroker quotas alter``) writes 16 KiB records as fast as it is let for
   ``--seconds`` after a 2 s warm-up (its first burst, quota.window.num x
   quota.window.size.seconds of quota, goes at loopback speed); prints the
   acknowledged rate over that time and per second.
2. **cost**: ``--requests`` produce requests of one 100-byte record each (linger.ms=0,
   acks=1, one request in flight) from client id ``cost``, first with no quota at all,
   then with quotas on that client id high enough never to throttle
   (producer_byte_rate and request_percentage: every request measured, counted and
   checked), after one warm-up round not kept, ``--rounds`` rounds, the side that goes
   first alternating from round to round; prints the broker process's CPU time (utime +
   stime from /proc, not the wall clock) per Produce request (the broker's own request
   count) for each, and the median and range of each side and of the per-round change.
3. **beside**: what a throttled client does to the others. A second client (``other``)
   sends one 100-byte record at a time and waits for each (``--requests`` sends), once
   alone and once while a producer held to ``--quota`` (client id ``held``) writes as
   fast as it is let, alternating ``--rounds`` times; p50 / p99 ms of each, and the
   ratio beside / alone. With ``--unthrottled`` the same also beside that producer
   with its quota removed (what the quota spares the others).

The last line is one JSON object with the figures.

    python3 bench/quota_bench.py [--quota 1048576] [--seconds 20] [--requests 5000]
        [--rounds 9] [--unthrottled]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

ROOT = Path(__file__).resolve().parents[1]
MINIBROKER = [sys.executable, "-m", "minibroker"]
RECORD = 16 * 1024
WARM_UP_S = 2.0
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_port(port: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def cli(bootstrap: str, *args: str) -> None:
    subprocess.run(
        [*MINIBROKER, *args, "--bootstrap-server", bootstrap], check=True, capture_output=True
    )


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime


def produce_requests(metrics_port: int) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read()
    found = re.search(
        rb'^kafka_network_requestmetrics_requests_total\{request="Produce"\} (\S+)$',
        text,
        re.MULTILINE,
    )
    return float(found.group(1)) if found else 0.0


def held(kafka: str, bootstrap: str, quota: int, seconds: float) -> dict[str, Any]:
    cli(bootstrap, "quotas", "alter", "--entity-type", "clients", "--entity-name", "held",
        "--add-config", f"producer_byte_rate={quota}")  # fmt: skip
    acked = [0]

    def delivered(err: object, msg: object) -> None:
        if err is None:
            acked[0] += RECORD

    producer = Producer(
        {"bootstrap.servers": kafka, "client.id": "held", "linger.ms": 5, "batch.size": 65536,
         "queue.buffering.max.kbytes": 2048}
    )  # fmt: skip
    payload = b"h" * RECORD
    marks: list[tuple[float, int]] = []
    start = time.monotonic()
    end = start + WARM_UP_S + seconds
    while (now := time.monotonic()) < end:
        if now >= start + WARM_UP_S and (not marks or now - marks[-1][0] >= 1.0):
            marks.append((now, acked[0]))
        try:
            producer.produce("held", payload, on_delivery=delivered)
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
    marks.append((time.monotonic(), acked[0]))
    producer.flush(60)
    (t0, a0), (t1, a1) = marks[0], marks[-1]
    per_second = [
        round((b - a) / (u - s) / quota, 3) for (s, a), (u, b) in itertools.pairwise(marks)
    ]
    return {
        "quota_bytes_per_s": quota,
        "achieved_bytes_per_s": round((a1 - a0) / (t1 - t0)),
        "achieved_over_quota": round((a1 - a0) / (t1 - t0) / quota, 3),
        "per_second_over_quota": per_second,
    }


def cost_round(kafka: str, pid: int, metrics_port: int, requests: int) -> float:
    """Broker CPU microseconds per Produce request over ``requests`` requests."""
    producer = Producer(
        {"bootstrap.servers": kafka, "client.id": "cost", "linger.ms": 0, "acks": 1,
         "max.in.flight.requests.per.connection": 1}
    )  # fmt: skip
    producer.produce("cost", b"c" * 100)
    producer.flush(30)  # connected, metadata known
    # the scrapes outside the CPU window: with quotas the metrics page is longer
    count0 = produce_requests(metrics_port)
    cpu0 = cpu_seconds(pid)
    for _ in range(requests):
        producer.produce("cost", b"c" * 100)
        producer.flush(30)
    cpu1 = cpu_seconds(pid)
    count1 = produce_requests(metrics_port)
    return (cpu1 - cpu0) / max(count1 - count0, 1) * 1e6


def send_and_wait(kafka: str, requests: int) -> dict[str, float]:
    """p50 / p99 ms of ``requests`` one-record sends from client id ``other``, each
    acknowledged before the next (after 200 warm-up sends)."""
    producer = Producer(
        {"bootstrap.servers": kafka, "client.id": "other", "linger.ms": 0, "acks": 1}
    )
    latencies: list[float] = []
    for i in range(requests + 200):
        started = time.perf_counter()
        producer.produce("other", b"o" * 100)
        producer.flush(30)
        if i >= 200:
            latencies.append(time.perf_counter() - started)
    latencies.sort()
    return {
        "p50_ms": latencies[len(latencies) // 2] * 1e3,
        "p99_ms": latencies[int(len(latencies) * 0.99)] * 1e3,
    }


def flood(kafka: str, stop: threading.Event) -> None:
    """Client id ``held`` writes 16 KiB records as fast as the broker lets it."""
    producer = Producer(
        {"bootstrap.servers": kafka, "client.id": "held", "linger.ms": 5, "batch.size": 65536,
         "queue.buffering.max.kbytes": 2048}
    )  # fmt: skip
    payload = b"h" * RECORD
    while not stop.is_set():
        try:
            producer.produce("held", payload)
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
    producer.flush(60)


def beside(kafka: str, requests: int) -> dict[str, float]:
    """send_and_wait while ``flood`` runs in a thread (librdkafka releases the GIL)."""
    stop = threading.Event()
    thread = threading.Thread(target=flood, args=(kafka, stop), daemon=True)
    thread.start()
    try:
        time.sleep(WARM_UP_S)  # past the flood's first burst
        return send_and_wait(kafka, requests)
    finally:
        stop.set()
        thread.join(120)


def spread(values: list[float]) -> dict[str, Any]:
    return {
        "median": round(statistics.median(values), 3),
        "range": [round(min(values), 3), round(max(values), 3)],
    }


def others(kafka: str, bootstrap: str, args: argparse.Namespace) -> dict[str, Any]:
    """Another client's send-and-wait latency alone and beside the throttled producer
    (``held`` still has its quota from ``held()``), alternating."""
    sides = ["alone", "beside_throttled"]
    if args.unthrottled:
        sides.append("beside_unthrottled")
    entity = ("--entity-type", "clients", "--entity-name", "held")
    found: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
    for round_number in range(args.rounds):
        order = sides if round_number % 2 == 0 else sides[::-1]
        for side in order:
            if side == "alone":
                found[side].append(send_and_wait(kafka, args.requests))
                continue
            if side == "beside_unthrottled":
                cli(bootstrap, "quotas", "alter", *entity, "--delete-config",
                    "producer_byte_rate")  # fmt: skip
            found[side].append(beside(kafka, args.requests))
            if side == "beside_unthrottled":
                cli(bootstrap, "quotas", "alter", *entity, "--add-config",
                    f"producer_byte_rate={args.quota}")  # fmt: skip
        print(json.dumps({s: found[s][-1] for s in sides}), flush=True)
    summary: dict[str, Any] = {}
    for side in sides:
        for key in ("p50_ms", "p99_ms"):
            summary[f"{side}_{key}"] = spread([run[key] for run in found[side]])
    for side in sides[1:]:
        for key in ("p50_ms", "p99_ms"):
            ratios = [b[key] / a[key] for a, b in zip(found["alone"], found[side], strict=True)]
            summary[f"{side}_over_alone_{key}"] = spread(ratios)
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quota", type=int, default=1_048_576)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument(
        "--unthrottled", action="store_true", help="beside: also with the quota removed"
    )
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory() as tmp:
        zk_port, port, kafka_port, metrics_port = (free_port() for _ in range(4))
        processes = [
            subprocess.Popen(
                [*MINIBROKER, "zookeeper", "--port", str(zk_port), "--data-dir", f"{tmp}/zk"],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        ]
        try:
            wait_port(zk_port)
            broker = subprocess.Popen(
                [*MINIBROKER, "broker", "--broker-id", "1", "--listen", f"127.0.0.1:{port}",
                 "--kafka-listen", f"127.0.0.1:{kafka_port}", "--log-dirs", f"{tmp}/logs",
                 "--zookeeper", f"127.0.0.1:{zk_port}", "--metrics-port", str(metrics_port)],
                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            processes.append(broker)
            wait_port(kafka_port)
            bootstrap, kafka = f"127.0.0.1:{port}", f"127.0.0.1:{kafka_port}"
            for topic in ("held", "cost", "other"):
                cli(bootstrap, "topic", "create", topic, "--partitions", "1",
                    "--replication-factor", "1")  # fmt: skip
            result: dict[str, Any] = {"held": held(kafka, bootstrap, args.quota, args.seconds)}
            print(json.dumps(result["held"]), flush=True)
            costs: dict[str, list[float]] = {"none": [], "quotas": []}
            entity = ("--entity-type", "clients", "--entity-name", "cost")
            never = "producer_byte_rate=1000000000000,request_percentage=100000"
            cost_round(kafka, broker.pid, metrics_port, args.requests)  # warm-up, not kept
            for round_number in range(args.rounds):
                order = ("none", "quotas") if round_number % 2 == 0 else ("quotas", "none")
                for side in order:
                    if side == "quotas":
                        cli(bootstrap, "quotas", "alter", *entity, "--add-config", never)
                    costs[side].append(cost_round(kafka, broker.pid, metrics_port, args.requests))
                    if side == "quotas":
                        cli(bootstrap, "quotas", "alter", *entity, "--delete-config",
                            "producer_byte_rate,request_percentage")  # fmt: skip
                print(json.dumps({k: round(v[-1], 1) for k, v in costs.items()}), flush=True)
            pairs = zip(costs["none"], costs["quotas"], strict=True)
            changes = [(q - n) / n * 100 for n, q in pairs]
            none, quotas = (statistics.median(costs[k]) for k in ("none", "quotas"))
            result["cpu_us_per_produce"] = {
                "none": [round(v, 1) for v in costs["none"]],
                "quotas": [round(v, 1) for v in costs["quotas"]],
                "none_median_range": spread(costs["none"]),
                "quotas_median_range": spread(costs["quotas"]),
                "median_increase_percent": round((quotas - none) / none * 100, 1),
                "per_round_increase_percent": spread(changes),
            }
            result["beside"] = others(kafka, bootstrap, args)
            result["load_average"] = [round(x, 2) for x in os.getloadavg()]
        finally:
            for process in reversed(processes):
                process.terminate()
                process.wait(30)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())

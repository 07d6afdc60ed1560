"""minibroker beside Redis Streams: one Python client process against one server, the
two taking turns run by run.

    python bench/vs_redis.py [--rounds 3] [--records 300000] [--round-trips 20000]
        [--redis-server PATH]

Each round runs both sides, the one that goes first alternating:

- **consume 1 KiB**: minibroker's side is ``bench/consumer_perf.py`` (a standalone
  broker filled with ``--records`` 1 KiB records, then the bundled ``Consumer`` reads
  them from the start, each record decoded and its batch's CRC checked); Redis's side
  fills a stream with as many entries of one 1 KiB field (pipelined XADD), then redis-py
  reads it from the start with ``XREAD COUNT 1000``. MB/s of values, and the client's
  CPU ms per MB (which the machine's load moves far less).
- **send and wait**: minibroker's side is ``bench/round_trip.py`` (the bundled
  ``Producer``, linger 0, acks=1, one 100-byte record at a time); Redis's side is one
  ``XADD`` of a 100-byte field at a time, each answered before the next. p50 / p99 ms
  after 2,000 warm-up sends, and the server's and the client's CPU microseconds per
  send.

Redis's client is redis-py with hiredis, its compiled reply parser (the ``bench`` extra:
``scripts/pip-install fast,bench``; without hiredis redis-py parses in Python and Redis
reads at a fraction of the speed). Redis runs as Debian's ``redis-server`` (installed
through ``scripts/need-debian`` when it is missing) with its defaults except RDB
snapshots, which
are off (``--save ""``), as minibroker does not fsync either; a fresh server and a fresh
broker each run. Prints one JSON line per run, then ``{"summary": {...}}`` with each
figure's medians and minibroker/Redis ratio (the issue's bars: consume >= 1.5x,
send-and-wait p50 <= 1.5x Redis's).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

try:
    import redis
    import redis.utils
except ImportError:  # the bench extra is not installed
    sys.exit("bench/vs_redis.py needs redis-py and hiredis: scripts/pip-install fast,bench")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.standalone import process_cpu_seconds

ROOT = Path(__file__).resolve().parents[1]
STREAM = "bench"
READ_COUNT = 1000  # entries per XREAD, as a consumer's fetch of ~1 MiB
WARMUP = 2000
START_TIMEOUT_S = 30.0


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--records", type=int, default=300_000)
    p.add_argument("--round-trips", type=int, default=20_000)
    p.add_argument("--redis-server", default=shutil.which("redis-server") or "redis-server")
    return p.parse_args()


@contextmanager
def redis_server(binary: str) -> Iterator[tuple[redis.Redis, int]]:
    """A fresh redis-server on a free port: a client and the server's pid."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with tempfile.TemporaryDirectory(prefix="vs-redis-") as tmp:
        argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
        argv += ["--appendonly", "no", "--dir", tmp]
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis(host="127.0.0.1", port=port)
        try:
            deadline = time.monotonic() + START_TIMEOUT_S
            while True:
                try:
                    client.ping()
                    break
                except redis.ConnectionError:
                    if time.monotonic() > deadline or process.poll() is not None:
                        raise
                    time.sleep(0.05)
            yield client, process.pid
        finally:
            client.close()
            process.terminate()
            process.wait(timeout=30)


def redis_consume(client: redis.Redis, records: int) -> tuple[float, float]:
    """MB/s of values XREAD reads from the start of a stream of ``records`` 1 KiB
    entries, and the client's CPU ms per MB."""
    value = os.urandom(1024)
    pipe = client.pipeline(transaction=False)
    for i in range(records):
        pipe.xadd(STREAM, {"v": value})
        if i % 1000 == 999:
            pipe.execute()
    pipe.execute()
    last = "0-0"
    count = size = 0
    started, cpu = time.perf_counter(), time.process_time()
    while count < records:
        answer = client.xread({STREAM: last}, count=READ_COUNT)
        entries = answer[0][1]
        for _, fields in entries:
            size += len(fields[b"v"])
        count += len(entries)
        last = entries[-1][0]
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    return size / elapsed / 1e6, cpu * 1000 / (size / 1e6)


def redis_round_trip(client: redis.Redis, count: int, server_pid: int) -> dict[str, float]:
    value = os.urandom(100)
    for _ in range(WARMUP):
        client.xadd("round-trip", {"v": value})
    latencies = []
    clock = time.perf_counter
    server_cpu, cpu = process_cpu_seconds(server_pid), time.process_time()
    for _ in range(count):
        sent = clock()
        client.xadd("round-trip", {"v": value})
        latencies.append(clock() - sent)
    cpu, server_cpu = time.process_time() - cpu, process_cpu_seconds(server_pid) - server_cpu
    latencies.sort()
    return {
        "p50_ms": latencies[len(latencies) // 2] * 1000,
        "p99_ms": latencies[int(len(latencies) * 0.99)] * 1000,
        "server_cpu_us": server_cpu / count * 1e6,
        "client_cpu_us": cpu / count * 1e6,
    }


def minibroker_side(args: argparse.Namespace) -> dict[str, float]:
    consumed = _bench("consumer_perf.py", "--num-records", str(args.records))
    round_trip = _bench("round_trip.py", "--num-records", str(args.round_trips))
    megabytes = consumed["records"] * consumed["record_size"] / 1e6
    return {
        "consume_1kib_mb_per_s": consumed["mb_per_s"],
        "consume_client_cpu_ms_per_mb": consumed["consumer_cpu_seconds"] * 1000 / megabytes,
        "send_and_wait_p50_ms": round_trip["p50_ms"],
        "send_and_wait_p99_ms": round_trip["p99_ms"],
        "send_and_wait_server_cpu_us": round_trip["broker_cpu_us_per_request"],
        "send_and_wait_client_cpu_us": round_trip["client_cpu_us_per_request"],
    }


def redis_side(args: argparse.Namespace) -> dict[str, float]:
    with redis_server(args.redis_server) as (client, _):
        consumed = redis_consume(client, args.records)
    with redis_server(args.redis_server) as (client, pid):
        round_trip = redis_round_trip(client, args.round_trips, pid)
    return {
        "consume_1kib_mb_per_s": consumed[0],
        "consume_client_cpu_ms_per_mb": consumed[1],
        "send_and_wait_p50_ms": round_trip["p50_ms"],
        "send_and_wait_p99_ms": round_trip["p99_ms"],
        "send_and_wait_server_cpu_us": round_trip["server_cpu_us"],
        "send_and_wait_client_cpu_us": round_trip["client_cpu_us"],
    }


def _bench(script: str, *args: str) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *args],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def main() -> None:
    args = parse_args()
    if not redis.utils.HIREDIS_AVAILABLE:
        sys.exit("bench/vs_redis.py: hiredis is missing (scripts/pip-install fast,bench)")
    if shutil.which(args.redis_server) is None:
        subprocess.run(
            [str(ROOT / "scripts" / "need-debian"), "redis-server:redis-server"], check=True
        )
        args.redis_server = shutil.which("redis-server") or "redis-server"
    runs: list[dict[str, object]] = []
    sides = {"minibroker": minibroker_side, "redis": redis_side}
    for round_number in range(args.rounds):
        order = list(sides) if round_number % 2 == 0 else list(sides)[::-1]
        for side in order:
            load = os.getloadavg()[0]
            figures = sides[side](args)
            run = {
                "round": round_number,
                "side": side,
                "figures": {k: round(v, 4) for k, v in figures.items()},
                "load_average": [round(load, 2), round(os.getloadavg()[0], 2)],
            }
            print(json.dumps(run), flush=True)
            runs.append(run)
    summary = {}
    for name in runs[0]["figures"]:  # type: ignore[union-attr]
        values = {
            side: [r["figures"][name] for r in runs if r["side"] == side]  # type: ignore[index]
            for side in sides
        }
        medians = {side: statistics.median(v) for side, v in values.items()}
        summary[name] = {
            "minibroker": round(medians["minibroker"], 4),
            "redis": round(medians["redis"], 4),
            "ratio": round(medians["minibroker"] / medians["redis"], 3),
            "range": {side: [min(v), max(v)] for side, v in values.items()},
        }
    print(json.dumps({"summary": summary}))


if __name__ == "__main__":
    main()

"""Produce and fetch throughput over TLS vs plaintext on one standalone broker.

    python3 bench/ssl_perf.py [--runs 3] [--megabytes 128] [--record-size 16384]
                              [--profile DIR]

Each run starts a fresh standalone broker (bench/standalone.py) twice - once with a
PLAINTEXT listener, once with an SSL one (a throwaway CA and certificate made with
client/cli/dev_certs.py) - alternating, so both see the same machine load. Against
each it produces ``--megabytes`` MiB in 1 MiB batches (acks=1, one partition), then
fetches all of it back from the start with the bundled Consumer. The figures are MiB/s
per run; the last line of stdout is one JSON object with per-protocol min / median /
max and the SSL / PLAINTEXT ratio of the medians (the target is >= 0.7).

Wall-clock figures on a shared machine swing with its load, so each run also records
the CPU seconds the client and the broker process spent (``*_cpu_mib_s``: MiB per CPU
second of both together); their ratio is what TLS costs, whatever else runs. The
broker's own share is ``*_broker_cpu_ms_mib`` (CPU milliseconds per MiB; for these the
ratio SSL / PLAINTEXT is above 1, the broker's extra cost of TLS).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.standalone import lead, standalone_broker_process
from minibroker.client.cli.dev_certs import issue, make_ca
from minibroker.client.consumer import Consumer
from minibroker.client.producer import Producer
from minibroker.net.security import ClientSecurity, client_ssl_context

TOPIC = "ssl-perf"
BATCH_BYTES = 1024 * 1024  # the batches the target is stated for
BROKER_PROPERTIES = ("message.max.bytes=2097152", "log.segment.bytes=268435456")


def _children_cpu_s() -> float:
    """CPU seconds (user + system) of this process's children (the broker), from /proc."""
    me = os.getpid()
    total = 0.0
    with open(f"/proc/{me}/task/{me}/children") as f:
        pids = f.read().split()
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _cpu_s() -> tuple[float, float]:
    """(CPU seconds of this process and the broker together, of the broker alone)."""
    broker = _children_cpu_s()
    return time.process_time() + broker, broker


async def produce(
    bootstrap: str, security: ClientSecurity | None, args: argparse.Namespace
) -> float:
    payload = os.urandom(args.record_size)
    count = args.megabytes * 1024 * 1024 // args.record_size
    async with Producer(
        bootstrap,
        acks=1,
        batch_size=BATCH_BYTES,
        max_request_size=2 * BATCH_BYTES,
        linger_ms=5,
        config=security,
    ) as producer:
        started = time.perf_counter()
        for i in range(count):
            producer.send_nowait(TOPIC, payload, partition=0)
            if i % 64 == 0:
                await trio.lowlevel.checkpoint()
        await producer.flush()
        elapsed = time.perf_counter() - started
    return count * args.record_size / elapsed / 2**20


async def fetch(bootstrap: str, security: ClientSecurity | None, args: argparse.Namespace) -> float:
    count = args.megabytes * 1024 * 1024 // args.record_size
    seen = 0
    async with Consumer(
        bootstrap, auto_offset_reset="earliest", max_partition_fetch_bytes=4 * BATCH_BYTES,
        config=security,
    ) as consumer:  # fmt: skip
        consumer.assign([(TOPIC, 0)])
        await consumer.seek_to_beginning()
        started = time.perf_counter()
        while seen < count:
            seen += len(await consumer.poll(timeout_ms=1000, max_records=100_000))
        elapsed = time.perf_counter() - started
    return seen * args.record_size / elapsed / 2**20


def _profiled(path: str | None, measure: Any, *args: Any) -> float:
    """``trio.run(measure, *args)``; under cProfile timed by CPU time, dumped to
    ``path``, when it is set."""
    if path is None:
        return float(trio.run(measure, *args))
    profiler = cProfile.Profile(time.process_time)
    try:
        return float(profiler.runcall(trio.run, measure, *args))
    finally:
        profiler.dump_stats(path)


def one_run(protocol: str, pki: Path, args: argparse.Namespace) -> dict[str, float]:
    properties = [*BROKER_PROPERTIES]
    security = None
    if protocol == "SSL":
        properties += [
            f"ssl.certificate.location={pki / 'broker.pem'}",
            f"ssl.key.location={pki / 'broker-key.pem'}",
        ]
        security = ClientSecurity("SSL", client_ssl_context(ca_location=str(pki / "ca.pem")))
    profile = None if args.profile is None else f"{args.profile}/{protocol}"
    broker = standalone_broker_process(
        *properties,
        listen=f"{protocol}://127.0.0.1:0",
        profile=None if profile is None else f"{profile}-broker.prof",
    )
    with broker as (bootstrap, _):
        trio.run(lead, bootstrap, TOPIC, 1, None, security)
        started = _cpu_s()
        produced = _profiled(
            profile and f"{profile}-produce.prof", produce, bootstrap, security, args
        )
        produce_done = _cpu_s()
        fetched = _profiled(profile and f"{profile}-fetch.prof", fetch, bootstrap, security, args)
        fetch_done = _cpu_s()
    produce_cpu, produce_broker_cpu = (b - a for a, b in zip(started, produce_done, strict=True))
    fetch_cpu, fetch_broker_cpu = (b - a for a, b in zip(produce_done, fetch_done, strict=True))
    return {
        "produce_mib_s": produced,
        "fetch_mib_s": fetched,
        "produce_cpu_mib_s": args.megabytes / produce_cpu,
        "fetch_cpu_mib_s": args.megabytes / fetch_cpu,
        "produce_broker_cpu_ms_mib": 1000 * produce_broker_cpu / args.megabytes,
        "fetch_broker_cpu_ms_mib": 1000 * fetch_broker_cpu / args.megabytes,
    }


def summary(values: list[float]) -> dict[str, float]:
    digits = 1 if min(values) >= 10 else 3  # CPU ms per MiB are below 10
    return {
        "min": round(min(values), digits),
        "median": round(statistics.median(values), digits),
        "max": round(max(values), digits),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--megabytes", type=int, default=128)
    p.add_argument("--record-size", type=int, default=16384)
    p.add_argument(
        "--profile",
        metavar="DIR",
        help="run the broker and the client under cProfile (CPU time); profiles to DIR",
    )
    args = p.parse_args()
    results: dict[str, list[dict[str, float]]] = {"PLAINTEXT": [], "SSL": []}
    with tempfile.TemporaryDirectory(prefix="ssl-perf-") as tmp:
        pki = Path(tmp)
        issue(make_ca(pki), pki, "broker")
        for run in range(args.runs):
            for protocol in ("PLAINTEXT", "SSL"):
                figures = one_run(protocol, pki, args)
                results[protocol].append(figures)
                load = os.getloadavg()[0]
                shown = {k: round(v, 1 if v >= 10 else 3) for k, v in figures.items()}
                print(f"run {run + 1} {protocol}: {shown} (load {load:.2f})", file=sys.stderr)
    report: dict[str, object] = {"megabytes": args.megabytes, "record_size": args.record_size}
    for what in (
        "produce_mib_s",
        "fetch_mib_s",
        "produce_cpu_mib_s",
        "fetch_cpu_mib_s",
        "produce_broker_cpu_ms_mib",
        "fetch_broker_cpu_ms_mib",
    ):
        plain = summary([r[what] for r in results["PLAINTEXT"]])
        tls = summary([r[what] for r in results["SSL"]])
        report[what] = {
            "PLAINTEXT": plain,
            "SSL": tls,
            "ratio": round(tls["median"] / plain["median"], 2) if plain["median"] else None,
        }
    report["load_average"] = round(os.getloadavg()[0], 2)
    print(json.dumps(report))


if __name__ == "__main__":
    main()

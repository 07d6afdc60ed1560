"""How long another client waits while one client sends the largest requests it may.

    python bench/request_stall.py [--seconds 3] [--partitions 5000] [--json]

Starts a standalone broker (bench/standalone.py) with a Kafka listener, makes it lead a
topic of ``--partitions`` partitions (and the offsets topic), then for each case runs
two clients for ``--seconds``: the *load* sends the case's request back to back on its
own connection, the *probe* sends a small request every 2 ms on another, already open
connection and records each round trip: a Metadata naming one topic of one partition
(``probe``), which costs the broker and this process well under a millisecond idle, so
what it measures is the wait the load imposes. (It once asked for the 3,000-partition
topic itself: each round trip then cost ~17 ms of encoding and decoding when idle, far
more on a loaded machine, and the bar measured the probe, not the stall.) Printed per
case: the probe's p50 / p99 / max in ms and how long the load's request took. The bar
(issue 30): the probe's p99 under 50 ms for every case.

Cases: the maximal request of each API the load may send (``request.max.partitions``
items: Produce, Fetch, ListOffsets, Metadata, OffsetCommit, OffsetFetch), and
oversized ones the broker must refuse cheaply (Metadata and Fetch naming 99,000
topics or partitions, OffsetCommit of 300,000 partitions, CreateTopics validate_only of
30,000 topics), on the msgpack listener and, for the oversized ones, on the Kafka
listener too.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.standalone import lead, standalone_broker
from minibroker.net.connection import Connection
from minibroker.protocol.api import (
    ApiKey,
    RequestHeader,
    encode_request,
    latest_version,
)
from minibroker.protocol.frames import FrameDecoder, encode_frame
from minibroker.protocol.kafka import codec as kafka_codec
from minibroker.protocol.records import Record, encode_batch

TOPIC = "wide"
PROBE_TOPIC = "probe"
"""The probe's topic: one partition, so a probe round trip costs next to nothing."""
PROBE_PAUSE_S = 0.002
WANTED_FILES = 65536  # each partition's log holds a few files open
REPEATS = 5  # requests per case in --loop-holds


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--partitions", type=int, default=3000)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--freeze",
        action="store_true",
        help="with --loop-holds: gc.freeze() after set-up (the collector's own pauses out)",
    )
    p.add_argument("-v", action="store_true", help="with --loop-holds: every request's step")
    p.add_argument(
        "--loop-holds",
        action="store_true",
        help="instead: run the broker in this process and report, per case, the longest"
        " event-loop step in CPU time (what a request makes every other client wait,"
        " independent of the machine's load)",
    )
    return p.parse_args()


class StepTimer(trio.abc.Instrument):
    """The longest task step, in this thread's CPU time (a loaded machine stretches
    wall-clock steps; CPU time is what the step itself cost)."""

    def __init__(self) -> None:
        self.longest = 0.0
        self.longest_task = ""
        self._started = time.thread_time()  # the step it is added in is under way

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self._started = time.thread_time()

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        step = time.thread_time() - self._started
        if step > self.longest:
            self.longest, self.longest_task = step, task.name


async def measure_loop_holds(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    from minibroker.broker.config.broker_config import BrokerConfig
    from minibroker.node.node import Node

    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="minibroker-bench-") as tmp:
        kafka_port = free_port()
        config = BrokerConfig.from_properties(
            None,
            {
                "broker.id": "1",
                "listeners": "PLAINTEXT://127.0.0.1:0",
                "kafka.listeners": f"127.0.0.1:{kafka_port}",
                "log.dirs": tmp,
                "standalone.accept.controller.requests": "true",
            },
        )
        async with trio.open_nursery() as nursery:
            broker = await nursery.start(Node(config).run)
            bootstrap = f"127.0.0.1:{broker.port}"
            kafka = f"127.0.0.1:{kafka_port}"
            await lead(bootstrap, TOPIC, args.partitions, kafka=kafka)
            await lead(bootstrap, "__consumer_offsets", 50, kafka=kafka)
            if args.freeze:  # what Python's collector adds: compare with and without
                gc.collect()
                gc.freeze()
            cases = _cases(args.partitions, broker.port, kafka_port)
            timer = StepTimer()
            trio.lowlevel.add_instrument(timer)
            for name, target, frame in cases:
                client = RawClient(target)
                holds = []
                for _ in range(REPEATS):
                    timer.longest = 0.0
                    await client.request(frame)
                    holds.append(timer.longest)
                    if args.v:
                        print(name, f"{1000 * timer.longest:.1f}", timer.longest_task)
                await client.aclose()
                holds.sort()
                results[name] = {
                    "longest_step_ms": 1000 * holds[-1],
                    "median_longest_step_ms": 1000 * statistics.median(holds),
                }
            trio.lowlevel.remove_instrument(timer)
            nursery.cancel_scope.cancel()
    return results


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def msgpack_cases(partitions: int) -> dict[str, tuple[int, dict[str, Any]]]:
    every = list(range(partitions))
    batch = encode_batch([Record(b"v", timestamp=1_000)])
    return {
        "produce": (
            ApiKey.PRODUCE,
            {
                "acks": 1,
                "timeout_ms": 5000,
                "topics": [
                    {"name": TOPIC, "partitions": [{"index": p, "records": batch} for p in every]}
                ],
            },
        ),
        "fetch": (ApiKey.FETCH, fetch_body(every)),
        "list_offsets": (
            ApiKey.LIST_OFFSETS,
            {
                "topics": [
                    {
                        "name": TOPIC,
                        "partitions": [{"partition_index": p, "timestamp": -1} for p in every],
                    }
                ]
            },
        ),
        "metadata_all": (ApiKey.METADATA, {"topics": None}),
        "offset_commit": (ApiKey.OFFSET_COMMIT, offset_commit_body(every)),
        "offset_fetch": (
            ApiKey.OFFSET_FETCH,
            {"group_id": "g", "topics": [{"name": TOPIC, "partition_indexes": every}]},
        ),
        "oversized_metadata_99k": (
            ApiKey.METADATA,
            {"topics": [{"name": f"t{i}"} for i in range(99_000)]},
        ),
        "oversized_fetch_99k": (ApiKey.FETCH, fetch_body(list(range(99_000)))),
        "oversized_offset_commit_300k": (
            ApiKey.OFFSET_COMMIT,
            offset_commit_body(list(range(300_000))),
        ),
        "oversized_create_topics_30k": (
            ApiKey.CREATE_TOPICS,
            {
                "topics": [
                    {"name": f"t{i}", "num_partitions": 1, "replication_factor": 1}
                    for i in range(30_000)
                ],
                "timeout_ms": 1000,
                "validate_only": True,
            },
        ),
    }


def fetch_body(partitions: list[int]) -> dict[str, Any]:
    return {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "topics": [
            {
                "topic": TOPIC,
                "partitions": [
                    {"partition": p, "fetch_offset": 0, "partition_max_bytes": 64}
                    for p in partitions
                ],
            }
        ],
    }


def offset_commit_body(partitions: list[int]) -> dict[str, Any]:
    return {
        "group_id": "g",
        "generation_id": -1,
        "member_id": "",
        "topics": [
            {
                "name": TOPIC,
                "partitions": [{"partition_index": p, "committed_offset": 0} for p in partitions],
            }
        ],
    }


def kafka_cases() -> dict[str, tuple[int, int, dict[str, Any]]]:
    return {
        "kafka_oversized_metadata_99k": (
            ApiKey.METADATA,
            9,
            {
                "topics": [{"name": f"t{i}"} for i in range(99_000)],
                "allow_auto_topic_creation": False,
            },
        ),
        "kafka_oversized_offset_commit_300k": (
            ApiKey.OFFSET_COMMIT,
            2,
            {
                "group_id": "g",
                "generation_id": -1,
                "member_id": "",
                "retention_time_ms": -1,
                "topics": [
                    {
                        "name": TOPIC,
                        "partitions": [
                            {"partition_index": p, "committed_offset": 0} for p in range(300_000)
                        ],
                    }
                ],
            },
        ),
    }


class RawClient:
    """Sends pre-encoded request frames and waits for each answer without decoding it,
    so the load costs this process almost nothing (the probe shares its event loop);
    reconnects when the broker closed the connection (a refused oversized request)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.stream: trio.SocketStream | None = None
        self.decoder = FrameDecoder(1 << 30)

    async def request(self, frame: bytes) -> None:
        if self.stream is None:
            self.stream = await trio.open_tcp_stream("127.0.0.1", self.port)
            self.decoder = FrameDecoder(1 << 30)
        try:
            await self.stream.send_all(frame)
            while not isinstance(self.decoder.next_frame(), bytes):
                data = await self.stream.receive_some(1 << 20)
                if not data:
                    raise trio.BrokenResourceError
                self.decoder.feed(data)
        except (trio.BrokenResourceError, OSError):
            await self.stream.aclose()
            self.stream = None

    async def aclose(self) -> None:
        if self.stream is not None:
            await self.stream.aclose()


async def run_case(
    host: str, port: int, send: Callable[[], Awaitable[None]], seconds: float
) -> dict[str, float]:
    latencies: list[float] = []
    took: list[float] = []

    async def load() -> None:
        while True:
            started = time.perf_counter()
            await send()
            took.append(time.perf_counter() - started)

    async def probe() -> None:
        async with Connection(host, port) as conn:
            body = {"topics": [{"name": PROBE_TOPIC}], "allow_auto_topic_creation": False}
            while True:
                started = time.perf_counter()
                await conn.request(ApiKey.METADATA, body)
                latencies.append(time.perf_counter() - started)
                await trio.sleep(PROBE_PAUSE_S)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(probe)
        nursery.start_soon(load)
        await trio.sleep(seconds)
        nursery.cancel_scope.cancel()
    latencies.sort()
    return {
        "probe_p50_ms": 1000 * statistics.median(latencies),
        "probe_p99_ms": 1000 * latencies[int(0.99 * (len(latencies) - 1))],
        "probe_max_ms": 1000 * latencies[-1],
        "probes": len(latencies),
        "request_ms": 1000 * statistics.median(took) if took else 0.0,
    }


async def measure(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    kafka_port = free_port()
    with standalone_broker(f"kafka.listeners=127.0.0.1:{kafka_port}") as bootstrap:
        host, _, port_text = bootstrap.rpartition(":")
        port = int(port_text)
        await lead(bootstrap, TOPIC, args.partitions, kafka=f"127.0.0.1:{kafka_port}")
        await lead(bootstrap, PROBE_TOPIC, 1, kafka=f"127.0.0.1:{kafka_port}")
        await lead(bootstrap, "__consumer_offsets", 50, kafka=f"127.0.0.1:{kafka_port}")
        results: dict[str, dict[str, float]] = {}

        async def idle() -> None:
            await trio.sleep(args.seconds)

        results["idle"] = await run_case(host, port, idle, args.seconds)
        for name, target, frame in _cases(args.partitions, port, kafka_port):
            client = RawClient(target)

            async def send(client: RawClient = client, frame: bytes = frame) -> None:
                await client.request(frame)

            results[name] = await run_case(host, port, send, args.seconds)
            await client.aclose()
        return results


def _cases(partitions: int, port: int, kafka_port: int) -> list[tuple[str, int, bytes]]:
    """(name, port, pre-encoded request frame) of every case."""
    cases: list[tuple[str, int, bytes]] = []
    for name, (api_key, body) in msgpack_cases(partitions).items():
        payload = encode_request(api_key, latest_version(api_key), 1, "load", body)
        cases.append((name, port, encode_frame(payload)))
    for name, (api_key, version, body) in kafka_cases().items():
        header = RequestHeader(api_key, version, 1, "load")
        cases.append((name, kafka_port, kafka_codec.encode_request(header, body)))
    return cases


def main() -> None:
    args = parse_args()
    # Thousands of partitions hold thousands of files open: the broker (a child)
    # inherits the raised soft limit.
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:  # root may raise the hard limit too
        resource.setrlimit(resource.RLIMIT_NOFILE, (WANTED_FILES, WANTED_FILES))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if args.loop_holds:
        holds = trio.run(measure_loop_holds, args)
        if args.json:
            print(json.dumps(holds))
            return
        print(f"{'case':34} {'longest step':>13} {'median':>8}  (ms of CPU)")
        for name, h in holds.items():
            print(f"{name:34} {h['longest_step_ms']:13.1f} {h['median_longest_step_ms']:8.1f}")
        return
    results = trio.run(measure, args)
    if args.json:
        print(json.dumps(results))
        return
    print(f"{'case':34} {'p50':>7} {'p99':>7} {'max':>7} {'probes':>7} {'request':>9}  (ms)")
    for name, r in results.items():
        print(
            f"{name:34} {r['probe_p50_ms']:7.1f} {r['probe_p99_ms']:7.1f} "
            f"{r['probe_max_ms']:7.1f} {r['probes']:7.0f} {r['request_ms']:9.1f}"
        )


if __name__ == "__main__":
    main()

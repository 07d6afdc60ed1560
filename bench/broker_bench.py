"""Single-broker throughput and latency over loopback, against a plain Trio echo ceiling.

    python3 bench/broker_bench.py [--seconds 3] [--profile FILE]

Starts ``minibroker broker`` (standalone, one partition led via LeaderAndIsr sent by
this script) and an echo server, each in its own process, then drives both with the
same bare frame client (pre-encoded request frames, responses only framed, not
decoded - so client cost is equal and the ratio isolates the server):

- produce_mb_s: 1 MiB batches (1024 x 1 KiB records), acks=1, 4 in flight;
- fetch_mb_s: consumer fetches of those batches (one 1 MiB batch each), 4 in flight;
- small_rtt_per_s / small_pipelined_per_s: a one-topic Metadata request (answered from
  the metadata cache: the request path without storage), one at a time / 64 in flight;
- small_produce_rtt_per_s / small_produce_pipelined_per_s: the same with a one-record
  (100-byte) produce, acks=1;
- produce_p99_ms: small produces sent open-loop at 1,000/s; p50 / p99 / max latency.

The ceiling is bench/echo.py's plain Trio echo (each frame written back unchanged);
for fetch, its canned mode answers each small request with a frame the size of the
broker's 1 MiB fetch response. Prints one JSON object on its last line.
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import socket
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.echo import echo_process
from minibroker.protocol.api import ApiKey, decode_response, encode_request_buffers
from minibroker.protocol.frames import NEED_DATA, FrameDecoder
from minibroker.protocol.records import encode_values

TOPIC = "bench"
BIG_RECORDS = 1024
BIG_RECORD_BYTES = 1024
SMALL_RECORD_BYTES = 100
WINDOW_BIG = 4
WINDOW_SMALL = 64
RATE_PER_S = 1000


def frame(api_key: ApiKey, body: dict[str, Any], correlation_id: int = 1) -> bytes:
    return b"".join(
        bytes(b) for b in encode_request_buffers(api_key, 0, correlation_id, "bench", body)
    )


def produce_frame(records: bytes) -> bytes:
    body = {
        "acks": 1,
        "timeout_ms": 30_000,
        "topics": [{"name": TOPIC, "partitions": [{"index": 0, "records": records}]}],
    }
    return frame(ApiKey.PRODUCE, body)


def fetch_frame(offset: int, max_bytes: int) -> bytes:
    body = {
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": max_bytes,
        "topics": [
            {
                "topic": TOPIC,
                "partitions": [
                    {"partition": 0, "fetch_offset": offset, "partition_max_bytes": max_bytes}
                ],
            }
        ],
    }
    return frame(ApiKey.FETCH, body)


class FrameClient:
    """Pre-encoded frames out, whole response frames in (counted, not decoded).

    A plain blocking/non-blocking socket client, not Trio: the client must cost as
    little as possible so that the figures describe the server.
    """

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.decoder = FrameDecoder(1 << 30)

    @classmethod
    def connect(cls, port: int) -> FrameClient:
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(sock)

    def close(self) -> None:
        self.sock.close()

    def _feed(self, data: bytes) -> None:
        if not data:
            raise EOFError("server closed the connection")
        self.decoder.feed(data)

    def receive(self) -> bytes:
        self.sock.setblocking(True)
        while True:
            got = self.decoder.next_frame()
            if got is not NEED_DATA:
                assert isinstance(got, bytes)
                return got
            self._feed(self.sock.recv(1 << 20))

    def round_trip(self, data: bytes) -> bytes:
        self.sock.setblocking(True)
        self.sock.sendall(data)
        return self.receive()

    def pipelined(self, frames: Sequence[bytes], window: int) -> tuple[int, float]:
        """Send all ``frames`` keeping ``window`` in flight; (response bytes, seconds)."""
        sock = self.sock
        sock.setblocking(False)
        selector = selectors.DefaultSelector()
        selector.register(sock, selectors.EVENT_READ)
        out = memoryview(b"")
        sent = done = received = 0
        start = time.perf_counter()
        while done < len(frames):
            progress = False
            if not out and sent < len(frames) and sent - done < window:
                out = memoryview(frames[sent])
                sent += 1
            if out:
                try:
                    out = out[sock.send(out) :]
                    progress = True
                except BlockingIOError:
                    pass
            try:
                self._feed(sock.recv(1 << 20))
                progress = True
            except BlockingIOError:
                pass
            while (got := self.decoder.next_frame()) is not NEED_DATA:
                assert isinstance(got, bytes)
                done += 1
                received += len(got)
            if not progress:
                events = selectors.EVENT_READ | (selectors.EVENT_WRITE if out else 0)
                selector.modify(sock, events)
                selector.select()
        selector.close()
        return received, time.perf_counter() - start

    def open_loop(self, data: bytes, rate: int, seconds: float) -> list[float]:
        """Send ``data`` ``rate`` times a second; each response's latency in ms."""
        sock = self.sock
        sock.setblocking(False)
        selector = selectors.DefaultSelector()
        selector.register(sock, selectors.EVENT_READ)
        count = int(rate * seconds)
        sent_at: deque[float] = deque()
        latencies: list[float] = []
        start = time.perf_counter()
        sent = 0
        while len(latencies) < count:
            now = time.perf_counter()
            if sent < count and now >= start + sent / rate:
                sent_at.append(now)
                sock.sendall(data)  # small: fits the socket buffer
                sent += 1
                continue
            due = start + sent / rate if sent < count else now + 1
            selector.select(max(0.0, due - now))
            try:
                self._feed(sock.recv(1 << 20))
            except BlockingIOError:
                continue
            now = time.perf_counter()
            while self.decoder.next_frame() is not NEED_DATA:
                latencies.append((now - sent_at.popleft()) * 1000)
        selector.close()
        return latencies


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def check_ok(client: FrameClient, data: bytes, api_key: ApiKey) -> None:
    _, body = decode_response(client.round_trip(data), api_key, 0)
    partition = body["topics"][0]["partitions"][0]
    if partition["error_code"]:
        raise RuntimeError(f"{api_key.name} failed: {partition}")


class Target:
    """One server under test: a connection to it (and to its fetch stand-in)."""

    def __init__(self, port: int, fetch_port: int | None = None) -> None:
        self.client = FrameClient.connect(port)
        self.fetch_client = self.client if fetch_port is None else FrameClient.connect(fetch_port)
        self.results: dict[str, float] = {}


BIG = encode_values([b"x" * BIG_RECORD_BYTES] * BIG_RECORDS, timestamp=int(time.time() * 1000))
BIG_FRAME = produce_frame(BIG)
SMALL_FRAME = produce_frame(encode_values([b"s" * SMALL_RECORD_BYTES], timestamp=1))
METADATA_FRAME = frame(ApiKey.METADATA, {"topics": [{"name": TOPIC}]})


def produce_big(target: Target, seconds: float) -> int:
    """1 MiB produces for about ``seconds``; returns how many batches were sent."""
    client = target.client
    client.pipelined([BIG_FRAME] * 20, WINDOW_BIG)  # warm-up
    n = 100
    _, elapsed = client.pipelined([BIG_FRAME] * n, WINDOW_BIG)
    m = max(n, int(n * seconds / elapsed))
    _, elapsed = client.pipelined([BIG_FRAME] * m, WINDOW_BIG)
    target.results["produce_mb_s"] = m * len(BIG) / elapsed / 1e6
    return 20 + n + m


def fetch_big(target: Target, batches: int) -> None:
    frames = [fetch_frame(i * BIG_RECORDS, len(BIG)) for i in range(batches)]
    received, elapsed = target.fetch_client.pipelined(frames, WINDOW_BIG)
    target.results["fetch_mb_s"] = received / elapsed / 1e6


def small_round_trips(target: Target, seconds: float, data: bytes, name: str) -> float:
    client = target.client
    start = time.perf_counter()
    rounds = 0
    while time.perf_counter() - start < seconds:
        for _ in range(100):
            client.round_trip(data)
        rounds += 100
    rate = rounds / (time.perf_counter() - start)
    target.results[f"{name}_rtt_per_s"] = rate
    return rate


def small_pipelined(target: Target, count: int, data: bytes, name: str) -> None:
    _, elapsed = target.client.pipelined([data] * count, WINDOW_SMALL)
    target.results[f"{name}_pipelined_per_s"] = count / elapsed


def latency(target: Target, seconds: float) -> None:
    latencies = target.client.open_loop(SMALL_FRAME, RATE_PER_S, seconds)
    target.results["produce_p50_ms"] = percentile(latencies, 50)
    target.results["produce_p99_ms"] = percentile(latencies, 99)
    target.results["produce_max_ms"] = max(latencies)


def measure(broker: Target, echo: Target, seconds: float) -> None:
    """Each workload on the broker, then at once on the echo: the machine's load (other
    processes) then affects both sides of each ratio alike."""
    check_ok(broker.client, BIG_FRAME, ApiKey.PRODUCE)  # the figures mean nothing otherwise
    check_ok(broker.client, fetch_frame(0, len(BIG)), ApiKey.FETCH)
    check_ok(broker.client, SMALL_FRAME, ApiKey.PRODUCE)
    _, body = decode_response(broker.client.round_trip(METADATA_FRAME), ApiKey.METADATA, 0)
    assert body["topics"][0]["error_code"] == 0, body
    batches = produce_big(broker, seconds) + 1
    produce_big(echo, seconds)
    count = min(batches, 2000)
    fetch_big(broker, count)
    fetch_big(echo, count)
    for data, name in ((METADATA_FRAME, "small"), (SMALL_FRAME, "small_produce")):
        rate = small_round_trips(broker, seconds, data, name)
        small_round_trips(echo, seconds, data, name)
        count = int(rate * seconds * 3)
        small_pipelined(broker, count, data, name)
        small_pipelined(echo, count, data, name)
    latency(broker, seconds)
    latency(echo, seconds)


# -- servers ----------------------------------------------------------------------------------


def start(args: list[str], env: dict[str, str]) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        raise RuntimeError(f"{args[:4]} exited before reporting its port")
    return proc, int(line.split()[-1])


async def lead_partition(port: int) -> None:
    from minibroker.net.connection import Connection

    async with Connection("127.0.0.1", port) as conn:
        header = {"controller_id": 99, "controller_epoch": 1, "broker_epoch": -1}
        state = {
            "topic_name": TOPIC,
            "partition_index": 0,
            "controller_epoch": 1,
            "leader": 1,
            "leader_epoch": 0,
            "isr": [1],
            "zk_version": 0,
            "replicas": [1],
            "is_new": True,
        }
        body = {**header, "partition_states": [state], "live_leaders": []}
        response = await conn.request(ApiKey.LEADER_AND_ISR, body)
        assert response["error_code"] == 0, response
        del state["is_new"]
        me = {"id": 1, "host": "127.0.0.1", "port": port}
        body = {**header, "partition_states": [state], "live_brokers": [me]}
        response = await conn.request(ApiKey.UPDATE_METADATA, body)
        assert response["error_code"] == 0, response


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--profile", help="run the broker under cProfile, dump to this file")
    args = parser.parse_args()
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root)}
    with tempfile.TemporaryDirectory(prefix="broker-bench-") as tmp:
        broker_cmd = [sys.executable]
        if args.profile:
            broker_cmd += ["-m", "cProfile", "-o", args.profile]
        broker_cmd += [
            str(root / "client" / "cli" / "main.py"),
            "broker",
            "--broker-id", "1",
            "--listen", "127.0.0.1:0",
            "--log-dirs", tmp,
            "--log-level", "WARNING",
            # 1 MiB of record values plus batch overhead is a little over Kafka's default
            "--set", f"message.max.bytes={2 << 20}",
            # this script plays the controller (LeaderAndIsr) for the standalone broker
            "--set", "standalone.accept.controller.requests=true",
        ]  # fmt: skip
        fetch_answer = len(BIG) + 200  # about the size of a fetch response
        broker, broker_port = start(broker_cmd, env)
        try:
            with (
                echo_process("echo") as echo_port,
                echo_process("echo", fetch_answer) as canned_port,
            ):
                trio.run(lead_partition, broker_port)
                on_broker = Target(broker_port)
                on_echo = Target(echo_port, canned_port)
                measure(on_broker, on_echo, args.seconds)
        finally:
            broker.terminate()
            broker.wait(timeout=30)
    mine, ceiling = on_broker.results, on_echo.results
    figures: dict[str, Any] = {f"broker_{k}": round(v, 3) for k, v in mine.items()}
    figures |= {f"echo_{k}": round(v, 3) for k, v in ceiling.items()}
    ratios = ["produce_mb_s", "fetch_mb_s"]
    ratios += [
        f"{n}_{k}" for n in ("small", "small_produce") for k in ("rtt_per_s", "pipelined_per_s")
    ]
    for key in ratios:
        figures[f"ratio_{key}"] = round(mine[key] / ceiling[key], 3)
    figures["ratio_produce_p99_ms"] = round(mine["produce_p99_ms"] / ceiling["produce_p99_ms"], 3)
    figures["load_average_1m"] = os.getloadavg()[0]
    print(json.dumps(figures))


if __name__ == "__main__":
    main()

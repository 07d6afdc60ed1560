"""Kafka clients against one broker's Kafka listener, and that listener against the
msgpack one for the same payloads.

    python3 bench/kafka_client_perf.py [--num-records 1000000] [--record-size 100]
        [--consume-record-size 1024] [--consume-records 300000]
        [--wire-batch-bytes 1048576] [--wire-requests 200] [--bootstrap-server H:P]

Three measurements, one JSON line of figures at the end:

- ``produce``: confluent-kafka (librdkafka) sends ``--num-records`` records of
  ``--record-size`` random bytes, acks=1, no compression (Kafka's perf-test settings);
  records/s and MB/s from the first send to the last delivery report.
- ``consume``: the topic is filled with ``--consume-records`` records of
  ``--consume-record-size`` bytes, then a confluent-kafka consumer with manual
  assignment reads them all; MB/s of record values.
- ``wire``: the same ``--wire-batch-bytes`` record batch sent ``--wire-requests``
  times as Produce (acks=1), then read back by Fetch requests of that size, over the
  msgpack listener and over the Kafka listener in alternating rounds (best of three),
  one request in flight on a plain socket. The ratio Kafka / msgpack of each is the
  listener's own cost, with no client library in the comparison.

Without ``--bootstrap-server`` (the msgpack address of a broker that also has a Kafka
listener) it starts a standalone broker with both (bench/standalone.py).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import struct
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.standalone import lead, standalone_broker
from minibroker.net.connection import Connection
from minibroker.protocol import api as msgpack_api
from minibroker.protocol.api import ApiKey, RequestHeader
from minibroker.protocol.frames import encode_frame
from minibroker.protocol.kafka import codec as kafka_codec
from minibroker.protocol.records import Record, encode_batch, iter_headers

PRODUCE_TOPIC = "kafka-perf-produce"
CONSUME_TOPIC = "kafka-perf-consume"
WIRE_TOPICS = {"msgpack": "wire-msgpack", "kafka": "wire-kafka"}
POLL_EVERY = 10_000  # records between producer polls (delivery callbacks)
FETCH_VERSION = 12
PRODUCE_VERSION = 9
WIRE_ROUNDS = 3  # alternating msgpack / Kafka rounds of the wire measurement


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--num-records", type=int, default=1_000_000)
    p.add_argument("--record-size", type=int, default=100)
    p.add_argument("--consume-records", type=int, default=300_000)
    p.add_argument("--consume-record-size", type=int, default=1024)
    p.add_argument("--wire-batch-bytes", type=int, default=1 << 20)
    p.add_argument("--wire-requests", type=int, default=200)
    p.add_argument("--bootstrap-server", help="msgpack host:port; default: a standalone broker")
    return p.parse_args()


# -- the Kafka clients ---------------------------------------------------------------------


def produce(kafka: str, topic: str, count: int, size: int, linger_ms: int = 5) -> float:
    """Seconds confluent-kafka takes to send and get acknowledged ``count`` records."""
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": kafka,
            "acks": "1",
            "linger.ms": linger_ms,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 2_000_000,
        }
    )
    payload = os.urandom(size)
    failures: list[object] = []

    def delivered(error: object, _: object) -> None:
        if error is not None:
            failures.append(error)

    started = time.perf_counter()
    send = producer.produce
    for i in range(count):
        while True:
            try:
                send(topic, payload, partition=0, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.01)
        if i % POLL_EVERY == 0:
            producer.poll(0)
    if producer.flush(600) != 0 or failures:
        raise RuntimeError(f"produce failed: {failures[:3]}")
    return time.perf_counter() - started


def consume(kafka: str, topic: str, count: int) -> tuple[float, int]:
    """(seconds, value bytes) confluent-kafka takes to read ``count`` records."""
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": kafka,
            "group.id": "kafka-client-perf",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52_428_800,
            "max.partition.fetch.bytes": 10_485_760,
        }
    )
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    seen = value_bytes = 0
    started = time.perf_counter()
    try:
        while seen < count:
            for message in consumer.consume(10_000, 1.0):
                if message.error() is not None:
                    raise RuntimeError(str(message.error()))
                seen += 1
                value_bytes += len(message.value())
    finally:
        elapsed = time.perf_counter() - started
        consumer.close()
    return elapsed, value_bytes


# -- the two listeners, one raw request at a time ---------------------------------------------


class RawSocket:
    """One blocking connection that sends a framed request and reads one response."""

    def __init__(self, address: str) -> None:
        host, _, port = address.rpartition(":")
        self.sock = socket.create_connection((host, int(port)))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def call(self, frame: bytes) -> bytes:
        self.sock.sendall(frame)
        (size,) = struct.unpack(">i", self._exactly(4))
        return self._exactly(size)

    def _exactly(self, n: int) -> bytes:
        view = memoryview(bytearray(n))
        got = 0
        while got < n:
            chunk = self.sock.recv_into(view[got:], n - got)
            if not chunk:
                raise ConnectionError("broker closed the connection")
            got += chunk
        return bytes(view)

    def close(self) -> None:
        self.sock.close()


def _produce_body(topic: str, batch: bytes) -> dict[str, Any]:
    return {
        "acks": 1,
        "timeout_ms": 30_000,
        "topics": [{"name": topic, "partitions": [{"index": 0, "records": batch}]}],
    }


def _fetch_body(topic: str, offset: int, max_bytes: int) -> dict[str, Any]:
    return {
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": max_bytes,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {"partition": 0, "fetch_offset": offset, "partition_max_bytes": max_bytes}
                ],
            }
        ],
    }


def _msgpack_call(raw: RawSocket, key: ApiKey, body: dict[str, Any]) -> dict[str, Any]:
    version = msgpack_api.latest_version(key)
    frame = encode_frame(msgpack_api.encode_request(key, version, 1, "perf", body))
    _, answer = msgpack_api.decode_response(raw.call(frame), key, version)
    result: dict[str, Any] = answer
    return result


def _kafka_call(raw: RawSocket, key: ApiKey, body: dict[str, Any]) -> dict[str, Any]:
    version = PRODUCE_VERSION if key == ApiKey.PRODUCE else FETCH_VERSION
    frame = kafka_codec.encode_request(RequestHeader(key, version, 1, "perf"), body)
    _, answer = kafka_codec.decode_response(raw.call(frame), key, version)
    return answer


def wire(
    address: str,
    call: Callable[[RawSocket, ApiKey, dict[str, Any]], dict[str, Any]],
    topic: str,
    batch: bytes,
    requests: int,
) -> dict[str, float]:
    """MB/s of Produce, then of Fetch reading it all back, over one listener."""
    raw = RawSocket(address)
    try:
        started = time.perf_counter()
        for _ in range(requests):
            answer = call(raw, ApiKey.PRODUCE, _produce_body(topic, batch))
            error = answer["topics"][0]["partitions"][0]["error_code"]
            if error:
                raise RuntimeError(f"produce error {error}")
        produced = time.perf_counter() - started
        offset = fetched_bytes = 0
        started = time.perf_counter()
        while fetched_bytes < requests * len(batch):
            answer = call(raw, ApiKey.FETCH, _fetch_body(topic, offset, len(batch)))
            records = answer["topics"][0]["partitions"][0]["records"]
            for _, header in iter_headers(records):
                offset = header.next_offset
                fetched_bytes += header.size
        fetched = time.perf_counter() - started
    finally:
        raw.close()
    total_mb = requests * len(batch) / 1e6
    return {"produce_mb_s": total_mb / produced, "fetch_mb_s": total_mb / fetched}


def _wire_batch(target_bytes: int) -> bytes:
    value = os.urandom(1000)
    count = max(1, target_bytes // 1010)
    return encode_batch([Record(value) for _ in range(count)])


async def _kafka_address(bootstrap: str) -> str:
    """The Kafka listener the broker at ``bootstrap`` advertises (msgpack Metadata)."""
    host, _, port = bootstrap.rpartition(":")
    async with Connection(host, int(port)) as conn:
        answer = await conn.request(ApiKey.METADATA, {"topics": []})
    [broker] = [b for b in answer["brokers"] if "kafka_host" in b][:1]
    return f"{broker['kafka_host']}:{broker['kafka_port']}"


@contextlib.contextmanager
def _broker(args: argparse.Namespace) -> Iterator[tuple[str, bool]]:
    if args.bootstrap_server:
        yield args.bootstrap_server, False
        return
    with standalone_broker("kafka.listeners=127.0.0.1:0") as bootstrap:
        yield bootstrap, True


def main() -> None:
    args = parse_args()
    figures: dict[str, Any] = {"load_average_before": os.getloadavg()[0]}
    with _broker(args) as (bootstrap, standalone):
        kafka = trio.run(_kafka_address, bootstrap)
        if standalone:
            for topic in [PRODUCE_TOPIC, CONSUME_TOPIC, *WIRE_TOPICS.values()]:
                trio.run(lead, bootstrap, topic, 1, kafka)

        seconds = produce(kafka, PRODUCE_TOPIC, args.num_records, args.record_size)
        figures["produce"] = {
            "records": args.num_records,
            "record_size": args.record_size,
            "records_per_s": round(args.num_records / seconds),
            "mb_per_s": round(args.num_records * args.record_size / seconds / 1e6, 1),
        }
        produce(kafka, CONSUME_TOPIC, args.consume_records, args.consume_record_size, 20)
        seconds, value_bytes = consume(kafka, CONSUME_TOPIC, args.consume_records)
        figures["consume"] = {
            "records": args.consume_records,
            "record_size": args.consume_record_size,
            "records_per_s": round(args.consume_records / seconds),
            "mb_per_s": round(value_bytes / seconds / 1e6, 1),
        }
        batch = _wire_batch(args.wire_batch_bytes)
        msgpack: dict[str, float] = {}
        kafka_wire: dict[str, float] = {}
        for _ in range(WIRE_ROUNDS):  # alternating, best of each: a shared machine is noisy
            for best, address, call, topic in (
                (msgpack, bootstrap, _msgpack_call, WIRE_TOPICS["msgpack"]),
                (kafka_wire, kafka, _kafka_call, WIRE_TOPICS["kafka"]),
            ):
                for key, value in wire(address, call, topic, batch, args.wire_requests).items():
                    best[key] = max(best.get(key, 0.0), value)
        figures["wire"] = {
            "batch_bytes": len(batch),
            "msgpack": {k: round(v, 1) for k, v in msgpack.items()},
            "kafka": {k: round(v, 1) for k, v in kafka_wire.items()},
            "kafka_over_msgpack": {k: round(kafka_wire[k] / msgpack[k], 2) for k in msgpack},
        }
    figures["standalone_broker"] = standalone
    figures["load_average_after"] = os.getloadavg()[0]
    print(json.dumps(figures))


if __name__ == "__main__":
    main()

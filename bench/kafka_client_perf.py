"""Kafka clients against one broker's Kafka listener, and that listener against the
msgpack one for the same payloads.

    python3 bench/kafka_client_perf.py [--num-records 1000000] [--record-size 100]
        [--consume-record-size 1024] [--consume-records 300000]
        [--wire-batch-bytes 1048576] [--wire-requests 200] [--bootstrap-server H:P]
        [--only produce|consume|wire] [--broker-profile FILE]

Three measurements, one JSON line of figures at the end:

- ``produce``: confluent-kafka (librdkafka) sends ``--num-records`` records of
  ``--record-size`` bytes (one payload, as Kafka's producer-perf), acks=1, no
  compression, linger.ms 5, 1 MB batches (see ``produce``); records/s and MB/s from
  the first send until every record is acknowledged.
- ``consume``: the topic is filled with ``--consume-records`` records of
  ``--consume-record-size`` bytes, then a confluent-kafka consumer with manual
  assignment reads them all; MB/s of record values.
- ``wire``: the same ``--wire-batch-bytes`` record batch sent ``--wire-requests``
  times as Produce (acks=1), then read back by Fetch requests of that size, over the
  msgpack listener and over the Kafka listener taking turns request by request, one
  request in flight on a plain socket. Per listener: MB/s of the fastest tenth's
  slowest request and of the median one, and the broker's CPU ms per MB; the ratio
  Kafka / msgpack of each is the listener's own cost, with no client library in the
  comparison. (Whole blocks of requests per listener, best of three, swung the
  ratio between 0.64 and 1.31 from run to run on a shared machine: its load changes
  faster than a block lasts.)

Without ``--bootstrap-server`` (the msgpack address of a broker that also has a Kafka
listener) it starts a standalone broker with both (bench/standalone.py), and each
measurement also reports the broker's CPU seconds (``broker_cpu_s``; under
``--broker-profile FILE`` the broker runs under cProfile, dumped there) beside this
process's own (``client_cpu_s``: librdkafka's threads included), which says which
side a figure is bound by.
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

from bench.standalone import lead, process_cpu_seconds, standalone_broker_process
from minibroker.net.connection import Connection
from minibroker.protocol import api as msgpack_api
from minibroker.protocol.api import ApiKey, RequestHeader
from minibroker.protocol.frames import encode_frame
from minibroker.protocol.kafka import codec as kafka_codec
from minibroker.protocol.records import Record, encode_batch, iter_headers

PRODUCE_TOPIC = "kafka-perf-produce"
CONSUME_TOPIC = "kafka-perf-consume"
WIRE_TOPICS = {"msgpack": "wire-msgpack", "kafka": "wire-kafka"}
FETCH_VERSION = 12
PRODUCE_VERSION = 9
MEASUREMENTS = ("produce", "consume", "wire")
FASTEST_FRACTION = 10  # wire figures: the slowest of the fastest 1/10 of the requests
CONSUME_BATCH = 1000  # messages a consume() call returns at most: it waits for that many
CONSUME_QUEUE_BACKOFF_MS = 10  # librdkafka's fetch pause once its local queue is full
HIGH_WATERMARK_WAIT_S = 60  # acks=1 with replicas: the end offset read is the watermark


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--num-records", type=int, default=1_000_000)
    p.add_argument("--record-size", type=int, default=100)
    p.add_argument("--consume-records", type=int, default=300_000)
    p.add_argument("--consume-record-size", type=int, default=1024)
    p.add_argument("--wire-batch-bytes", type=int, default=1 << 20)
    p.add_argument("--wire-requests", type=int, default=200)
    p.add_argument("--bootstrap-server", help="msgpack host:port; default: a standalone broker")
    p.add_argument("--only", choices=MEASUREMENTS, action="append", help="default: all three")
    p.add_argument("--broker-profile", help="run the standalone broker under cProfile, dump here")
    return p.parse_args()


# -- the Kafka clients ---------------------------------------------------------------------


def produce(
    kafka: str, topic: str, count: int, size: int, linger_ms: int = 5, acks: str = "1"
) -> float:
    """Seconds confluent-kafka takes to send and get acknowledged ``count`` records.

    Settings: acks=1 unless ``acks`` says otherwise (Kafka's 2014 single-producer run;
    librdkafka's default is all),
    compression none, linger.ms 5 and batch.size 1 MB (librdkafka's defaults; 1 MB is
    also the broker's max.message.bytes), batch.num.messages at its maximum so that
    bytes, not librdkafka's default of 10,000 records, close a batch; the local queue
    holds the whole run so the loop never waits on it. One pre-built payload, as
    Kafka's producer-perf sends, passed positionally (keywords cost the client more).
    Delivery reports come only for failures (delivery.report.only.error): a Python
    callback per record cost the client more than the broker spends storing it. That
    every record arrived is checked on the broker instead: the partition's end offset
    must have grown by exactly ``count``."""
    failures: list[object] = []

    def failed(error: object, _: object = None) -> None:
        failures.append(error)

    def fatal(error: confluent_kafka.KafkaError) -> None:
        if error.fatal():  # transient ones (a connection dropped) librdkafka retries
            failures.append(error)

    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": kafka,
            "acks": acks,
            "compression.type": "none",
            "linger.ms": linger_ms,
            "batch.size": 1_000_000,
            "batch.num.messages": 1_000_000,
            "queue.buffering.max.messages": max(count, 100_000),
            "queue.buffering.max.kbytes": 2_000_000,
            "delivery.report.only.error": True,
            "on_delivery": failed,
            "error_cb": fatal,
        }
    )
    payload = os.urandom(size)
    before = _end_offset(kafka, topic)
    send = producer.produce
    started = time.perf_counter()
    for _ in range(count):
        try:
            send(topic, payload, None, 0)  # key None, partition 0
        except BufferError:  # the local queue is full: wait for room
            _send_when_room(producer, topic, payload)
    if producer.flush(600) != 0 or failures:
        raise RuntimeError(f"produce failed: {failures[:3]}")
    elapsed = time.perf_counter() - started
    stored = _end_offset(kafka, topic) - before
    deadline = time.monotonic() + HIGH_WATERMARK_WAIT_S
    while stored < count and time.monotonic() < deadline:  # acks=1: followers catch up
        time.sleep(0.05)
        stored = _end_offset(kafka, topic) - before
    if stored != count:
        raise RuntimeError(f"sent {count} records but the partition grew by {stored}")
    return elapsed


def _send_when_room(producer: confluent_kafka.Producer, topic: str, payload: bytes) -> None:
    while True:
        producer.poll(0.01)
        try:
            producer.produce(topic, payload, None, 0)
            return
        except BufferError:
            continue


def _end_offset(kafka: str, topic: str) -> int:
    """The end offset of ``topic``'s partition 0 (ListOffsets on the Kafka listener)."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": kafka, "group.id": "kafka-perf"})
    deadline = time.monotonic() + HIGH_WATERMARK_WAIT_S
    try:
        while True:
            try:
                _, end = consumer.get_watermark_offsets(
                    confluent_kafka.TopicPartition(topic, 0), timeout=30
                )
                break
            except confluent_kafka.KafkaException:  # a new topic not known everywhere yet
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
    finally:
        consumer.close()
    result: int = end
    return result


def consume(kafka: str, topic: str, count: int) -> tuple[float, int]:
    """(seconds, value bytes) confluent-kafka takes to read ``count`` records, from the
    assignment on (the connection and metadata are set up before the clock starts).

    Fetches of up to 10 MB a partition, as a throughput-minded user sets them. The
    local queue (librdkafka's queued.max.messages.kbytes, 64 MB) can fill faster than
    the loop below drains it; librdkafka then pauses fetching for
    fetch.queue.backoff.ms, 1 s by default, which made this figure swing by a factor
    of seven from run to run depending on whether the queue happened to fill. Its
    documentation says to lower it when that shows; 10 ms keeps the pause shorter
    than the time to drain a fetch."""
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": kafka,
            "group.id": "kafka-client-perf",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52_428_800,
            "max.partition.fetch.bytes": 10_485_760,
            "fetch.queue.backoff.ms": CONSUME_QUEUE_BACKOFF_MS,
        }
    )
    partition = confluent_kafka.TopicPartition(topic, 0, 0)
    consumer.get_watermark_offsets(partition, timeout=30)  # connected, metadata known
    seen = value_bytes = 0
    started = time.perf_counter()
    consumer.assign([partition])
    try:
        while seen < count:
            for message in consumer.consume(CONSUME_BATCH, 1.0):
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


Call = Callable[[RawSocket, ApiKey, dict[str, Any]], dict[str, Any]]
"""Sends one request body on a listener's socket and decodes the answer."""


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


class WireListener:
    """One listener of the wire measurement: its socket, how to call it, its topic, and
    what each request took (wall seconds, bytes of records, broker CPU seconds)."""

    def __init__(self, address: str, call: Call, topic: str, broker_pid: int | None) -> None:
        self.raw = RawSocket(address)
        self.call = call
        self.topic = topic
        self.broker_pid = broker_pid
        self.offset = 0  # where the next Fetch reads
        self.samples: dict[ApiKey, list[tuple[float, int, float]]] = {
            ApiKey.PRODUCE: [],
            ApiKey.FETCH: [],
        }

    def produce(self, batch: bytes) -> None:
        answer = self._timed(ApiKey.PRODUCE, _produce_body(self.topic, batch), len(batch))
        error = answer["topics"][0]["partitions"][0]["error_code"]
        if error:
            raise RuntimeError(f"produce error {error}")

    def fetch(self, max_bytes: int) -> int:
        """Fetches the next records; returns their size (0 once everything is read)."""
        body = _fetch_body(self.topic, self.offset, max_bytes)
        answer = self._timed(ApiKey.FETCH, body, 0)
        records = answer["topics"][0]["partitions"][0]["records"]
        size = 0
        for _, header in iter_headers(records):
            self.offset = header.next_offset
            size += header.size
        wall, _, cpu = self.samples[ApiKey.FETCH][-1]
        self.samples[ApiKey.FETCH][-1] = (wall, size, cpu)
        return size

    def _timed(self, key: ApiKey, body: dict[str, Any], size: int) -> dict[str, Any]:
        cpu = process_cpu_seconds(self.broker_pid)
        started = time.perf_counter()
        answer = self.call(self.raw, key, body)
        wall = time.perf_counter() - started
        self.samples[key].append((wall, size, process_cpu_seconds(self.broker_pid) - cpu))
        return answer

    def figures(self) -> dict[str, float]:
        """Per API: MB/s of the fastest tenth's slowest request (the headline: on a
        shared machine the rest mostly measure waiting for a core, as ``timeit`` takes
        the minimum for the same reason) and of the median request, and the broker's
        CPU ms per MB over all of them."""
        out: dict[str, float] = {}
        for key, name in ((ApiKey.PRODUCE, "produce"), (ApiKey.FETCH, "fetch")):
            samples = [s for s in self.samples[key] if s[1]]
            rates = sorted((size / wall / 1e6 for wall, size, _ in samples), reverse=True)
            out[f"{name}_mb_s"] = round(rates[len(rates) // FASTEST_FRACTION], 1)
            out[f"{name}_median_mb_s"] = round(rates[len(rates) // 2], 1)
            megabytes = sum(size for _, size, _ in samples) / 1e6
            out[f"{name}_broker_cpu_ms_per_mb"] = round(
                sum(cpu for _, _, cpu in samples) * 1e3 / megabytes, 3
            )
        return out

    def close(self) -> None:
        self.raw.close()


def wire(listeners: list[WireListener], batch: bytes, requests: int) -> None:
    """``requests`` Produce requests of ``batch`` on each listener, then Fetch requests
    reading it all back, one request in flight, taking turns request by request so that
    both see the same machine (the load of a shared one changes within a second)."""
    for _ in range(requests):
        for listener in listeners:
            listener.produce(batch)
    reading = list(listeners)
    while reading:
        reading = [listener for listener in reading if listener.fetch(len(batch))]


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
def _broker(args: argparse.Namespace) -> Iterator[tuple[str, int | None]]:
    """(msgpack address, pid of the standalone broker or None)."""
    if args.bootstrap_server:
        yield args.bootstrap_server, None
        return
    with standalone_broker_process("kafka.listeners=127.0.0.1:0", profile=args.broker_profile) as (
        bootstrap,
        process,
    ):
        yield bootstrap, process.pid


@contextlib.contextmanager
def _cpu(figures: dict[str, Any], broker_pid: int | None) -> Iterator[None]:
    """Adds the CPU seconds the block took in the broker and in this process."""
    broker, client = process_cpu_seconds(broker_pid), time.process_time()
    yield
    figures["client_cpu_s"] = round(time.process_time() - client, 2)
    if broker_pid is not None:
        figures["broker_cpu_s"] = round(process_cpu_seconds(broker_pid) - broker, 2)


def main() -> None:
    args = parse_args()
    only = set(args.only or MEASUREMENTS)
    figures: dict[str, Any] = {"load_average_before": os.getloadavg()[0]}
    with _broker(args) as (bootstrap, pid):
        kafka = trio.run(_kafka_address, bootstrap)
        if pid is not None:
            for topic in [PRODUCE_TOPIC, CONSUME_TOPIC, *WIRE_TOPICS.values()]:
                trio.run(lead, bootstrap, topic, 1, kafka)
        if "produce" in only:
            figures["produce"] = _measure_produce(args, kafka, pid)
        if "consume" in only:
            produce(kafka, CONSUME_TOPIC, args.consume_records, args.consume_record_size, 20)
            figures["consume"] = _measure_consume(args, kafka, pid)
        if "wire" in only:
            figures["wire"] = _measure_wire(args, bootstrap, kafka, pid)
    figures["standalone_broker"] = pid is not None
    figures["load_average_after"] = os.getloadavg()[0]
    print(json.dumps(figures))


def _measure_produce(args: argparse.Namespace, kafka: str, pid: int | None) -> dict[str, Any]:
    figures: dict[str, Any] = {"records": args.num_records, "record_size": args.record_size}
    with _cpu(figures, pid):
        seconds = produce(kafka, PRODUCE_TOPIC, args.num_records, args.record_size)
    figures["records_per_s"] = round(args.num_records / seconds)
    figures["mb_per_s"] = round(args.num_records * args.record_size / seconds / 1e6, 1)
    return figures


def _measure_consume(args: argparse.Namespace, kafka: str, pid: int | None) -> dict[str, Any]:
    figures: dict[str, Any] = {
        "records": args.consume_records,
        "record_size": args.consume_record_size,
    }
    with _cpu(figures, pid):
        seconds, value_bytes = consume(kafka, CONSUME_TOPIC, args.consume_records)
    figures["records_per_s"] = round(args.consume_records / seconds)
    figures["mb_per_s"] = round(value_bytes / seconds / 1e6, 1)
    return figures


def _measure_wire(
    args: argparse.Namespace, bootstrap: str, kafka: str, pid: int | None
) -> dict[str, Any]:
    batch = _wire_batch(args.wire_batch_bytes)
    listeners = [
        WireListener(bootstrap, _msgpack_call, WIRE_TOPICS["msgpack"], pid),
        WireListener(kafka, _kafka_call, WIRE_TOPICS["kafka"], pid),
    ]
    figures: dict[str, Any] = {"batch_bytes": len(batch), "requests": args.wire_requests}
    try:
        with _cpu(figures, pid):
            wire(listeners, batch, args.wire_requests)
    finally:
        for listener in listeners:
            listener.close()
    msgpack, kafka_wire = (listener.figures() for listener in listeners)
    figures["msgpack"] = msgpack
    figures["kafka"] = kafka_wire
    figures["kafka_over_msgpack"] = {
        k: round(kafka_wire[k] / msgpack[k], 2) for k in ("produce_mb_s", "fetch_mb_s")
    }
    return figures


if __name__ == "__main__":
    main()

"""The confluent-kafka (librdkafka) workloads of bench/vs_kafka.py, the same calls
against either broker: topics, produce and consume throughput, end-to-end latency at a
fixed rate, and the timings of a broker's restart after kill -9.

Produce and consume are bench/kafka_client_perf.py's (one pre-built payload, linger.ms
5, 1 MB batches, the end offset checked afterwards). End-to-end latency: a producer in
a process of its own (linger.ms 0, acks=1) sends ``rate`` records a second, each
carrying the CLOCK_MONOTONIC nanoseconds of its send, and this process's consumer
(librdkafka's defaults: fetch.wait.max.ms 500, fetch.min.bytes 1, so the broker's
long-poll wake-up is measured) takes the difference on arrival; the first second is
left out as warm-up.

The workloads of many (``produce_spread``: records sent round-robin over every
partition of a topic; ``idle_connections``: Kafka clients that connected, asked
ApiVersions and went quiet; ``group_consume``: consumers of one group, each in a process
of its own) measure what the broker spends on partitions, connections and members it
is not busy with, beside the one it is.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import socket
import struct
import time
from collections.abc import Iterator, Mapping, Sequence
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Event, Semaphore

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic

from bench.kafka_client_perf import consume, produce
from bench.side_by_side.brokers import Brokers
from minibroker.protocol.api import RequestHeader
from minibroker.protocol.kafka import codec as kafka_codec

MB = 1_000_000
TIMESTAMP = struct.Struct(">q")
E2E_RECORD_BYTES = 100
E2E_WARMUP_S = 1.0
E2E_BATCH = 1000
TOPIC_TIMEOUT_S = 180.0  # Kafka took over 30 s to create 1,000 partitions at load 15
SERVE_TIMEOUT_S = 600.0
API_VERSIONS = 18
GROUP_TIMEOUT_S = 300.0


def create_topic(
    bootstrap: str,
    name: str,
    partitions: int = 1,
    replication_factor: int = 1,
    assignment: Sequence[Sequence[int]] | None = None,
    config: Mapping[str, str] | None = None,
) -> None:
    """CreateTopics, then wait until every partition has a leader in Metadata."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = (
        NewTopic(  # this confluent-kafka wants the count too, not -1 as documented
            name,
            len(assignment),
            replica_assignment=[list(r) for r in assignment],
            config=config or {},
        )
        if assignment is not None
        else NewTopic(name, partitions, replication_factor, config=config or {})
    )
    admin.create_topics(
        [topic], operation_timeout=TOPIC_TIMEOUT_S, request_timeout=TOPIC_TIMEOUT_S
    )[name].result(TOPIC_TIMEOUT_S)
    if assignment is not None:
        partitions = len(assignment)
    deadline = time.monotonic() + TOPIC_TIMEOUT_S
    for address in bootstrap.split(","):  # each broker learns of it in its own time
        one = AdminClient({"bootstrap.servers": address})
        while not _has_leaders(one, name, partitions):
            if time.monotonic() > deadline:
                raise RuntimeError(f"topic {name} has no leader after {TOPIC_TIMEOUT_S} s")
            time.sleep(0.05)


def _has_leaders(admin: AdminClient, name: str, partitions: int) -> bool:
    found = admin.list_topics(name, timeout=10).topics.get(name)
    if found is None or found.error is not None or len(found.partitions) != partitions:
        return False
    return all(p.leader >= 0 for p in found.partitions.values())


def produce_rate(bootstrap: str, topic: str, count: int, size: int, acks: str) -> dict[str, float]:
    seconds = produce(bootstrap, topic, count, size, acks=acks)
    return {"records_per_s": count / seconds, "mb_per_s": count * size / seconds / MB}


def consume_rate(bootstrap: str, topic: str, count: int) -> float:
    """MB/s of record values read from the start of ``topic``'s partition 0."""
    seconds, value_bytes = consume(bootstrap, topic, count)
    return value_bytes / seconds / MB


def produce_spread(
    bootstrap: str, topic: str, count: int, size: int, partitions: int, acks: str = "1"
) -> dict[str, float]:
    """``count`` records of ``size`` bytes sent round-robin over ``partitions``
    partitions by one confluent-kafka producer (kafka_client_perf's settings, and five
    requests in flight, as Kafka's Java producer: a request here carries up to one batch
    per partition, and under load librdkafka's default of a million in flight let
    hundreds time out and be sent again), every one acknowledged; records/s and MB/s.
    The partitions' end offsets must have grown by at least ``count`` in all (a
    retried request may have been stored twice: acks=1 without idempotence)."""
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "max.in.flight.requests.per.connection": 5,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "batch.num.messages": 1_000_000,
            "queue.buffering.max.messages": max(count, 100_000),
            "queue.buffering.max.kbytes": 2_000_000,
            "delivery.report.only.error": True,
        }
    )
    before = _end_offsets(bootstrap, topic, partitions)
    payload = bytes(size)
    send = producer.produce
    started = time.perf_counter()
    for i in range(count):
        partition = i % partitions
        while True:
            try:
                send(topic, payload, None, partition)
                break
            except BufferError:  # the local queue is full: wait for room
                producer.poll(0.01)
    if producer.flush(600) != 0:
        raise RuntimeError(f"{topic}: records left unacknowledged")
    seconds = time.perf_counter() - started
    grown = sum(_end_offsets(bootstrap, topic, partitions)) - sum(before)
    if grown < count:
        raise RuntimeError(f"{topic}: sent {count} records, the partitions grew by {grown}")
    return {"records_per_s": count / seconds, "mb_per_s": count * size / seconds / MB}


def _end_offsets(bootstrap: str, topic: str, partitions: int) -> list[int]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "ends"})
    try:
        return [
            consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p), 30)[1]
            for p in range(partitions)
        ]
    finally:
        consumer.close()


@contextlib.contextmanager
def idle_connections(bootstrap: str, count: int) -> Iterator[list[socket.socket]]:
    """``count`` connections to the first broker of ``bootstrap``, each of which has sent
    ApiVersions v0 and read the answer (a client that connected and went quiet); closed
    on leaving."""
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    request = kafka_codec.encode_request(RequestHeader(API_VERSIONS, 0, 1, "idle"), {})
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.create_connection((host, int(port)), timeout=30)
            sockets.append(sock)
            sock.sendall(request)
            (size,) = struct.unpack(">i", _read_exactly(sock, 4))
            _read_exactly(sock, size)
        yield sockets
        for sock in sockets:  # still open: the broker kept every one of them
            sock.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                if sock.recv(1) == b"":
                    raise RuntimeError("the broker closed an idle connection")
    finally:
        for sock in sockets:
            sock.close()


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        data += chunk
    return data


def group_consume(bootstrap: str, topic: str, count: int, members: int) -> dict[str, float]:
    """``members`` confluent-kafka consumers of one new group, each in a process of its
    own, subscribe at the same moment and read ``topic`` (``count`` records) from the
    start. Seconds from the subscribe until the last assignment any member received
    (the group settled), and MB/s of values until all ``count`` are read."""
    context = multiprocessing.get_context("spawn")
    start = context.Event()
    stop = context.Event()
    seen = context.Value("q", 0)
    value_bytes = context.Value("q", 0)
    last_assigned_ns = context.Value("q", 0)
    ready = context.Semaphore(0)
    group = f"group-{time.monotonic_ns()}"
    workers = [
        context.Process(
            target=group_member,
            args=(bootstrap, topic, group, start, stop, ready, seen, value_bytes),
            kwargs={"last_assigned_ns": last_assigned_ns},
            daemon=True,
        )
        for _ in range(members)
    ]
    for worker in workers:
        worker.start()
    try:
        for _ in workers:
            if not ready.acquire(timeout=GROUP_TIMEOUT_S):
                raise RuntimeError("a group member did not start")
        started_ns = time.monotonic_ns()
        start.set()
        deadline = time.monotonic() + GROUP_TIMEOUT_S
        while seen.value < count:
            if time.monotonic() > deadline or not all(w.is_alive() for w in workers):
                raise RuntimeError(f"group read {seen.value} of {count} records")
            time.sleep(0.01)
        seconds = (time.monotonic_ns() - started_ns) / 1e9
    finally:
        stop.set()
        for worker in workers:
            worker.join(30)
            if worker.is_alive():
                worker.kill()
    return {
        "mb_per_s": value_bytes.value / seconds / MB,
        "settled_s": (last_assigned_ns.value - started_ns) / 1e9,
    }


def group_member(
    bootstrap: str,
    topic: str,
    group: str,
    start: Event,
    stop: Event,
    ready: Semaphore,
    seen: Synchronized[int],
    value_bytes: Synchronized[int],
    *,
    last_assigned_ns: Synchronized[int],
) -> None:
    """One member of group_consume's group (run in its own process)."""
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.queue.backoff.ms": 10,
        }
    )
    consumer.list_topics(topic, timeout=30)  # connected, metadata known

    def assigned(_: object, partitions: list[confluent_kafka.TopicPartition]) -> None:
        with last_assigned_ns.get_lock():
            last_assigned_ns.value = max(last_assigned_ns.value, time.monotonic_ns())

    ready.release()
    start.wait()
    consumer.subscribe([topic], on_assign=assigned)
    try:
        while not stop.is_set():
            messages = consumer.consume(E2E_BATCH, 0.1)
            size = 0
            for message in messages:
                if message.error() is not None:
                    raise RuntimeError(str(message.error()))
                size += len(message.value())
            if messages:
                with seen.get_lock():
                    seen.value += len(messages)
                with value_bytes.get_lock():
                    value_bytes.value += size
    finally:
        consumer.close()


# -- end-to-end latency ----------------------------------------------------------------


def e2e_latency(bootstrap: str, topic: str, rate: int, seconds: float) -> dict[str, float]:
    """p50 / p99 / p99.9 milliseconds from send to receipt at ``rate`` records/s."""
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "e2e", "enable.auto.commit": False}
    )
    start = confluent_kafka.TopicPartition(topic, 0)
    _, end = consumer.get_watermark_offsets(start, timeout=30)
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, end)])
    consumer.consume(1, 0.5)  # fetching before the first record is sent
    total = int(rate * seconds)
    sender = multiprocessing.get_context("spawn").Process(
        target=paced_producer, args=(bootstrap, topic, rate, total), daemon=True
    )
    sender.start()
    latencies: list[int] = []
    received = 0
    deadline = time.monotonic() + seconds + 60
    try:
        while received < total and time.monotonic() < deadline:
            # What has arrived, without waiting (consume(n, timeout) waits for n records
            # or the timeout), else one record as soon as it comes.
            messages = consumer.consume(E2E_BATCH, 0) or [consumer.poll(0.2)]
            now = time.monotonic_ns()
            for message in messages:
                if message is None:
                    continue
                if message.error() is not None:
                    raise RuntimeError(str(message.error()))
                (sent_ns,) = TIMESTAMP.unpack_from(message.value())
                received += 1
                if received > rate * E2E_WARMUP_S:
                    latencies.append(now - sent_ns)
    finally:
        consumer.close()
        sender.join(30)
        if sender.is_alive():
            sender.kill()
    if received < total:
        raise RuntimeError(f"end-to-end: {received} of {total} records arrived")
    latencies.sort()
    return {
        f"p{label}_ms": latencies[min(len(latencies) - 1, int(q * len(latencies)))] / 1e6
        for label, q in (("50", 0.50), ("99", 0.99), ("999", 0.999))
    }


def paced_producer(bootstrap: str, topic: str, rate: int, total: int) -> None:
    """Send ``total`` records at ``rate`` a second, each stamped with its send time."""
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "1"}
    )
    producer.list_topics(topic, timeout=30)  # connected, leader known
    padding = bytes(E2E_RECORD_BYTES - TIMESTAMP.size)
    sent = 0
    started = time.monotonic()
    while sent < total:
        due = min(total, int((time.monotonic() - started) * rate) + 1)
        while sent < due:
            try:
                producer.produce(topic, TIMESTAMP.pack(time.monotonic_ns()) + padding, None, 0)
            except BufferError:  # the broker is behind: wait for room, the latency shows it
                producer.poll(0.01)
                continue
            sent += 1
        producer.poll(0)
        pause = started + sent / rate - time.monotonic()
        if pause > 0:
            time.sleep(pause)
    producer.flush(30)


# -- restarts ----------------------------------------------------------------------------


def restart_until_serving(brokers: Brokers, broker_id: int, topic: str, offset: int) -> float:
    """Start a killed broker again; seconds until a consumer bootstrapped at it reads the
    record at ``offset`` of ``topic``'s partition 0 (it must be that partition's leader)."""
    started = time.monotonic()
    brokers.spawn(broker_id)
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": f"127.0.0.1:{brokers.port(broker_id)}",
            "group.id": "restart",
            "enable.auto.commit": False,
            "auto.offset.reset": "error",  # an offset not loaded yet must not skip ahead
            "reconnect.backoff.ms": 20,
            "reconnect.backoff.max.ms": 100,
            "topic.metadata.refresh.fast.interval.ms": 50,
            "log_level": 0,  # not a line per refused connection while it starts
        }
    )
    wanted = confluent_kafka.TopicPartition(topic, 0, offset)
    consumer.assign([wanted])
    try:
        while time.monotonic() - started < SERVE_TIMEOUT_S:
            message = consumer.poll(0.05)
            if message is None:
                brokers.check_alive(broker_id, started + SERVE_TIMEOUT_S)
                continue
            if message.error() is None and message.offset() == offset:
                return time.monotonic() - started
            consumer.assign([wanted])
    finally:
        consumer.close()
    raise RuntimeError(f"{brokers.name} broker {broker_id} did not serve {topic} in time")


def restart_until_in_isr(brokers: Brokers, broker_id: int, topic: str) -> dict[str, float]:
    """Start a killed follower again; seconds until it is ready (registered, answering
    Metadata) and until ZooKeeper's ISR of ``topic``'s partition 0 names it again."""
    deadline = time.monotonic() + 60
    while broker_id in brokers.isr(topic, 0) and time.monotonic() < deadline:
        time.sleep(0.05)  # the controller takes the dead broker out first
    started = time.monotonic()
    brokers.spawn(broker_id)
    brokers.wait_ready(broker_id, SERVE_TIMEOUT_S)
    ready = time.monotonic() - started
    while broker_id not in brokers.isr(topic, 0):
        brokers.check_alive(broker_id, started + SERVE_TIMEOUT_S)
        time.sleep(0.05)
    return {"ready_s": ready, "in_isr_s": time.monotonic() - started}

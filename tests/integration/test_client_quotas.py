"""Client quotas enforced on a loopback cluster: a confluent-kafka producer whose client
id has a 1 MB/s producer_byte_rate (1 MiB/s, 1,048,576 bytes, set with ``minibroker
quotas alter``) is held to 1.0-1.2 MB/s (10^6 bytes) over 5 s once past its first burst
(quota.window.num x quota.window.size.seconds of quota, sent at loopback speed); its
answers carry throttle_time_ms (librdkafka counts them), the broker exports Kafka's
quota metrics, and removing the quota lets it go faster. A consumer with a
consumer_byte_rate quota reads at that rate past its burst. Another client's round trips
beside a throttled producer stay about what they are alone."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.support.cluster import LocalCluster
from tests.support.prometheus import metrics_ports

pytestmark = pytest.mark.timeout(180)

QUOTA = 1_048_576  # bytes/s
RECORD = 16_384
WARM_UP_S = 2.0  # past the first burst (11 MiB, at loopback speed)
MB = 1_000_000
MEASURE_S = 5.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(
        tmp_path_factory.mktemp("quotas"),
        brokers=1,
        kafka_listeners=True,
    ) as running:
        yield running


class Flow:
    """A producer kept busy (its queue full) and the record bytes acknowledged so far."""

    def __init__(self, producer: Producer, topic: str) -> None:
        self.producer = producer
        self.topic = topic
        self.acked = 0

    def _delivered(self, err: object, msg: object) -> None:
        if err is None:
            self.acked += RECORD

    def run(self, seconds: float) -> None:
        payload = b"q" * RECORD
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                self.producer.produce(self.topic, payload, on_delivery=self._delivered)
            except BufferError:
                self.producer.poll(0.01)  # the local queue is full: the broker holds us back
            self.producer.poll(0)

    def rate(self, seconds: float) -> float:
        """Bytes acknowledged per second over the next ``seconds``."""
        before, started = self.acked, time.monotonic()
        self.run(seconds)
        return (self.acked - before) / (time.monotonic() - started)


def test_a_producer_is_held_to_its_byte_rate_quota(cluster: LocalCluster) -> None:
    created = cluster.cli(
        "topic", "create", "quoted", "--partitions", "1", "--replication-factor", "1"
    )
    assert created.returncode == 0, created.stderr
    set_quota = cluster.cli(
        *("quotas", "alter", "--entity-type", "clients", "--entity-name", "slow-producer"),
        *("--add-config", f"producer_byte_rate={QUOTA}"),
    )
    assert set_quota.returncode == 0, set_quota.stderr
    described = cluster.cli("quotas", "describe", "--format", "json")
    assert json.loads(described.stdout) == [
        {"entity": {"client-id": "slow-producer"}, "quotas": {"producer_byte_rate": QUOTA}}
    ]

    stats: list[dict[str, object]] = []
    producer = Producer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap,
            "client.id": "slow-producer",
            "linger.ms": 5,
            "batch.size": 65_536,
            "queue.buffering.max.kbytes": 2048,
            "statistics.interval.ms": 1000,
            "stats_cb": lambda raw: stats.append(json.loads(raw)),
        }
    )
    flow = Flow(producer, "quoted")
    flow.run(WARM_UP_S)
    rate = flow.rate(MEASURE_S)
    assert 1.0 * MB <= rate <= 1.2 * MB, f"{rate / MB:.3f} MB/s"
    throttled = [
        b["throttle"]["max"]
        for s in stats
        for b in s["brokers"].values()  # type: ignore[attr-defined]
        if b["nodeid"] >= 0
    ]
    assert max(throttled) > 0  # the broker told librdkafka how long to wait

    port = metrics_ports(cluster)[1]
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
    text = metrics.decode()
    tags = 'client_id="slow-producer",user=""'
    assert f"kafka_server_produce_byte_rate{{{tags}}}" in text
    assert f"kafka_server_produce_throttle_time{{{tags}}}" in text

    removed = cluster.cli(
        *("quotas", "alter", "--entity-type", "clients", "--entity-name", "slow-producer"),
        *("--delete-config", "producer_byte_rate"),
    )
    assert removed.returncode == 0, removed.stderr
    assert json.loads(cluster.cli("quotas", "describe", "--format", "json").stdout) == []
    deadline = time.monotonic() + 30
    while (free := flow.rate(1.0)) <= 1.5 * QUOTA:  # every queued, throttled request first
        assert time.monotonic() < deadline, f"still {free / MB:.2f} MB/s without a quota"
    producer.flush(30)


def test_a_consumer_is_held_to_its_byte_rate_quota_past_its_burst(cluster: LocalCluster) -> None:
    """14 MiB read by a client id with consumer_byte_rate=1 MiB/s: the first 11 MiB (its
    burst) come at loopback speed, the last 3 MiB at the quota - about 2 s, since the
    throttle a response earns delays the next one, not its own data."""
    created = cluster.cli("topic", "create", "read-quoted", "-p", "1", "-r", "1")
    assert created.returncode == 0, created.stderr
    producer = Producer({"bootstrap.servers": cluster.kafka_bootstrap, "linger.ms": 20})
    for _ in range(14 * 1024 * 1024 // RECORD):
        while True:
            try:
                producer.produce("read-quoted", b"r" * RECORD)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0
    quota = cluster.cli(
        *("quotas", "alter", "--entity-type", "clients", "--entity-name", "slow-consumer"),
        *("--add-config", f"consumer_byte_rate={QUOTA}"),
    )
    assert quota.returncode == 0, quota.stderr

    consumer = Consumer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap,
            "client.id": "slow-consumer",
            "group.id": "slow-consumer",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition("read-quoted", 0, 0)])
    read, started = 0, time.monotonic()
    try:
        while read < 14 * 1024 * 1024:
            assert time.monotonic() - started < 60, f"read {read} bytes"
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                read += len(message.value())
    finally:
        consumer.close()
    elapsed = time.monotonic() - started
    assert 1.5 <= elapsed <= 8.0, f"{elapsed:.1f} s for 3 MiB past the burst"
    port = metrics_ports(cluster)[1]
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    assert 'kafka_server_fetch_throttle_time{client_id="slow-consumer",user=""}' in text


def round_trips(bootstrap: str, topic: str, seconds: float) -> list[float]:
    """One-record acks=1 sends by a client without a quota, each waited for: seconds each."""
    probe = Producer({"bootstrap.servers": bootstrap, "client.id": "probe", "linger.ms": 0})
    out: list[float] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        started = time.perf_counter()
        probe.produce(topic, b"probe")
        assert probe.flush(10) == 0
        out.append(time.perf_counter() - started)
    return out


def p99(samples: list[float]) -> float:
    return sorted(samples)[int(len(samples) * 0.99)]


def test_other_clients_latency_stays_as_without_the_throttled_producer(
    cluster: LocalCluster,
) -> None:
    """A producer held to its quota keeps sending as fast as it is let; another client's
    round trips beside it are about what they are alone (the broker delays the
    throttled client's answers; it does not stall the rest)."""
    for topic in ("flooded", "probed"):
        created = cluster.cli("topic", "create", topic, "-p", "1", "-r", "1")
        assert created.returncode == 0, created.stderr
    set_quota = cluster.cli(
        *("quotas", "alter", "--entity-type", "clients", "--entity-name", "flooder"),
        *("--add-config", f"producer_byte_rate={QUOTA}"),
    )
    assert set_quota.returncode == 0, set_quota.stderr
    round_trips(cluster.kafka_bootstrap, "probed", 0.5)  # connections and metadata warm
    alone = round_trips(cluster.kafka_bootstrap, "probed", 3.0)

    flooder = Producer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap,
            "client.id": "flooder",
            "linger.ms": 5,
            "batch.size": 65_536,
            "queue.buffering.max.kbytes": 2048,
        }
    )
    flow = Flow(flooder, "flooded")
    beside: list[float] = []
    try:
        flow.run(WARM_UP_S)  # past its burst: held to the quota from here on
        probing = threading.Thread(
            target=lambda: beside.extend(round_trips(cluster.kafka_bootstrap, "probed", 3.0))
        )
        probing.start()
        rate = flow.rate(3.5)
        probing.join(30)
        # Held (without its quota it sends tens of MB/s here); one second alone may
        # show 1.5 MB/s as the broker's throttle catches up.
        assert rate <= 2 * MB, f"{rate / MB:.2f} MB/s: the flooder was not held to its quota"
    finally:
        flooder.purge()  # what it still queues is not the test's concern
        flooder.flush(10)
    assert len(beside) > 100
    assert p99(beside) <= 2 * p99(alone) + 0.02, (
        f"p99 {p99(beside) * 1000:.1f} ms beside the throttled producer, "
        f"{p99(alone) * 1000:.1f} ms alone"
    )

"""SASL re-authentication (KIP-368) judged by other people's clients, against a secure
one-broker `dev up` (SASL_SSL, SCRAM-SHA-512) whose logins last
``connections.max.reauth.ms`` = 2 s: confluent-kafka (librdkafka re-authenticates at 90%
of the lifetime the broker announces) keeps producing and consuming across several
re-authentications on the same connections, none of them closed; aiokafka, which never
re-authenticates, has its connection closed at its first request after the session
ended. The broker's metrics (Kafka's names) say what happened."""

from __future__ import annotations

import asyncio
import time
import urllib.request
from collections.abc import Iterator

import aiokafka
import pytest
from aiokafka.conn import create_conn
from aiokafka.errors import KafkaConnectionError
from aiokafka.helpers import create_ssl_context
from aiokafka.protocol.metadata import MetadataRequest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType
from prometheus_client.parser import text_string_to_metric_families

from tests.judges.conftest import judged_cluster
from tests.support.cluster import LocalCluster
from tests.support.prometheus import metrics_ports

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

CONFLUENT = f"confluent-kafka {__import__('confluent_kafka').version()[0]}"
AIOKAFKA = f"aiokafka {aiokafka.__version__}"

SESSION_MS = 2000
"""connections.max.reauth.ms: short, so that a few seconds see several sessions end."""

RUN_S = 5.0
"""How long the clients keep working: two and a half sessions, two re-authentications
per connection at librdkafka's 90%."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    yield from judged_cluster(
        tmp_path_factory,
        "reauth",
        brokers=1,
        secure=True,
        properties=(f"connections.max.reauth.ms={SESSION_MS}",),
    )


def kafka_listener_metrics(cluster: LocalCluster) -> dict[str, float]:
    """The broker's SASL figures on its Kafka listener, summed over mechanisms."""
    [port] = metrics_ports(cluster).values()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    figures: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.labels.get("listener") == "KAFKA":
                figures[sample.name] = figures.get(sample.name, 0.0) + sample.value
    return figures


def confluent_config(cluster: LocalCluster) -> dict[str, str]:
    return {"bootstrap.servers": cluster.kafka_bootstrap, **cluster.client_properties}


@pytest.mark.judge(
    CONFLUENT, "produce and consume across SASL re-authentications (connections.max.reauth.ms)"
)
def test_confluent_kafka_keeps_producing_and_consuming_across_re_authentications(
    cluster: LocalCluster,
) -> None:
    config = confluent_config(cluster)
    admin = AdminClient(config)
    broker = ConfigResource(ResourceType.BROKER, "1")
    described = admin.describe_configs([broker], request_timeout=30)[broker].result()
    assert described["connections.max.reauth.ms"].value == str(SESSION_MS)
    admin.create_topics([NewTopic("reauth", 1, 1)], request_timeout=30)["reauth"].result()
    before = kafka_listener_metrics(cluster)

    producer = Producer({**config, "linger.ms": "5"})
    consumer = Consumer(
        {
            **config,
            "group.id": "reauth",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": "false",
        }
    )
    consumer.subscribe(["reauth"])
    sent: list[bytes] = []
    received: list[bytes] = []
    failures: list[str] = []

    def delivered(err: object, message: object) -> None:
        if err is not None:
            failures.append(str(err))

    try:
        end = time.monotonic() + RUN_S
        while time.monotonic() < end or len(received) < len(sent):
            if time.monotonic() < end:
                value = b"record-%d" % len(sent)
                producer.produce("reauth", value, callback=delivered)
                sent.append(value)
            producer.poll(0)
            message = consumer.poll(0.05)
            if message is not None and message.error() is None:
                received.append(message.value())
            assert time.monotonic() < end + 30, f"{len(received)} of {len(sent)} consumed"
        assert producer.flush(30) == 0
    finally:
        consumer.close()
    assert not failures
    assert sorted(received) == sorted(sent)

    after = kafka_listener_metrics(cluster)

    def grew(name: str) -> float:
        return after.get(name, 0.0) - before.get(name, 0.0)

    # Producer, consumer and group coordinator connections each log in again twice.
    assert grew("kafka_server_socket_server_metrics_successful_reauthentication_total") >= 3
    assert grew("kafka_server_socket_server_metrics_failed_reauthentication_total") == 0
    assert grew("kafka_server_socket_server_metrics_expired_connections_killed_count") == 0


@pytest.mark.judge(AIOKAFKA, "a client that does not re-authenticate is closed after its session")
def test_a_client_that_does_not_re_authenticate_is_closed_after_its_session(
    cluster: LocalCluster,
) -> None:
    props = cluster.client_properties
    host, port = cluster.kafka_bootstrap.split(",")[0].rsplit(":", 1)
    before = kafka_listener_metrics(cluster)

    async def one_session_then_a_request() -> None:
        conn = await create_conn(
            host,
            int(port),
            security_protocol=props["security.protocol"],
            ssl_context=create_ssl_context(cafile=props["ssl.ca.location"]),
            sasl_mechanism=props["sasl.mechanism"],
            sasl_plain_username=props["sasl.username"],
            sasl_plain_password=props["sasl.password"],
        )
        try:
            assert (await conn.send(MetadataRequest([]))).brokers
            # The session's length is what is judged: nothing but time ends it.
            await asyncio.sleep(SESSION_MS / 1000 + 0.3)
            with pytest.raises(KafkaConnectionError):
                await conn.send(MetadataRequest([]))
        finally:
            conn.close()

    asyncio.run(one_session_then_a_request())
    after = kafka_listener_metrics(cluster)
    killed = "kafka_server_socket_server_metrics_expired_connections_killed_count"
    assert after[killed] - before.get(killed, 0.0) == 1

"""Kafka's own clients against `dev up --secure` (SASL_SSL Kafka listeners, ACLs on):
kafka-python and confluent-kafka log in with SCRAM-SHA-512 over TLS, produce and
consume, and read what the bundled client wrote with client.properties; a login with
a wrong password is refused; the README's "Secure cluster" commands run as written."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import confluent_kafka.admin
import pytest
import trio
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from minibroker.client.admin import Admin
from minibroker.client.producer import Producer
from minibroker.protocol.errors import SaslAuthenticationFailedError, TopicAuthorizationFailedError
from tests.support.broker_process import child_env
from tests.support.cluster import LocalCluster
from tests.support.readme import block, with_bootstrap

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

RECORDS = 50


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(
        tmp_path_factory.mktemp("secure"), brokers=3, kafka_listeners=True, secure=True
    ) as running:
        yield running


def kafka_python_login(cluster: LocalCluster, password: str | None = None) -> dict[str, str]:
    props = cluster.client_properties
    return {
        "bootstrap_servers": cluster.kafka_bootstrap,
        "security_protocol": props["security.protocol"],
        "sasl_mechanism": props["sasl.mechanism"],
        "sasl_plain_username": props["sasl.username"],
        "sasl_plain_password": password or props["sasl.password"],
        "ssl_cafile": props["ssl.ca.location"],
    }


async def topic_from_the_bundled_client(cluster: LocalCluster, name: str) -> None:
    async with Admin(cluster.bootstrap, config=cluster.client_properties) as admin:
        await admin.create_topic(name, 2, 2)
    async with Producer(cluster.bootstrap, config=cluster.client_properties) as producer:
        for i in range(RECORDS):
            await producer.send(name, b"bundled-%d" % i, key=b"k", partition=0)


async def test_the_cluster_runs_sasl_ssl_with_scram_sha_512(cluster: LocalCluster) -> None:
    props = cluster.client_properties
    assert (props["security.protocol"], props["sasl.mechanism"]) == ("SASL_SSL", "SCRAM-SHA-512")


async def test_kafka_python_produces_and_consumes_over_sasl_ssl(cluster: LocalCluster) -> None:
    await topic_from_the_bundled_client(cluster, "kp-secure")
    producer = KafkaProducer(acks="all", **kafka_python_login(cluster))
    try:
        for i in range(RECORDS):
            producer.send("kp-secure", value=b"kafka-python-%d" % i, partition=1)
        producer.flush(timeout=60)
    finally:
        producer.close()
    consumer = KafkaConsumer(
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        consumer_timeout_ms=1000,
        **kafka_python_login(cluster),
    )
    try:
        consumer.assign([TopicPartition("kp-secure", 0), TopicPartition("kp-secure", 1)])
        values: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(values) < 2 * RECORDS and time.monotonic() < deadline:
            values += [m.value for m in consumer]
    finally:
        consumer.close()
    assert sorted(values) == sorted(
        [b"bundled-%d" % i for i in range(RECORDS)]
        + [b"kafka-python-%d" % i for i in range(RECORDS)]
    )


async def test_confluent_kafka_produces_and_consumes_over_sasl_ssl(cluster: LocalCluster) -> None:
    await topic_from_the_bundled_client(cluster, "ck-secure")
    login = {"bootstrap.servers": cluster.kafka_bootstrap, **cluster.client_properties}
    producer = confluent_kafka.Producer(login)
    for i in range(RECORDS):
        producer.produce("ck-secure", value=b"confluent-%d" % i, partition=1)
    assert producer.flush(60) == 0
    consumer = confluent_kafka.Consumer(
        {**login, "group.id": "unused", "enable.auto.commit": False}
    )
    try:
        consumer.assign([confluent_kafka.TopicPartition("ck-secure", p, 0) for p in (0, 1)])
        values: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(values) < 2 * RECORDS and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                values.append(message.value())
    finally:
        consumer.close()
    assert sorted(values) == sorted(
        [b"bundled-%d" % i for i in range(RECORDS)] + [b"confluent-%d" % i for i in range(RECORDS)]
    )


async def test_a_kafka_client_with_a_wrong_password_is_refused(cluster: LocalCluster) -> None:
    login = {"bootstrap.servers": cluster.kafka_bootstrap, **cluster.client_properties}
    errors: list[confluent_kafka.KafkaError] = []
    producer = confluent_kafka.Producer(
        {**login, "sasl.password": "wrong", "error_cb": errors.append}
    )
    deadline = time.monotonic() + 30
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert errors and errors[0].code() == confluent_kafka.KafkaError._AUTHENTICATION


def add_user(cluster: LocalCluster, name: str, password: str) -> dict[str, str]:
    """``minibroker users add`` of a SCRAM user; its client properties."""
    password_file = cluster.data_dir / f"{name}.password"
    password_file.write_text(f"{password}\n")
    zookeeper = f"127.0.0.1:{cluster.state['zookeeper']['port']}"
    added = cluster.cli(
        *("users", "add", name, "--password-file", str(password_file)),
        *("--zookeeper", zookeeper),
        bootstrap=False,
    )
    assert added.returncode == 0, added.stderr
    return {**cluster.client_properties, "sasl.username": name, "sasl.password": password}


async def test_a_user_added_with_the_cli_logs_in_but_acls_refuse_it_until_granted(
    cluster: LocalCluster,
) -> None:
    bob = add_user(cluster, "bob", "bob-secret")
    deadline = time.monotonic() + 30
    while True:  # the brokers apply the notification within a watch round trip
        try:
            async with Admin(cluster.bootstrap, config=bob) as admin:
                await admin.create_topic("bobs", 1, 1)
        except TopicAuthorizationFailedError:
            break  # logged in, refused by the ACLs (bob is no super user)
        except SaslAuthenticationFailedError:
            assert time.monotonic() < deadline, "bob never became known to the brokers"
            await trio.sleep(0.2)


async def test_authorized_operations_are_the_principals_own(cluster: LocalCluster) -> None:
    """With ACLs, DescribeTopics and DescribeCluster list what the asking principal may
    do: the super user everything, a user granted Read on a topic Read and Describe."""
    await topic_from_the_bundled_client(cluster, "carols")
    carol = add_user(cluster, "carol", "carol-secret")
    granted = cluster.cli(
        *("acl", "add", "--allow-principal", "User:carol", "--operation", "Read"),
        *("--topic", "carols", "--command-config", cluster.state["client_config"]),
    )
    assert granted.returncode == 0, granted.stderr
    op = confluent_kafka.admin.AclOperation
    topics = confluent_kafka.TopicCollection(["carols"])

    def described(config: dict[str, str]) -> set[object]:
        admin = confluent_kafka.admin.AdminClient(
            {**config, "bootstrap.servers": cluster.kafka_bootstrap}
        )
        deadline = time.monotonic() + 30
        while True:  # carol's login and ACL reach every broker within a watch round trip
            try:
                found = admin.describe_topics(topics, include_authorized_operations=True)
                return set(found["carols"].result(timeout=30).authorized_operations)
            except confluent_kafka.KafkaException:
                assert time.monotonic() < deadline
                time.sleep(0.2)

    assert described(cluster.client_properties) == {
        op.READ, op.WRITE, op.CREATE, op.DELETE, op.ALTER, op.DESCRIBE,
        op.DESCRIBE_CONFIGS, op.ALTER_CONFIGS,
    }  # fmt: skip
    assert described(carol) == {op.READ, op.DESCRIBE}


async def test_a_transactional_producer_needs_write_on_its_transactional_id(
    cluster: LocalCluster,
) -> None:
    """Kafka's TransactionalId ACLs: a user who may write the topic but not use the
    transactional id is refused TRANSACTIONAL_ID_AUTHORIZATION_FAILED; once kafka-acls'
    ``--producer --transactional-id`` grants it, its transactions commit."""
    await topic_from_the_bundled_client(cluster, "dave-txn")
    dave = add_user(cluster, "dave", "dave-secret")
    admin_login = ("--command-config", cluster.state["client_config"])

    def grant(*resource: str) -> None:
        granted = cluster.cli(
            *("acl", "add", "--allow-principal", "User:dave", "--producer", *resource),
            *admin_login,
        )
        assert granted.returncode == 0, granted.stderr

    def init(deadline: float) -> confluent_kafka.Producer:
        """A producer of dave's that got past init_transactions (raises its error)."""
        while True:  # dave's login reaches every broker within a watch round trip
            producer = confluent_kafka.Producer(
                {**dave, "bootstrap.servers": cluster.kafka_bootstrap, "transactional.id": "dave-1"}
            )
            try:
                producer.init_transactions(20)
                return producer
            except confluent_kafka.KafkaException as exc:
                code = exc.args[0].code()
                if code == confluent_kafka.KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
                    raise
                assert time.monotonic() < deadline, exc
                time.sleep(0.2)

    grant("--topic", "dave-txn")
    with pytest.raises(confluent_kafka.KafkaException) as refused:
        init(time.monotonic() + 30)
    assert refused.value.args[0].code() == (
        confluent_kafka.KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    )
    grant("--transactional-id", "dave-1")
    deadline = time.monotonic() + 30
    while True:  # the new ACL reaches every broker within a watch round trip
        try:
            producer = init(deadline)
            break
        except confluent_kafka.KafkaException:
            assert time.monotonic() < deadline
            time.sleep(0.2)
    producer.begin_transaction()
    producer.produce("dave-txn", b"daves", partition=0)
    producer.commit_transaction(30)


def test_the_readmes_secure_cluster_commands_run_as_written(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    # Run where the README's .minibroker/ is this cluster's data dir, with its Kafka
    # listeners in place of 127.0.0.1:19092 (tests take no fixed port).
    shell = block("Secure cluster", "sh", 1)  # the second terminal's (0 starts the cluster)
    (tmp_path / ".minibroker").symlink_to(cluster.data_dir)
    assert "127.0.0.1:19092" in shell
    shell = shell.replace("127.0.0.1:19092", cluster.kafka_bootstrap)
    path = os.pathsep.join((str(Path(sys.executable).parent), os.environ.get("PATH", "")))

    done = subprocess.run(
        ["bash", "-c", with_bootstrap(shell, cluster.bootstrap)],
        cwd=tmp_path,
        env={**child_env(), "PATH": path},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )

    assert done.returncode == 0, f"the Secure cluster block failed:\n{done.stdout}\n{done.stderr}"
    lines = done.stdout.splitlines()
    assert lines.count("paid") == 2  # the bundled consumer and kcat read the record
    assert "User bob: SCRAM-SHA-512 credentials set" in lines
    # `users list`: a USER / MECHANISMS table
    listed = dict(line.split() for line in lines[lines.index("USER    MECHANISMS") + 1 :])
    assert {"admin", "bob", "broker"} <= listed.keys()
    assert "SCRAM-SHA-512" in listed["bob"].split(",")
    assert not (tmp_path / "bob.password").exists()


def test_a_client_without_its_login_is_told_what_the_listener_wants_and_which_keys_give_it(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    tls_only = tmp_path / "tls.properties"
    ca = cluster.client_properties["ssl.ca.location"]
    tls_only.write_text(f"security.protocol=SSL\nssl.ca.location={ca}\n")

    plaintext = cluster.cli("topic", "list")
    no_login = cluster.cli("topic", "list", "--command-config", str(tls_only))

    assert plaintext.returncode == no_login.returncode == 1
    err = plaintext.stderr.decode()
    assert err.count("\n") == 1, err
    assert "the listener wants TLS and a SASL login: set security.protocol=SASL_SSL, " in err
    assert "sasl.mechanism, sasl.username, sasl.password and ssl.ca.location" in err
    assert "--command-config FILE" in err and "msgpack" not in err
    err = no_login.stderr.decode()
    assert "ILLEGAL_SASL_STATE" in err and "the listener wants a SASL login first" in err
    assert "sasl.mechanism, sasl.username and sasl.password" in err

"""Growing topics (CreatePartitions) on a 3-broker cluster, judged by Kafka's clients:
confluent-kafka's and kafka-python's admin clients add partitions with and without
explicit replicas, validate-only changes nothing, shrinking is INVALID_PARTITIONS, a
keyed producer that refreshes its metadata spreads over the new partitions; and the
`minibroker topic alter` command does the same from the shell.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewPartitions
from kafka.admin import KafkaAdminClient
from kafka.admin import NewPartitions as KafkaPythonNewPartitions
from kafka.errors import InvalidPartitionsError as KafkaPythonInvalidPartitions

from minibroker.client.admin import Admin
from minibroker.protocol.errors import InvalidPartitionsError, InvalidReplicaAssignmentError
from tests.support.cluster import LocalCluster

pytestmark = [pytest.mark.timeout(180)]

ADMIN_TIMEOUT_S = 30


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path_factory.mktemp("cluster"), kafka_listeners=True) as running:
        yield running


async def create_topic(cluster: LocalCluster, name: str, partitions: int, rf: int = 2) -> None:
    async with Admin(cluster.bootstrap) as admin:
        await admin.create_topic(name, partitions, rf)


async def partitions_of(cluster: LocalCluster, name: str) -> list[tuple[int, ...]]:
    """Each partition's replicas, as the Metadata of a broker reports them."""
    async with Admin(cluster.bootstrap) as admin:
        (topic,) = await admin.describe_topics([name])
        assert all(p.leader >= 0 for p in topic.partitions)
        return [p.replicas for p in topic.partitions]


def confluent_grow(
    admin: AdminClient, *changes: NewPartitions, validate_only: bool = False
) -> None:
    for future in admin.create_partitions(list(changes), validate_only=validate_only).values():
        future.result(timeout=ADMIN_TIMEOUT_S)


async def test_confluent_kafka_grows_a_topic_and_keyed_records_reach_the_new_partitions(
    cluster: LocalCluster,
) -> None:
    await create_topic(cluster, "grown", 2)
    admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap})
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": cluster.kafka_bootstrap, "topic.metadata.refresh.interval.ms": 500}
    )
    keys = [b"key-%d" % i for i in range(64)]

    def partitions_used() -> set[int]:
        used: set[int] = set()
        for key in keys:
            producer.produce(
                "grown", key=key, value=b"v", on_delivery=lambda err, m: used.add(m.partition())
            )
        assert producer.flush(ADMIN_TIMEOUT_S) == 0
        return used

    assert partitions_used() == {0, 1}

    confluent_grow(admin, NewPartitions("grown", 4), validate_only=True)
    assert len(await partitions_of(cluster, "grown")) == 2
    confluent_grow(admin, NewPartitions("grown", 4))
    replicas = await partitions_of(cluster, "grown")
    assert len(replicas) == 4
    assert all(len(r) == 2 and len(set(r)) == 2 for r in replicas)
    # The producer learns the new count from its next metadata refresh.
    deadline = time.monotonic() + ADMIN_TIMEOUT_S
    while (used := partitions_used()) != {0, 1, 2, 3}:
        assert time.monotonic() < deadline, used

    with pytest.raises(confluent_kafka.KafkaException) as shrink:
        confluent_grow(admin, NewPartitions("grown", 3))
    assert shrink.value.args[0].code() == confluent_kafka.KafkaError.INVALID_PARTITIONS
    with pytest.raises(confluent_kafka.KafkaException) as same:
        confluent_grow(admin, NewPartitions("grown", 4))
    assert same.value.args[0].code() == confluent_kafka.KafkaError.INVALID_PARTITIONS
    with pytest.raises(confluent_kafka.KafkaException) as unknown:
        confluent_grow(admin, NewPartitions("no-such-topic", 4))
    assert unknown.value.args[0].code() == confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART

    confluent_grow(admin, NewPartitions("grown", 6, replica_assignment=[[3, 1], [2, 3]]))
    assert (await partitions_of(cluster, "grown"))[4:] == [(3, 1), (2, 3)]


async def test_kafka_python_adds_partitions_with_and_without_replica_lists(
    cluster: LocalCluster,
) -> None:
    await create_topic(cluster, "kafka-python-grown", 1, rf=3)
    admin = KafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap)
    try:
        admin.create_partitions({"kafka-python-grown": KafkaPythonNewPartitions(3)})
        assert len(await partitions_of(cluster, "kafka-python-grown")) == 3
        admin.create_partitions({"kafka-python-grown": KafkaPythonNewPartitions(4, [[2, 3, 1]])})
        assert (await partitions_of(cluster, "kafka-python-grown"))[3] == (2, 3, 1)
        with pytest.raises(KafkaPythonInvalidPartitions):
            admin.create_partitions({"kafka-python-grown": KafkaPythonNewPartitions(2)})
    finally:
        admin.close()


async def test_bad_replica_lists_are_refused_and_change_nothing(cluster: LocalCluster) -> None:
    await create_topic(cluster, "refused-growth", 1)
    async with Admin(cluster.bootstrap) as admin:
        for bad in ([[1, 1]], [[1, 9]], [[1]], [[1, 2], [2, 3]]):
            with pytest.raises(InvalidReplicaAssignmentError):
                await admin.create_partitions("refused-growth", 2, assignments=bad)
        with pytest.raises(InvalidPartitionsError):
            await admin.create_partitions("refused-growth", 1)
    assert len(await partitions_of(cluster, "refused-growth")) == 1


def test_topic_alter_adds_partitions_from_the_shell(cluster: LocalCluster) -> None:
    assert cluster.cli("topic", "create", "shell-grown", "--partitions", "1").returncode == 0
    checked = cluster.cli(
        "topic", "alter", "shell-grown", "--partitions", "3", "--validate-only", "--format", "json"
    )
    assert json.loads(checked.stdout) == {
        "topic": "shell-grown",
        "partitions": 3,
        "validate_only": True,
    }
    done = cluster.cli("topic", "alter", "shell-grown", "--partitions", "3")
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode() == "Topic shell-grown now has 3 partitions\n"
    described = json.loads(
        cluster.cli("topic", "describe", "shell-grown", "--format", "json").stdout
    )
    assert [p["partition"] for p in described[0]["partitions"]] == [0, 1, 2]
    shrink = cluster.cli("topic", "alter", "shell-grown", "--partitions", "2")
    assert shrink.returncode == 1
    assert "INVALID_PARTITIONS" in shrink.stderr.decode()

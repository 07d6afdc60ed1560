"""Kafka group consumers through their coordinator's death, on the Kafka listener:
kafka-python, aiokafka and confluent-kafka in one group on a 3-broker cluster; the
broker leading the group's ``__consumer_offsets`` partition is SIGKILLed. The new
coordinator (the next leader of that partition, replication factor 3) answers with
every offset committed before the kill, the members find it through FindCoordinator
(NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE or a lost connection send them there), and
what is produced afterwards is consumed and committed to the log end."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import kafka.errors
import pytest
import trio

from minibroker.client.admin import Admin
from minibroker.protocol.offsets_topic import OFFSETS_TOPIC, partition_for
from tests.support.cluster import LocalCluster
from tests.support.kafka_groups import (
    CONSUME_TIMEOUT_S,
    KAFKA_LIBRARIES,
    Member,
    Record,
    committed_offsets,
    create_topic,
    log_ends,
    produce,
    wait_for,
)

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

PARTITIONS = 6
RECORDS = 200  # before the kill, and as many after


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path_factory.mktemp("cluster"), kafka_listeners=True) as running:
        yield running


def coordinator_of(cluster: LocalCluster, group: str) -> int:
    """The broker leading ``group``'s partition of ``__consumer_offsets``."""

    async def leader() -> int:
        async with Admin(cluster.bootstrap) as admin:
            [described] = await admin.describe_topics([OFFSETS_TOPIC])
        partition = partition_for(group, len(described.partitions))
        [found] = [p.leader for p in described.partitions if p.partition == partition]
        assert found >= 0, f"{OFFSETS_TOPIC}-{partition} has no leader"
        return found

    return trio.run(leader)


def committed_reach(cluster: LocalCluster, group: str, expected: dict[int, int]) -> None:
    """Until the group's committed offsets (read as an admin client reads them, through
    whichever broker coordinates the group now) are ``expected``."""
    deadline = time.monotonic() + CONSUME_TIMEOUT_S
    seen: object = None
    while time.monotonic() < deadline:
        try:
            seen = committed_offsets(cluster, group)
        except kafka.errors.KafkaError as exc:  # no coordinator yet, or still loading
            seen = exc
        if seen == expected:
            return
        time.sleep(0.2)  # the state is in another process: nothing to wait on but polls
    pytest.fail(f"committed offsets of {group} never reached {expected}: last {seen}")


def test_group_consumers_follow_a_killed_coordinator_and_lose_no_commit(
    cluster: LocalCluster,
) -> None:
    topic = group = "coordinator-killed"
    create_topic(cluster, topic, PARTITIONS)
    changed = threading.Condition()
    members = [Member(name, changed) for name in KAFKA_LIBRARIES]
    for member, run in zip(members, KAFKA_LIBRARIES.values(), strict=True):
        member.start(run(cluster.kafka_bootstrap, group, topic))

    def consumed() -> set[Record]:
        return {record for m in members for record in m.consumed}

    try:

        def shared_out() -> bool:
            held = [m.assigned for m in members]
            return all(held) and len(frozenset().union(*held)) == PARTITIONS

        wait_for(shared_out, "every member to hold partitions", members)
        before = produce(cluster, topic, PARTITIONS, RECORDS, tag=b"before")
        wait_for(lambda: consumed() >= set(before), "the first records", members)
        committed_reach(cluster, group, log_ends(before))

        cluster.kill_broker(coordinator_of(cluster, group))
        committed_reach(cluster, group, log_ends(before))  # from the new coordinator

        after = produce(cluster, topic, PARTITIONS, RECORDS, tag=b"after")
        wait_for(lambda: consumed() >= set(after), "the records sent after the kill", members)
        committed_reach(cluster, group, log_ends(before + after))
    finally:
        for member in members:
            member.stop.set()
        for member in members:
            member.join()

    assert consumed() == set(before + after)

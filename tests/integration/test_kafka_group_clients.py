"""Kafka's own group consumers against a 3-broker cluster's Kafka listeners: kafka-python
``KafkaConsumer(group_id=...)``, aiokafka ``AIOKafkaConsumer(group_id=...)``,
confluent-kafka ``Consumer({"group.id": ...})`` and ``kcat -G`` each join a group,
consume and commit; the three libraries (and the bundled Consumer, on the msgpack
listener) share one group's partitions, each record consumed by exactly one of them; a
consumer restarted in its group resumes from the committed offsets; cooperative-sticky
members (confluent-kafka, the bundled Consumer) give up only the partitions that move; a
restarted static member gets its partitions back without a rebalance; admin clients list,
rewind and delete groups and offsets. Committed offsets are read back with another
client than the one that wrote them (kafka-python's admin client: OffsetFetch,
DescribeGroups); tests/support/kafka_groups.py runs the group members.
"""

from __future__ import annotations

import asyncio
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator

import aiokafka
import confluent_kafka
import confluent_kafka.admin
import pytest
import trio
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.structs import OffsetAndMetadata

from minibroker.protocol.api import ApiKey
from tests.support import groups
from tests.support.broker import KafkaWireClient
from tests.support.cluster import LocalCluster
from tests.support.kafka_groups import (
    CONSUME_TIMEOUT_S,
    KAFKA_LIBRARIES,
    SESSION_TIMEOUT_MS,
    Member,
    Record,
    bundled_member,
    committed_offsets,
    confluent_member,
    create_topic,
    described_group,
    group_state,
    log_ends,
    produce,
    wait_for,
)

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

KCAT_TIMEOUT_S = 60


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path_factory.mktemp("cluster"), kafka_listeners=True) as running:
        yield running


# -- one client at a time ----------------------------------------------------------------


def kafka_python_consumes(
    cluster: LocalCluster, topic: str, group: str, count: int
) -> list[Record]:
    """``count`` records read by a kafka-python group consumer, which then commits and
    leaves."""
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=cluster.kafka_bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    try:
        found: list[Record] = []
        deadline = time.monotonic() + CONSUME_TIMEOUT_S
        while len(found) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                found += [(r.partition, r.offset, r.value) for r in records]
        consumer.commit()
        return found
    finally:
        consumer.close()


def aiokafka_consumes(cluster: LocalCluster, topic: str, group: str, count: int) -> list[Record]:
    async def consume() -> list[Record]:
        consumer = aiokafka.AIOKafkaConsumer(
            topic,
            bootstrap_servers=cluster.kafka_bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await consumer.start()
        try:
            found: list[Record] = []
            while len(found) < count:
                batches = await consumer.getmany(timeout_ms=500)
                found += [(r.partition, r.offset, r.value) for b in batches.values() for r in b]
            await consumer.commit()
            return found
        finally:
            await consumer.stop()

    return asyncio.run(asyncio.wait_for(consume(), CONSUME_TIMEOUT_S))


def confluent_consumes(cluster: LocalCluster, topic: str, group: str, count: int) -> list[Record]:
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([topic])
        found: list[Record] = []
        deadline = time.monotonic() + CONSUME_TIMEOUT_S
        while len(found) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            found.append((message.partition(), message.offset(), message.value()))
        consumer.commit(asynchronous=False)
        return found
    finally:
        consumer.close()


CONSUMERS = {
    "kafka-python": kafka_python_consumes,
    "aiokafka": aiokafka_consumes,
    "confluent-kafka": confluent_consumes,
}


@pytest.mark.parametrize("library", list(CONSUMERS))
def test_a_group_consumer_consumes_every_partition_and_commits(
    cluster: LocalCluster, library: str
) -> None:
    topic = group = f"alone-{library}"
    create_topic(cluster, topic, 3)
    sent = produce(cluster, topic, 3, 90)
    found = CONSUMERS[library](cluster, topic, group, len(sent))
    assert sorted(found) == sorted(sent)
    assert committed_offsets(cluster, group) == log_ends(sent)
    assert group_state(cluster, group) == ("Empty", "consumer", 0)  # it left on close


def kcat(cluster: LocalCluster, *argv: str) -> bytes:
    done = subprocess.run(
        ["kcat", "-b", cluster.kafka_bootstrap, *argv],
        capture_output=True,
        timeout=KCAT_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout


def test_kcat_balanced_consumer_consumes_and_commits(cluster: LocalCluster) -> None:
    create_topic(cluster, "kcat-group", 3)
    sent = produce(cluster, "kcat-group", 3, 60)
    out = kcat(
        cluster,
        "-G",
        "kc",
        "-X",
        "auto.offset.reset=earliest",
        "-e",
        "-q",
        "-f",
        "%p %o %s\n",
        "kcat-group",
    )
    found = [
        (int(partition), int(offset), value)
        for partition, offset, value in (line.split(b" ", 2) for line in out.splitlines())
    ]
    assert sorted(found) == sorted(sent)
    assert committed_offsets(cluster, "kc") == log_ends(sent)


# -- several libraries in one group -------------------------------------------------------


@pytest.mark.parametrize(
    "with_bundled", [False, True], ids=["three-libraries", "three-libraries-and-bundled"]
)
def test_several_libraries_share_one_groups_partitions_each_record_consumed_once(
    cluster: LocalCluster, with_bundled: bool
) -> None:
    """kafka-python, aiokafka and confluent-kafka (and the bundled Consumer, on the
    msgpack listener) in one group, all with the round-robin assignor they share."""
    group = topic = "mixed-with-bundled" if with_bundled else "mixed"
    partitions = 8 if with_bundled else 6
    create_topic(cluster, topic, partitions)
    changed = threading.Condition()
    runners = [
        (name, run(cluster.kafka_bootstrap, group, topic)) for name, run in KAFKA_LIBRARIES.items()
    ]
    if with_bundled:
        runners.append(("bundled", bundled_member(cluster.bootstrap, group, topic)))
    members = [Member(name, changed) for name, _ in runners]
    for member, (_, run) in zip(members, runners, strict=True):
        member.start(run)
    try:

        def shared_out() -> bool:
            held = [m.assigned for m in members]
            return all(held) and sum(map(len, held)) == partitions == len(frozenset().union(*held))

        wait_for(shared_out, "every member to hold its own partitions", members)
        held = {m.name: m.assigned for m in members}
        assert group_state(cluster, group) == ("Stable", "consumer", len(members))
        sent = produce(cluster, topic, partitions, 400)
        wait_for(
            lambda: sum(len(m.consumed) for m in members) >= len(sent),
            "every record to be consumed",
            members,
        )
    finally:
        for member in members:
            member.stop.set()
        for member in members:
            member.join()

    everything = [record for m in members for record in m.consumed]
    assert sorted(everything) == sorted(sent)  # each record once, none lost
    for member in members:
        assert member.consumed, f"{member.name} consumed nothing"
        assert {p for p, _, _ in member.consumed} <= held[member.name]
    assert committed_offsets(cluster, group) == log_ends(sent)


def test_cooperative_members_of_both_listeners_keep_their_partitions_while_one_joins(
    cluster: LocalCluster,
) -> None:
    """confluent-kafka and the bundled Consumer with the cooperative-sticky assignor
    (KIP-429): when a second confluent-kafka member joins, the first two only give up
    the partitions that move, and keep consuming the others throughout."""
    topic = group = "cooperative"
    partitions = 6
    create_topic(cluster, topic, partitions)
    changed = threading.Condition()
    bootstrap, kafka_bootstrap = cluster.bootstrap, cluster.kafka_bootstrap
    runners = {
        "confluent-1": confluent_member(kafka_bootstrap, group, topic, "cooperative-sticky"),
        "bundled": bundled_member(bootstrap, group, topic, "cooperative-sticky"),
        "confluent-2": confluent_member(kafka_bootstrap, group, topic, "cooperative-sticky"),
    }
    members = {name: Member(name, changed) for name in runners}
    first, bundled, joining = members.values()

    def shared_by(group_members: list[Member]) -> Callable[[], bool]:
        def shared() -> bool:
            held = [m.assigned for m in group_members]
            return all(held) and sum(map(len, held)) == partitions == len(frozenset().union(*held))

        return shared

    for member in (first, bundled):
        member.start(runners[member.name])
    try:
        wait_for(
            shared_by([first, bundled]), "two members to share the partitions", [first, bundled]
        )
        before = {m.name: m.assigned for m in (first, bundled)}
        revocations_before = len(first.revoked)
        sent = produce(cluster, topic, partitions, 120, tag=b"two")
        everyone = list(members.values())
        joining.start(runners[joining.name])
        wait_for(shared_by(everyone), "three members to share the partitions", everyone)
        sent += produce(cluster, topic, partitions, 120, tag=b"three")
        wait_for(
            lambda: sum(len(m.consumed) for m in everyone) >= len(sent),
            "every record to be consumed",
            everyone,
        )
        after = {m.name: m.assigned for m in (first, bundled)}
        revoked = first.revoked[revocations_before:]  # closing revokes everything: not that
    finally:
        for member in members.values():
            member.stop.set()
        for member in members.values():
            member.join()

    for member in (first, bundled):
        assert after[member.name] < before[member.name]  # gave some up, kept the rest
    assert frozenset().union(*revoked) == before[first.name] - after[first.name]
    consumed = Counter(record for m in members.values() for record in m.consumed)
    assert set(consumed) == set(sent)  # none lost
    moved = joining.assigned  # a record read twice was read just before its partition moved
    assert {p for (p, _, _), times in consumed.items() if times > 1} <= moved
    assert committed_offsets(cluster, group) == log_ends(sent)


# -- administration -------------------------------------------------------------------


def test_kafka_admin_clients_list_rewind_and_delete_groups_and_their_offsets(
    cluster: LocalCluster,
) -> None:
    """ListGroups with a state filter, OffsetCommit from outside the group, OffsetDelete
    and DeleteGroups, from kafka-python's and confluent-kafka's admin clients."""
    topic = group = "administered"
    create_topic(cluster, topic, 2)
    sent = produce(cluster, topic, 2, 20)
    kafka_python_consumes(cluster, topic, group, len(sent))  # commits 10 and 10, leaves

    admin = KafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap)
    try:
        empty = {g["group_id"] for g in admin.list_groups(states_filter=["Empty"])}
        stable = {g["group_id"] for g in admin.list_groups(states_filter=["Stable"])}
        assert group in empty and group not in stable
        rewound = admin.alter_group_offsets(
            group, {TopicPartition(topic, 0): OffsetAndMetadata(3, "rewound", -1)}
        )
        assert [error.errno for error in rewound.values()] == [0]
        assert committed_offsets(cluster, group) == {0: 3, 1: 10}
        dropped = admin.delete_group_offsets(group, [TopicPartition(topic, 1)])
        assert [error.errno for error in dropped.values()] == [0]
        assert committed_offsets(cluster, group) == {0: 3}
    finally:
        admin.close()

    # partition 0 from the rewound offset, partition 1 (no offset left) from the start
    found = confluent_consumes(cluster, topic, group, 17)
    assert sorted(found) == sorted(r for r in sent if r[0] == 1 or r[1] >= 3)

    confluent_admin = confluent_kafka.admin.AdminClient(
        {"bootstrap.servers": cluster.kafka_bootstrap}
    )
    listed = confluent_admin.list_consumer_groups().result(timeout=KCAT_TIMEOUT_S)
    assert group in {g.group_id for g in listed.valid}
    deletions = confluent_admin.delete_consumer_groups([group], request_timeout=30)
    deletions[group].result(timeout=KCAT_TIMEOUT_S)
    admin = KafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap)
    try:
        assert group not in {g["group_id"] for g in admin.list_groups()}
    finally:
        admin.close()


def test_offsets_committed_for_a_topic_that_does_not_exist_are_refused_and_not_stored(
    cluster: LocalCluster,
) -> None:
    """OffsetCommit (and so AlterConsumerGroupOffsets) naming a missing topic answers
    UNKNOWN_TOPIC_OR_PARTITION for it, as Kafka does; partitions that exist in the same
    request are committed."""
    create_topic(cluster, "committed-real", 1)
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": cluster.kafka_bootstrap})
    request = confluent_kafka.ConsumerGroupTopicPartitions(
        "ghost-committer", [confluent_kafka.TopicPartition("no-such-topic", 0, 5)]
    )
    future = admin.alter_consumer_group_offsets([request])["ghost-committer"]
    (altered,) = future.result(timeout=KCAT_TIMEOUT_S).topic_partitions
    del admin  # destroyed now, while its brokers are up
    assert altered.error.code() == confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART

    python_admin = KafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap)
    try:
        answer = python_admin.alter_group_offsets(
            "ghost-committer",
            {
                TopicPartition("no-such-topic", 0): OffsetAndMetadata(5, "", -1),
                TopicPartition("committed-real", 0): OffsetAndMetadata(1, "", -1),
            },
        )
        assert {tp.topic: error.errno for tp, error in answer.items()} == {
            "no-such-topic": 3,  # UNKNOWN_TOPIC_OR_PARTITION
            "committed-real": 0,
        }
    finally:
        python_admin.close()
    assert committed_offsets(cluster, "ghost-committer") == {0: 1}


# -- restarts --------------------------------------------------------------------------


def test_restarted_group_consumers_resume_from_the_committed_offsets(
    cluster: LocalCluster,
) -> None:
    """Each consumer reads what was produced since the last one committed and left:
    kafka-python twice (a restart), then aiokafka, then confluent-kafka."""
    topic, group = "resume", "resumer"
    create_topic(cluster, topic, 2)
    everything: list[Record] = []
    for step, consume in enumerate(
        [kafka_python_consumes, kafka_python_consumes, aiokafka_consumes, confluent_consumes]
    ):
        sent = produce(cluster, topic, 2, 40, tag=b"step-%d" % step)
        everything += sent
        found = consume(cluster, topic, group, len(sent))
        assert sorted(found) == sorted(sent), f"step {step}"
        assert committed_offsets(cluster, group) == log_ends(everything)


# -- static membership ------------------------------------------------------------------


class StaticMember:
    """A confluent-kafka consumer with a ``group.instance.id``, polled by the test: it
    records every assignment and revocation the group gives it."""

    def __init__(self, cluster: LocalCluster, group: str, topic: str, instance: str) -> None:
        self.events: list[tuple[str, frozenset[int]]] = []
        self.consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": cluster.kafka_bootstrap,
                "group.id": group,
                "group.instance.id": instance,
                "session.timeout.ms": STATIC_SESSION_TIMEOUT_MS,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        self.consumer.subscribe(
            [topic],
            on_assign=lambda _, tps: self.events.append(("assigned", partitions_of(tps))),
            on_revoke=lambda _, tps: self.events.append(("revoked", partitions_of(tps))),
        )

    def held(self) -> frozenset[int]:
        return partitions_of(self.consumer.assignment())


STATIC_SESSION_TIMEOUT_MS = 30_000
"""Far longer than a restart takes: the coordinator keeps the static member's place."""


def partitions_of(tps: list[confluent_kafka.TopicPartition]) -> frozenset[int]:
    return frozenset(tp.partition for tp in tps)


def static_instances(cluster: LocalCluster, group: str) -> set[str]:
    """The ``group.instance.id`` of every member, as DescribeGroups shows them."""
    return {member["group_instance_id"] for member in described_group(cluster, group)["members"]}


def poll_until(members: list[StaticMember], condition: Callable[[], bool], what: str) -> None:
    """Poll every member (their group protocol runs in poll) until ``condition``."""
    deadline = time.monotonic() + CONSUME_TIMEOUT_S
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}: {[m.events for m in members]}")
        for member in members:
            message = member.consumer.poll(0.1)
            assert message is None or message.error() is None, message.error()


def test_a_restarted_static_member_gets_its_partitions_back_without_a_rebalance(
    cluster: LocalCluster,
) -> None:
    topic = group = "static"
    create_topic(cluster, topic, 4)
    first, other = (StaticMember(cluster, group, topic, f"instance-{i}") for i in (1, 2))
    try:
        poll_until(
            [first, other],
            lambda: bool(first.held()) and bool(other.held()),
            "both members to hold partitions",
        )
        held, others = first.held(), other.held()
        assert held | others == {0, 1, 2, 3}
        other_events = len(other.events)
        first.consumer.close()  # a static member leaves no LeaveGroup behind

        again = StaticMember(cluster, group, topic, "instance-1")
        poll_until([again, other], lambda: bool(again.held()), "the restarted member")
        assert again.held() == held
        assert other.held() == others
        assert other.events[other_events:] == []  # no rebalance reached the other member
        assert static_instances(cluster, group) == {"instance-1", "instance-2"}
        again.consumer.close()
    finally:
        other.consumer.close()


# -- the oldest versions ----------------------------------------------------------------

COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
UNKNOWN_MEMBER_ID = 25


async def find_coordinator_v0(cluster: LocalCluster, group: str) -> tuple[int, int]:
    """(node id, Kafka port) of ``group``'s coordinator, asked with FindCoordinator v0
    (one key, one answer at top level) until the offsets topic has a leader there."""
    port = int(cluster.kafka_bootstrap.split(",")[0].rsplit(":", 1)[1])
    async with KafkaWireClient(await trio.open_tcp_stream("127.0.0.1", port)) as client:
        with trio.fail_after(CONSUME_TIMEOUT_S):
            while True:
                found = await client.kafka_request(ApiKey.FIND_COORDINATOR, 0, {"key": group})
                if found["error_code"] != COORDINATOR_NOT_AVAILABLE:
                    break
                await trio.sleep(0.2)  # the offsets topic is being created
    assert found["error_code"] == 0, found
    return found["node_id"], found["port"]


async def test_a_group_lives_and_dies_through_the_oldest_version_of_every_group_api(
    cluster: LocalCluster,
) -> None:
    """v0 of the membership APIs, OffsetCommit v2 and OffsetFetch v1, as clients from
    before KIP-394 / KIP-345 / KIP-709 speak them: no member-id round trip, one key, one
    leaving member, one group, and per-partition errors where v1 has no group error."""
    group = topic = "oldest-versions"
    await groups.create_topic(cluster.bootstrap, topic, 2)
    node_id, port = await find_coordinator_v0(cluster, group)
    async with KafkaWireClient(await trio.open_tcp_stream("127.0.0.1", port)) as client:
        joined = await client.kafka_request(
            ApiKey.JOIN_GROUP,
            0,
            {
                "group_id": group,
                "session_timeout_ms": SESSION_TIMEOUT_MS,
                "member_id": "",
                "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": b"subscription"}],
            },
        )
        assert joined["error_code"] == 0, joined  # v0: a member id at once
        member, generation = joined["member_id"], joined["generation_id"]
        assert member and joined["leader"] == member
        assert [m["member_id"] for m in joined["members"]] == [member]
        synced = await client.kafka_request(
            ApiKey.SYNC_GROUP,
            0,
            {
                "group_id": group,
                "generation_id": generation,
                "member_id": member,
                "assignments": [{"member_id": member, "assignment": b"partitions 0 and 1"}],
            },
        )
        assert (synced["error_code"], synced["assignment"]) == (0, b"partitions 0 and 1")
        beat = {"group_id": group, "generation_id": generation, "member_id": member}
        assert (await client.kafka_request(ApiKey.HEARTBEAT, 0, beat))["error_code"] == 0

        committed = await client.kafka_request(
            ApiKey.OFFSET_COMMIT,
            2,
            {
                **beat,
                "retention_time_ms": -1,
                "topics": [
                    {
                        "name": topic,
                        "partitions": [
                            {"partition_index": 0, "committed_offset": 7, "committed_metadata": "m"}
                        ],
                    }
                ],
            },
        )
        assert committed["topics"][0]["partitions"] == [{"partition_index": 0, "error_code": 0}]
        asked = {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0, 1]}]}
        fetched = await client.kafka_request(ApiKey.OFFSET_FETCH, 1, asked)
        partitions = fetched["topics"][0]["partitions"]
        assert [
            (p["partition_index"], p["committed_offset"], p["error_code"]) for p in partitions
        ] == [(0, 7, 0), (1, -1, 0)]
        assert partitions[0]["metadata"] == "m"

        described = await client.kafka_request(ApiKey.DESCRIBE_GROUPS, 0, {"groups": [group]})
        [state] = described["groups"]
        assert (state["group_state"], state["protocol_data"]) == ("Stable", "range")
        assert [m["member_assignment"] for m in state["members"]] == [b"partitions 0 and 1"]
        listed = await client.kafka_request(ApiKey.LIST_GROUPS, 0, {})
        assert group in {g["group_id"] for g in listed["groups"]}

        left = await client.kafka_request(
            ApiKey.LEAVE_GROUP, 0, {"group_id": group, "member_id": member}
        )
        assert left["error_code"] == 0
        again = await client.kafka_request(
            ApiKey.LEAVE_GROUP, 0, {"group_id": group, "member_id": member}
        )
        assert again["error_code"] == UNKNOWN_MEMBER_ID  # the one member's error, at top level
        described = await client.kafka_request(ApiKey.DESCRIBE_GROUPS, 0, {"groups": [group]})
        assert described["groups"][0]["group_state"] == "Empty"

    other = next(b["kafka_port"] for i, b in cluster.state["brokers"].items() if int(i) != node_id)
    async with KafkaWireClient(await trio.open_tcp_stream("127.0.0.1", other)) as elsewhere:
        refused = await elsewhere.kafka_request(ApiKey.OFFSET_FETCH, 1, asked)
        assert [
            (p["partition_index"], p["error_code"]) for p in refused["topics"][0]["partitions"]
        ] == [(0, NOT_COORDINATOR), (1, NOT_COORDINATOR)]

    async with KafkaWireClient(await trio.open_tcp_stream("127.0.0.1", port)) as client:
        deleted = await client.kafka_request(ApiKey.DELETE_GROUPS, 0, {"groups_names": [group]})
        assert deleted["results"] == [{"group_id": group, "error_code": 0}]

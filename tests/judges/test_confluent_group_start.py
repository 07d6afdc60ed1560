"""Three confluent-kafka (librdkafka) consumers of a new group, started 10 ms apart, all
get their partitions from the group's first generation, as against Kafka.

The judges' brokers run ``group.initial.rebalance.delay.ms`` 0, as Kafka's shipped
server.properties. A member that joins after a generation formed sends the others back
to rejoin, and librdkafka rejoins at most once a second: the group then settles a
second or more after the subscribe instead of a few round trips. The coordinator
answers a Heartbeat naming generation 1 with NONE only while generation 1 is current.
"""

from __future__ import annotations

import threading
import time

import confluent_kafka
import pytest
import trio
from confluent_kafka.admin import AdminClient, NewTopic

from minibroker.net.connection import Connection
from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import (
    NONE,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    NotCoordinatorError,
)
from tests.support.cluster import LocalCluster

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

CLIENT = (
    f"confluent-kafka {confluent_kafka.version()} (librdkafka {confluent_kafka.libversion()[0]})"
)
MEMBERS = 3
PARTITIONS = 6
INITIAL_DELAY_S = 0.0  # the judges' group.initial.rebalance.delay.ms
SETTLE_BOUND_S = INITIAL_DELAY_S + 1.0
"""A second generation costs a member librdkafka's join interval (1 s) before it rejoins;
one generation takes a few round trips and the coordinator's short gathering rounds."""
START_APART_S = 0.01
"""Members subscribe this far apart, as an application's processes start: time enough
for the first to join a generation of its own were the coordinator to complete the
join at once (a few round trips)."""
WAIT_S = 60.0
NOT_READY = {
    CoordinatorNotAvailableError.code,
    CoordinatorLoadInProgressError.code,
    NotCoordinatorError.code,
}


class Member:
    """One consumer in a thread of its own: subscribes when the barrier opens, then polls
    (callbacks and heartbeats) until ``stop``."""

    def __init__(
        self,
        bootstrap: str,
        group: str,
        topic: str,
        barrier: threading.Barrier,
        start_after_s: float,
    ) -> None:
        self.consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "session.timeout.ms": 10_000,
            }
        )
        self.topic = topic
        self.barrier = barrier
        self.start_after_s = start_after_s
        self.subscribed_at = 0.0
        self.assigned_at = 0.0
        self.partitions: list[int] = []
        self.member_id = ""
        self.assigned = threading.Event()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def on_assign(self, _: object, partitions: list[confluent_kafka.TopicPartition]) -> None:
        self.partitions = [tp.partition for tp in partitions]
        self.assigned_at = time.monotonic()

    def run(self) -> None:
        try:
            # Connected, the topic known and the coordinator found (OffsetFetch asks it):
            # what an application's consumers have when they subscribe together.
            self.consumer.list_topics(self.topic, timeout=WAIT_S)
            self.consumer.committed([confluent_kafka.TopicPartition(self.topic, 0)], WAIT_S)
            self.barrier.wait(timeout=WAIT_S)
            time.sleep(self.start_after_s)  # the scenario: started a few ms apart
            self.subscribed_at = time.monotonic()
            self.consumer.subscribe([self.topic], on_assign=self.on_assign)
            while not self.stop.is_set():
                self.consumer.poll(0.1)
                if self.assigned_at and not self.assigned.is_set():
                    # (asked here: from another thread, memberid() waits while this polls)
                    self.member_id = self.consumer.memberid()
                    self.assigned.set()
        finally:
            self.consumer.close()


async def heartbeat(coordinator: Connection, group: str, generation: int, member_id: str) -> int:
    body = {
        "group_id": group,
        "generation_id": generation,
        "member_id": member_id,
        "group_instance_id": None,
    }
    code: int = (await coordinator.request(ApiKey.HEARTBEAT, body))["error_code"]
    return code


async def ready_coordinator(bootstrap: str, group: str) -> tuple[str, int]:
    """The msgpack listener of ``group``'s coordinator, once it serves the group (a new
    cluster makes __consumer_offsets on the first FindCoordinator, then loads it)."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    async with Connection(host, int(port)) as any_broker:
        with trio.fail_after(WAIT_S):
            while True:
                found = await any_broker.request(
                    ApiKey.FIND_COORDINATOR, {"key": group, "key_type": 0}
                )
                if found["error_code"] == NONE:
                    address = found["host"], found["port"]
                    async with Connection(*address) as coordinator:
                        code = await heartbeat(coordinator, group, -1, "nobody")
                    if code not in NOT_READY:
                        return address
                assert found["error_code"] in NOT_READY | {NONE}, found
                await trio.sleep(0.1)  # no event to wait on from here


async def heartbeat_codes(
    bootstrap: str, group: str, generation: int, members: list[str]
) -> list[int]:
    """What the group's coordinator answers a Heartbeat of each member at ``generation``."""
    async with Connection(*await ready_coordinator(bootstrap, group)) as coordinator:
        return [await heartbeat(coordinator, group, generation, m) for m in members]


@pytest.mark.judge(CLIENT, "three consumers started 10 ms apart share the first generation")
def test_consumers_started_10_ms_apart_are_assigned_in_the_groups_first_generation(
    cluster: LocalCluster,
) -> None:
    topic, group = "started-together", "started-together-group"
    admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(WAIT_S)
    # Finding the group's coordinator makes __consumer_offsets if it is not there yet,
    # which members would otherwise each wait for on their own schedule.
    trio.run(ready_coordinator, cluster.bootstrap, group)
    barrier = threading.Barrier(MEMBERS)
    members = [
        Member(cluster.kafka_bootstrap, group, topic, barrier, i * START_APART_S)
        for i in range(MEMBERS)
    ]
    for member in members:
        member.thread.start()
    try:
        for member in members:
            assert member.assigned.wait(WAIT_S), "a member got no assignment"
        settled_s = max(m.assigned_at for m in members) - min(m.subscribed_at for m in members)
        member_ids = [m.member_id for m in members]
        codes = trio.run(heartbeat_codes, cluster.bootstrap, group, 1, member_ids)
    finally:
        for member in members:
            member.stop.set()
        for member in members:
            member.thread.join(WAIT_S)
    assert codes == [NONE] * MEMBERS, "the group is past its first generation"
    assert sorted(p for m in members for p in m.partitions) == list(range(PARTITIONS))
    assert all(m.partitions for m in members)
    assert settled_s < SETTLE_BOUND_S, f"settled {settled_s:.2f} s after the subscribe"

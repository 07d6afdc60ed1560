"""The consumer's group membership against a stubbed coordinator (no network).

``FakeCoordinator`` answers the group APIs for a group whose only member is the
consumer under test, as a coordinator would, unless a test queued a scripted error
code for an API; every request is recorded.
"""

from __future__ import annotations

import re
from collections import defaultdict, deque
from typing import Any

import pytest
import trio

from minibroker.client.consumer import Consumer
from minibroker.client.group_coordinator import (
    FENCED_INSTANCE_ID,
    ILLEGAL_GENERATION,
    INCONSISTENT_GROUP_PROTOCOL,
    MEMBER_ID_REQUIRED,
    NOT_COORDINATOR,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
    CommitFailedError,
    Coordinator,
    CoordinatorLink,
)
from minibroker.client.group_member import GroupMember, IllegalMemberTransition, MemberState
from minibroker.protocol.api import ApiKey
from minibroker.protocol.consumer_protocol import decode_subscription
from minibroker.protocol.errors import KafkaError, MinibrokerError, NetworkError


class FakeCoordinator(CoordinatorLink):
    def __init__(self, committed: dict[tuple[str, int], int]) -> None:
        self.group_id = "g"
        self.coordinator = None
        self.committed = dict(committed)
        self.generation = 0
        self.requests: list[tuple[ApiKey, dict[str, Any]]] = []
        self.scripted: dict[ApiKey, deque[int]] = defaultdict(deque)
        self.finds = 0
        self.heartbeat_seen = trio.Event()
        self.broken: set[ApiKey] = set()  # APIs whose next request loses the connection

    async def aclose(self) -> None:
        pass  # no connection to close

    async def find(self) -> Coordinator:
        if self.coordinator is None:
            self.finds += 1
            self.coordinator = Coordinator(1, "127.0.0.1", 9)
        return self.coordinator

    async def request(
        self, api_key: ApiKey, body: dict[str, Any], *, timeout: float | None = None
    ) -> dict[str, Any]:
        await self.find()
        await trio.lowlevel.checkpoint()
        if api_key in self.broken:
            self.broken.discard(api_key)
            self.mark_unknown()  # as CoordinatorLink.request does on a lost connection
            raise NetworkError("connection to 127.0.0.1:9 lost")
        self.requests.append((api_key, body))
        if self.scripted[api_key]:
            code = self.scripted[api_key].popleft()
            return {"error_code": code, "member_id": "m-1", "topics": []}
        return getattr(self, f"_{api_key.name.lower()}")(body)

    def sent(self, api_key: ApiKey) -> list[dict[str, Any]]:
        return [body for key, body in self.requests if key == api_key]

    def _join_group(self, body: dict[str, Any]) -> dict[str, Any]:
        if not body["member_id"]:
            return {"error_code": MEMBER_ID_REQUIRED, "member_id": "m-1"}
        self.generation += 1
        protocol = body["protocols"][0]
        return {
            "error_code": 0,
            "generation_id": self.generation,
            "protocol_name": protocol["name"],
            "leader": body["member_id"],
            "member_id": body["member_id"],
            "members": [{"member_id": body["member_id"], "metadata": protocol["metadata"]}],
        }

    def _sync_group(self, body: dict[str, Any]) -> dict[str, Any]:
        mine = [a["assignment"] for a in body["assignments"] if a["member_id"] == body["member_id"]]
        return {"error_code": 0, "assignment": mine[0]}

    def _heartbeat(self, body: dict[str, Any]) -> dict[str, Any]:
        self.heartbeat_seen.set()
        return {"error_code": 0}

    def _offset_fetch(self, body: dict[str, Any]) -> dict[str, Any]:
        topics = body["groups"][0]["topics"]
        return {
            "groups": [
                {
                    "group_id": "g",
                    "error_code": 0,
                    "topics": [
                        {
                            "name": t["name"],
                            "partitions": [
                                {
                                    "partition_index": p,
                                    "committed_offset": self.committed.get((t["name"], p), -1),
                                }
                                for p in t["partition_indexes"]
                            ],
                        }
                        for t in topics
                    ],
                }
            ]
        }

    def _offset_commit(self, body: dict[str, Any]) -> dict[str, Any]:
        for t in body["topics"]:
            for p in t["partitions"]:
                self.committed[(t["name"], p["partition_index"])] = p["committed_offset"]
        return {
            "topics": [
                {
                    "name": t["name"],
                    "partitions": [
                        {"partition_index": p["partition_index"], "error_code": 0}
                        for p in t["partitions"]
                    ],
                }
                for t in body["topics"]
            ]
        }

    def _leave_group(self, body: dict[str, Any]) -> dict[str, Any]:
        return {"error_code": 0, "members": []}


class Events:
    """The rebalance callbacks, recorded in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[tuple[str, int]]]] = []

    def on_partitions_revoked(self, tps: list[tuple[str, int]]) -> None:
        self.calls.append(("revoked", tps))

    async def on_partitions_assigned(self, tps: list[tuple[str, int]]) -> None:
        self.calls.append(("assigned", tps))

    def on_partitions_lost(self, tps: list[tuple[str, int]]) -> None:
        self.calls.append(("lost", tps))


def group_consumer(
    committed: dict[tuple[str, int], int] | None = None,
    strategy: str = "range",
    max_poll_interval_ms: int = 300_000,
) -> tuple[Consumer, FakeCoordinator, Events]:
    consumer = Consumer(
        "127.0.0.1:9",
        group_id="g",
        auto_offset_reset="earliest",
        partition_assignment_strategy=strategy,
        heartbeat_interval_ms=10,
        max_poll_interval_ms=max_poll_interval_ms,
    )
    group = consumer._group
    assert group is not None
    fake = FakeCoordinator(committed or {})
    group.link = group.member.link = fake

    async def counts(topics: Any) -> dict[str, int]:
        return {t: 2 for t in topics if t == "t"}

    group.partition_counts = counts
    events = Events()
    consumer.subscribe(["t"], listener=events)
    return consumer, fake, events


async def run_until_stable_in(member: GroupMember, generation: int) -> None:
    """Run the member (heartbeats, rejoins) until it is stable in ``generation``."""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(member.run)
        with trio.fail_after(5):
            while member.generation_id < generation or not member.is_stable:
                await trio.sleep(0.01)
        nursery.cancel_scope.cancel()


async def test_first_join_takes_the_member_id_round_trip_and_the_whole_topic() -> None:
    consumer, fake, events = group_consumer({("t", 0): 42})
    await consumer._group.member.join()
    joins = fake.sent(ApiKey.JOIN_GROUP)
    assert [j["member_id"] for j in joins] == ["", "m-1"]
    assert decode_subscription(joins[1]["protocols"][0]["metadata"]).topics == ("t",)
    assert sorted(consumer.assignment()) == [("t", 0), ("t", 1)]
    assert consumer.position("t", 0) == 42  # the committed offset
    assert consumer.position("t", 1) is None  # none committed: auto_offset_reset decides
    assert events.calls == [("assigned", [("t", 0), ("t", 1)])]
    assert consumer._group.member.state is MemberState.STABLE


async def test_heartbeat_rebalance_in_progress_makes_an_eager_member_revoke_commit_and_rejoin() -> (
    None
):
    consumer, fake, events = group_consumer()
    member = consumer._group.member
    await member.join()
    consumer.seek("t", 0, 7)
    fake.scripted[ApiKey.HEARTBEAT].append(REBALANCE_IN_PROGRESS)
    await run_until_stable_in(member, generation=2)
    assert fake.committed[("t", 0)] == 7  # committed before giving the partition up
    assert [name for name, _ in events.calls] == ["assigned", "revoked", "assigned"]


async def test_illegal_generation_loses_partitions_without_committing() -> None:
    consumer, fake, events = group_consumer()
    member = consumer._group.member
    await member.join()
    consumer.seek("t", 0, 5)
    fake.scripted[ApiKey.HEARTBEAT].append(ILLEGAL_GENERATION)
    await run_until_stable_in(member, generation=2)
    assert events.calls[1] == ("lost", [("t", 0), ("t", 1)])
    assert fake.sent(ApiKey.OFFSET_COMMIT) == []
    assert fake.sent(ApiKey.JOIN_GROUP)[-1]["member_id"] == "m-1"  # kept its id


async def test_unknown_member_id_on_sync_rejoins_with_a_new_member_id() -> None:
    consumer, fake, _ = group_consumer()
    fake.scripted[ApiKey.SYNC_GROUP].append(UNKNOWN_MEMBER_ID)
    await consumer._group.member.join()
    assert [j["member_id"] for j in fake.sent(ApiKey.JOIN_GROUP)] == ["", "m-1", "", "m-1"]
    assert consumer._group.member.is_stable


async def test_not_coordinator_makes_the_member_find_the_coordinator_again() -> None:
    consumer, fake, _ = group_consumer()
    fake.scripted[ApiKey.JOIN_GROUP].append(NOT_COORDINATOR)
    await consumer._group.member.join()
    assert fake.finds == 2
    assert consumer._group.member.is_stable


async def test_fatal_join_error_is_raised_by_poll() -> None:
    consumer, fake, _ = group_consumer()
    fake.scripted[ApiKey.JOIN_GROUP].append(INCONSISTENT_GROUP_PROTOCOL)
    await consumer._group.run()
    with pytest.raises(KafkaError, match="INCONSISTENT_GROUP_PROTOCOL"):
        await consumer.poll(0)


async def test_commit_sends_positions_with_generation_and_member_id() -> None:
    consumer, fake, _ = group_consumer()
    await consumer._group.member.join()
    consumer.seek("t", 1, 9)
    await consumer.commit()
    commit = fake.sent(ApiKey.OFFSET_COMMIT)[-1]
    assert (commit["generation_id"], commit["member_id"]) == (1, "m-1")
    assert fake.committed == {("t", 1): 9}  # partition 0 has no position yet
    assert await consumer.committed(("t", 1)) == 9


async def test_commit_refused_for_a_fenced_generation_raises_commit_failed() -> None:
    consumer, fake, _ = group_consumer()
    await consumer._group.member.join()
    consumer.seek("t", 0, 3)
    fake.scripted[ApiKey.OFFSET_COMMIT].append(ILLEGAL_GENERATION)
    with pytest.raises(CommitFailedError, match="ILLEGAL_GENERATION"):
        await consumer.commit()


async def test_cooperative_member_keeps_its_partitions_through_a_rebalance() -> None:
    consumer, fake, events = group_consumer(strategy="cooperative-sticky")
    member = consumer._group.member
    await member.join()
    member.request_rejoin("test")
    await member.join()
    second_join = fake.sent(ApiKey.JOIN_GROUP)[-1]
    owned = decode_subscription(second_join["protocols"][0]["metadata"]).owned_partitions
    assert owned == (("t", (0, 1)),)
    assert [name for name, _ in events.calls] == ["assigned", "assigned"]
    assert events.calls[1] == ("assigned", [])  # nothing new, nothing revoked


async def test_member_state_moves_only_along_the_table() -> None:
    consumer, _, _ = group_consumer()
    member = consumer._group.member
    with pytest.raises(IllegalMemberTransition):
        member._move(MemberState.STABLE)


async def test_lost_connection_mid_join_makes_the_member_find_the_coordinator_again() -> None:
    consumer, fake, _ = group_consumer({("t", 0): 3})
    fake.broken = {ApiKey.SYNC_GROUP, ApiKey.OFFSET_FETCH}
    await consumer._group.member.join()
    assert fake.finds == 3  # after each lost connection
    assert consumer.position("t", 0) == 3
    assert consumer._group.member.is_stable


def test_a_pattern_matches_whole_topic_names_and_never_internal_topics() -> None:
    consumer = Consumer("127.0.0.1:9", group_id="g")
    consumer.subscribe(pattern=r"orders.*")
    names = ["orders", "orders-eu", "my-orders", "__consumer_offsets", "other"]
    assert consumer._group._match(names) == ("orders", "orders-eu")
    consumer._group.pattern = re.compile(r".*")
    assert "__consumer_offsets" not in consumer._group._match(names)


def test_subscribe_needs_a_group_and_excludes_assign() -> None:
    with pytest.raises(MinibrokerError, match="needs a group_id"):
        Consumer("127.0.0.1:9").subscribe(["t"])
    consumer = Consumer("127.0.0.1:9", group_id="g")
    consumer.subscribe(["t"])
    with pytest.raises(MinibrokerError, match="exclude each other"):
        consumer.assign([("t", 0)])


async def test_a_consumer_that_stops_polling_leaves_and_rejoins_when_it_polls_again() -> None:
    consumer, fake, events = group_consumer(max_poll_interval_ms=200)
    group = consumer._group
    assert group is not None
    async with trio.open_nursery() as nursery:
        nursery.start_soon(group.run)
        with trio.fail_after(5):
            while not fake.sent(ApiKey.LEAVE_GROUP):
                await trio.sleep(0.02)
            assert consumer.assignment() == [] and not group.member.is_stable
            assert events.calls[-1] == ("lost", [("t", 0), ("t", 1)])
            await consumer.poll(0)
            await consumer.wait_for_assignment()
        assert sorted(consumer.assignment()) == [("t", 0), ("t", 1)]
        nursery.cancel_scope.cancel()


async def test_a_static_member_fenced_by_a_newer_instance_stops_with_the_error() -> None:
    consumer, fake, _ = group_consumer()
    member = consumer._group.member
    await member.join()
    fake.scripted[ApiKey.HEARTBEAT].append(FENCED_INSTANCE_ID)
    with trio.fail_after(5):
        await member.run()  # returns: the error is fatal
    with pytest.raises(KafkaError, match="FENCED_INSTANCE_ID"):
        await consumer.poll(0)


async def test_unsubscribe_commits_leaves_and_lets_the_consumer_assign_or_subscribe_again() -> None:
    consumer, fake, events = group_consumer()
    group = consumer._group
    async with trio.open_nursery() as nursery:
        consumer._tasks.nursery = nursery  # what __aenter__ provides
        await nursery.start(group.run)
        with trio.fail_after(5):
            await consumer.wait_for_assignment()
        consumer.seek("t", 1, 4)
        await consumer.unsubscribe()
        assert fake.sent(ApiKey.LEAVE_GROUP) and fake.committed == {("t", 1): 4}
        assert events.calls[-1] == ("revoked", [("t", 0), ("t", 1)])
        consumer.assign([("t", 0)])  # allowed again
        assert consumer.assignment() == [("t", 0)]
        consumer.assign([])
        consumer.subscribe(["t"])  # and a group membership again
        with trio.fail_after(5):
            await consumer.wait_for_assignment()
        assert sorted(consumer.assignment()) == [("t", 0), ("t", 1)]
        nursery.cancel_scope.cancel()

"""Committed offsets: the group checks a commit passes, what is written to the offsets
log, loading it back after a failover (tombstones applied), expiry and deletion."""

from __future__ import annotations

from minibroker.coordinator.group import GroupState
from minibroker.coordinator.metrics import CoordinatorCollector
from minibroker.coordinator.offsets_log import TxnProducer
from minibroker.protocol.errors import (
    NONE,
    GroupIdNotFoundError,
    GroupSubscribedToTopicError,
    IllegalGenerationError,
    NonEmptyGroupError,
    OffsetMetadataTooLargeError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from minibroker.protocol.offsets_topic import (
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
)
from minibroker.protocol.topic_partition import TopicPartition
from tests.unit.coordinator.harness import (
    GROUP,
    MemoryOffsetsLog,
    WallClock,
    answered,
    join_request,
    make_coordinator,
    member_id_for,
    running,
    settle,
)
from tests.unit.coordinator.test_coordinator_races import stable_group

T0 = TopicPartition("orders", 0)
T1 = TopicPartition("orders", 1)


def offsets(
    *pairs: tuple[TopicPartition, int], metadata: str = ""
) -> dict[TopicPartition, OffsetCommitValue]:
    return {tp: OffsetCommitValue(o, metadata, 1_700_000_000_000) for tp, o in pairs}


async def test_a_members_commit_is_written_then_fetchable() -> None:
    log = MemoryOffsetsLog()
    c = make_coordinator(log)
    async with running(c):
        (a,) = await stable_group(c, 1)
        answer = c.offsets.commit_offsets(GROUP, 1, a, None, offsets((T0, 5), (T1, 9)))
        await settle()
        assert answered(answer)["errors"] == {T0: NONE, T1: NONE}
        assert c.offsets.fetch_offsets(GROUP, [T0, TopicPartition("orders", 2)]) == {
            T0: OffsetCommitValue(5, "", 1_700_000_000_000),
            TopicPartition("orders", 2): None,
        }
        written = [
            (decode_key(r.key), decode_offset_commit_value(r.value).offset)
            for r in log.records
            if r.key is not None
            and r.value is not None
            and isinstance(decode_key(r.key), OffsetCommitKey)
        ]
        assert written == [
            (OffsetCommitKey(GROUP, "orders", 0), 5),
            (OffsetCommitKey(GROUP, "orders", 1), 9),
        ]


async def test_commits_from_outside_the_current_generation_are_refused() -> None:
    c = make_coordinator()
    async with running(c):
        a, b = await stable_group(c, 2)
        wrong_generation = c.offsets.commit_offsets(GROUP, 0, a, None, offsets((T0, 1)))
        assert answered(wrong_generation)["errors"] == {T0: IllegalGenerationError.code}
        stranger = c.offsets.commit_offsets(GROUP, 1, "stranger", None, offsets((T0, 1)))
        assert answered(stranger)["errors"] == {T0: UnknownMemberIdError.code}
        # A third member arrives; once the rebalance completes, the group waits for the
        # leader's assignment and refuses commits meanwhile.
        newcomer = await member_id_for(c)
        for member in (newcomer, a, b):
            c.join_group(join_request(member))
        await settle()
        assert c.manager.group(GROUP).state is GroupState.COMPLETING_REBALANCE  # type: ignore[union-attr]
        completing = c.offsets.commit_offsets(GROUP, 2, a, None, offsets((T0, 1)))
        assert answered(completing)["errors"] == {T0: RebalanceInProgressError.code}


async def test_a_commit_outside_any_group_protocol_creates_an_empty_group() -> None:
    c = make_coordinator()
    async with running(c):
        unknown = c.offsets.commit_offsets("fresh", 3, "", None, offsets((T0, 1)))
        assert answered(unknown)["errors"] == {T0: IllegalGenerationError.code}
        standalone = c.offsets.commit_offsets("fresh", -1, "", None, offsets((T0, 1)))
        await settle()
        assert answered(standalone)["errors"] == {T0: NONE}
        group = c.manager.group("fresh")
        assert group is not None and group.state is GroupState.EMPTY


async def test_metadata_longer_than_the_limit_is_refused_per_partition() -> None:
    c = make_coordinator()
    async with running(c):
        answer = c.offsets.commit_offsets(GROUP, -1, "", None, offsets((T0, 1), metadata="x" * 101))
        await settle()
        assert answered(answer)["errors"] == {T0: OffsetMetadataTooLargeError.code}


async def test_a_new_coordinator_loads_groups_and_offsets_with_tombstones_applied() -> None:
    log = MemoryOffsetsLog()
    c = make_coordinator(log)
    async with running(c):
        a, b = await stable_group(c, 2)
        answered_commit = c.offsets.commit_offsets(GROUP, 1, a, None, offsets((T0, 5), (T1, 6)))
        await settle()
        assert answered(answered_commit)["errors"] == {T0: NONE, T1: NONE}
        c.offsets.commit_offsets(GROUP, 1, a, None, offsets((T0, 8)))
        await settle()
        c.offsets.commit_offsets("other", -1, "", None, offsets((T1, 3)))
        await settle()
        c.offsets.delete_groups(["other"])
        await settle()
    successor = make_coordinator(log)
    async with running(successor):
        group = successor.manager.group(GROUP)
        assert group is not None
        assert group.state is GroupState.STABLE
        assert (group.generation_id, group.protocol_name, group.leader_id) == (1, "range", a)
        assert {m: group.members[m].assignment for m in group.members} == {
            a: a.encode(),
            b: b.encode(),
        }
        assert {tp: v.offset for tp, v in group.offsets.items()} == {T0: 8, T1: 6}
        assert successor.manager.group("other") is None
        assert successor.manager.check_owner(GROUP) is None


async def test_an_empty_groups_offsets_expire_after_retention_and_then_the_group_goes() -> None:
    log = MemoryOffsetsLog()
    wall = WallClock()
    c = make_coordinator(log, retention_ms=60_000, wall=wall)
    async with running(c):
        (a,) = await stable_group(c, 1)
        c.offsets.commit_offsets(GROUP, 1, a, None, offsets((T0, 5)))
        await settle()
        wall.ms += 120_000
        assert await c.manager.expire_offsets() == 0  # it has a member
        c.membership.leave_group(GROUP, [(a, None)])
        await settle()
        assert c.manager.group(GROUP).state is GroupState.EMPTY  # type: ignore[union-attr]
        wall.ms += 59_000
        assert await c.manager.expire_offsets() == 0
        wall.ms += 2_000
        assert await c.manager.expire_offsets() == 1
        assert c.manager.group(GROUP) is None
        tombstones = [decode_key(r.key) for r in log.records if r.value is None and r.key]
        assert tombstones == [OffsetCommitKey(GROUP, "orders", 0), GroupMetadataKey(GROUP)]


async def test_a_standalone_commit_expires_from_its_commit_time() -> None:
    wall = WallClock()
    c = make_coordinator(retention_ms=1_000, wall=wall)
    async with running(c):
        stamped = {T0: OffsetCommitValue(1, "", wall.ms)}
        c.offsets.commit_offsets("solo", -1, "", None, stamped)
        await settle()
        wall.ms += 999
        assert await c.manager.expire_offsets() == 0
        wall.ms += 1
        assert await c.manager.expire_offsets() == 1


async def test_delete_groups_refuses_groups_with_members_and_unknown_ones() -> None:
    log = MemoryOffsetsLog()
    c = make_coordinator(log)
    async with running(c):
        await stable_group(c, 1)
        c.offsets.commit_offsets("idle", -1, "", None, offsets((T0, 1)))
        await settle()
        answer = c.offsets.delete_groups([GROUP, "idle", "nope"])
        await settle()
        assert answered(answer)["errors"] == {
            GROUP: NonEmptyGroupError.code,
            "idle": NONE,
            "nope": GroupIdNotFoundError.code,
        }
        assert c.manager.group("idle") is None


async def test_offset_delete_refuses_topics_the_members_subscribe_to() -> None:
    c = make_coordinator()
    async with running(c):
        subscription = (
            b"\x00\x01" + (1).to_bytes(4, "big") + b"\x00\x06orders" + b"\xff\xff\xff\xff"
        )
        member = await member_id_for(c)
        c.join_group(join_request(member, protocols=[("range", subscription)]))
        await settle()
        c.sync_group(GROUP, 1, member, None, None, None, {member: b""})
        await settle()
        other = TopicPartition("audit", 0)
        c.offsets.commit_offsets(GROUP, 1, member, None, offsets((T0, 1), (other, 2)))
        await settle()
        answer = c.offsets.delete_offsets(GROUP, [T0, other])
        await settle()
        assert answered(answer)["errors"] == {T0: GroupSubscribedToTopicError.code, other: NONE}
        assert set(c.offsets.fetch_offsets(GROUP, None)) == {T0}


async def test_group_metadata_is_written_when_the_leaders_assignment_is_stored() -> None:
    log = MemoryOffsetsLog()
    c = make_coordinator(log)
    async with running(c):
        a, b = await stable_group(c, 2)
        (stored,) = [
            decode_group_metadata_value(r.value)
            for r in log.records
            if r.key and r.value and decode_key(r.key) == GroupMetadataKey(GROUP)
        ]
        assert (stored.protocol_type, stored.generation, stored.protocol, stored.leader) == (
            "consumer",
            1,
            "range",
            a,
        )
        assert [(m.member_id, m.assignment, m.subscription) for m in stored.members] == [
            (a, a.encode(), b"meta"),
            (b, b.encode(), b"meta"),
        ]


async def test_metrics_count_groups_by_state_and_report_lag_from_the_high_watermark() -> None:
    log = MemoryOffsetsLog()
    c = make_coordinator(log)
    async with running(c):
        (a,) = await stable_group(c, 1)
        c.offsets.commit_offsets(GROUP, 1, a, None, offsets((T0, 5), (T1, 6)))
        c.offsets.commit_offsets("idle", -1, "", None, offsets((T0, 2)))
        await settle()
        log.high_watermarks[("orders", 0)] = 12
        samples = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in CoordinatorCollector(c.manager, log).collect()
            for s in family.samples
        }
    prefix = "kafka_coordinator_group_groupmetadatamanager_"
    assert samples[(prefix + "numgroups", ())] == 2
    assert samples[(prefix + "numgroupsstable", ())] == 1
    assert samples[(prefix + "numgroupsempty", ())] == 1
    labels = (("consumergroup", GROUP), ("partition", "0"), ("topic", "orders"))
    assert samples[("kafka_consumergroup_current_offset", labels)] == 5
    assert samples[("kafka_consumergroup_lag", labels)] == 7
    no_replica_here = (("consumergroup", GROUP), ("partition", "1"), ("topic", "orders"))
    assert ("kafka_consumergroup_lag", no_replica_here) not in samples


async def test_pipelined_commits_replicated_out_of_order_leave_the_last_one_committed() -> None:
    # librdkafka's async commits: 50 commits of one partition in flight at once. Their
    # writes reach the log in request order, but a later one may be acknowledged first;
    # the committed offset must end at the last commit, never an older one.
    log = MemoryOffsetsLog()
    log.held_acks = []
    c = make_coordinator(log)
    async with running(c):
        answers = [
            c.offsets.commit_offsets(GROUP, -1, "", None, offsets((T0, n))) for n in range(1, 51)
        ]
        await settle()
        written = [
            decode_offset_commit_value(r.value).offset for r in log.records if r.value is not None
        ]
        assert written == list(range(1, 51))  # the log's order is the requests' order
        for ack in reversed(log.held_acks):  # the newest commit is replicated first
            ack.set()
            await settle()
        assert all(answered(a)["errors"] == {T0: NONE} for a in answers)
        assert c.offsets.fetch_offsets(GROUP, [T0])[T0] == OffsetCommitValue(
            50, "", 1_700_000_000_000
        )


async def test_a_txn_commit_naming_no_member_is_taken_by_a_stable_group_as_in_kafka() -> None:
    # TxnOffsetCommit before v3 (KIP-447) has no member id or generation: Kafka takes it
    # in any group state; a plain OffsetCommit so sent to a group with members is not.
    c = make_coordinator()
    async with running(c):
        await stable_group(c, 1)
        legacy = c.offsets.commit_txn_offsets(
            GROUP, TxnProducer(7, 0), -1, "", None, offsets((T0, 4))
        )
        await settle()
        assert answered(legacy)["errors"] == {T0: NONE}
        plain = c.offsets.commit_offsets(GROUP, -1, "", None, offsets((T0, 4)))
        assert answered(plain)["errors"] == {T0: UnknownMemberIdError.code}

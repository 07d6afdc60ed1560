"""JoinGroup / SyncGroup / Heartbeat / LeaveGroup races the state table allows, on a
coordinator over an in-memory offsets log and Trio's mock clock (time moves only when a
test jumps it)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import trio
import trio.testing

from minibroker.coordinator.coordinator import GroupCoordinator
from minibroker.coordinator.group import GroupState
from minibroker.coordinator.rebalance import ZERO_DELAY_ROUND_S
from minibroker.protocol.errors import (
    NONE,
    CoordinatorLoadInProgressError,
    FencedInstanceIdError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidGroupIdError,
    InvalidSessionTimeoutError,
    KafkaError,
    MemberIdRequiredError,
    NotCoordinatorError,
    NotEnoughReplicasError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from minibroker.protocol.offsets_topic import OffsetCommitValue
from minibroker.protocol.topic_partition import TopicPartition
from tests.unit.coordinator.harness import (
    GROUP,
    REBALANCE_MS,
    SESSION_MS,
    MemoryOffsetsLog,
    answered,
    join_request,
    make_coordinator,
    member_id_for,
    running,
    settle,
)


def heartbeat_code(c: GroupCoordinator, generation: int, member_id: str, **kw: str) -> int:
    try:
        c.membership.heartbeat(GROUP, generation, member_id, kw.get("instance_id"))
    except KafkaError as exc:
        return exc.code
    return NONE


def state(c: GroupCoordinator) -> GroupState:
    group = c.manager.group(GROUP)
    assert group is not None
    return group.state


def generation(c: GroupCoordinator) -> int:
    group = c.manager.group(GROUP)
    assert group is not None
    return group.generation_id


async def stable_group(c: GroupCoordinator, n: int) -> list[str]:
    """n members joined and synced; their ids in join order (the first leads)."""
    ids = [await member_id_for(c) for _ in range(n)]
    joins = [c.join_group(join_request(i)) for i in ids]
    await settle()
    leader = answered(joins[0])["leader"]
    gen = answered(joins[0])["generation_id"]
    syncs = [
        c.sync_group(
            GROUP, gen, i, None, None, None, {j: j.encode() for j in ids} if i == leader else {}
        )
        for i in ids
    ]
    await settle()
    assert all(answered(s)["error_code"] == NONE for s in syncs)
    assert state(c) is GroupState.STABLE
    return ids


async def test_a_new_member_first_gets_an_id_then_leads_generation_one() -> None:
    c = make_coordinator()
    async with running(c):
        first = answered(c.join_group(join_request()))
        assert first["error_code"] == MemberIdRequiredError.code
        member = first["member_id"]
        assert member.startswith("client-")
        join = c.join_group(join_request(member))
        await settle()
        body = answered(join)
        assert body["error_code"] == NONE
        assert (body["generation_id"], body["leader"], body["member_id"]) == (1, member, member)
        assert body["members"] == [
            {"member_id": member, "group_instance_id": None, "metadata": b"meta"}
        ]
        assert state(c) is GroupState.COMPLETING_REBALANCE
        sync = c.sync_group(GROUP, 1, member, None, "consumer", "range", {member: b"all"})
        await settle()
        assert answered(sync)["assignment"] == b"all"
        assert state(c) is GroupState.STABLE


async def test_a_rebalance_waits_for_every_known_member_and_heartbeats_tell_them_to_rejoin() -> (
    None
):
    c = make_coordinator()
    async with running(c):
        (a,) = await stable_group(c, 1)
        b = await member_id_for(c)
        join_b = c.join_group(join_request(b))
        await settle()
        assert state(c) is GroupState.PREPARING_REBALANCE
        assert join_b.get() is None  # parked until a rejoins
        assert heartbeat_code(c, 1, a) == RebalanceInProgressError.code
        join_a = c.join_group(join_request(a))
        await settle()
        assert answered(join_a)["generation_id"] == answered(join_b)["generation_id"] == 2
        assert {m["member_id"] for m in answered(join_a)["members"]} == {a, b}
        assert answered(join_b)["members"] == []  # only the leader gets the metadata


async def test_a_member_that_does_not_rejoin_within_the_rebalance_timeout_is_dropped(
    mock_clock: trio.testing.MockClock,
) -> None:
    c = make_coordinator()
    async with running(c):
        a, b = await stable_group(c, 2)
        join_b = c.join_group(join_request(b, protocols=[("range", b"new")]))
        await settle()
        assert state(c) is GroupState.PREPARING_REBALANCE
        for _ in range(REBALANCE_MS // 5000 - 1):  # a heartbeats, but never rejoins
            mock_clock.jump(5)
            await settle()
            assert heartbeat_code(c, 1, a) == RebalanceInProgressError.code
        mock_clock.jump(4.9)
        await settle()
        assert join_b.get() is None
        mock_clock.jump(0.2)
        await settle()
        body = answered(join_b)
        assert (body["generation_id"], body["leader"]) == (2, b)
        assert [m["member_id"] for m in body["members"]] == [b]
        assert heartbeat_code(c, 1, a) == UnknownMemberIdError.code


async def test_a_pending_member_that_never_comes_back_stops_blocking_the_rebalance(
    mock_clock: trio.testing.MockClock,
) -> None:
    c = make_coordinator()
    async with running(c):
        a = await member_id_for(c)
        await member_id_for(c)  # a second client got an id and died
        join_a = c.join_group(join_request(a))
        await settle()
        assert join_a.get() is None
        mock_clock.jump(SESSION_MS / 1000 + 0.1)
        await settle()
        assert answered(join_a)["members"] == [
            {"member_id": a, "group_instance_id": None, "metadata": b"meta"}
        ]


async def test_a_silent_member_expires_after_its_session_timeout_and_the_group_rebalances(
    mock_clock: trio.testing.MockClock,
) -> None:
    c = make_coordinator()
    async with running(c):
        a, b = await stable_group(c, 2)
        for _ in range(4):  # a keeps heartbeating, b says nothing
            mock_clock.jump(SESSION_MS / 1000 / 3)
            await settle()
            if state(c) is GroupState.STABLE:
                assert heartbeat_code(c, 1, a) == NONE
        assert state(c) is GroupState.PREPARING_REBALANCE
        assert heartbeat_code(c, 1, a) == RebalanceInProgressError.code
        assert heartbeat_code(c, 1, b) == UnknownMemberIdError.code


async def test_a_member_parked_in_a_join_outlives_its_session_timeout(
    mock_clock: trio.testing.MockClock,
) -> None:
    c = make_coordinator()
    async with running(c):
        a, b = await stable_group(c, 2)
        join_a = c.join_group(join_request(a))  # b must rejoin before this completes
        await settle()
        for _ in range(3):  # past a's session timeout, inside the rebalance timeout
            mock_clock.jump(SESSION_MS / 1000 / 2)
            await settle()
            assert heartbeat_code(c, 1, b) == RebalanceInProgressError.code
        assert join_a.get() is None
        join_b = c.join_group(join_request(b))
        await settle()
        assert answered(join_a)["error_code"] == answered(join_b)["error_code"] == NONE
        assert len(answered(join_a)["members"]) == 2


async def test_heartbeat_and_sync_with_an_old_generation_answer_illegal_generation() -> None:
    c = make_coordinator()
    async with running(c):
        (a,) = await stable_group(c, 1)
        assert heartbeat_code(c, 0, a) == IllegalGenerationError.code
        sync = c.sync_group(GROUP, 7, a, None, None, None, {})
        assert answered(sync)["error_code"] == IllegalGenerationError.code


async def test_sync_while_preparing_a_rebalance_answers_rebalance_in_progress() -> None:
    c = make_coordinator()
    async with running(c):
        a, b = await stable_group(c, 2)
        c.join_group(join_request(a))
        await settle()
        sync = c.sync_group(GROUP, 1, b, None, None, None, {})
        assert answered(sync)["error_code"] == RebalanceInProgressError.code


async def test_a_join_while_completing_answers_the_parked_syncs_rebalance_in_progress() -> None:
    c = make_coordinator()
    async with running(c):
        a = await member_id_for(c)
        b = await member_id_for(c)
        joins = [c.join_group(join_request(m)) for m in (a, b)]
        await settle()
        follower = b if answered(joins[0])["leader"] == a else a
        parked = c.sync_group(GROUP, 1, follower, None, None, None, {})
        await settle()
        assert parked.get() is None
        newcomer = await member_id_for(c)
        c.join_group(join_request(newcomer))
        await settle()
        assert answered(parked)["error_code"] == RebalanceInProgressError.code
        assert state(c) is GroupState.PREPARING_REBALANCE


async def test_a_repeated_join_while_completing_gets_the_same_generation_back() -> None:
    c = make_coordinator()
    async with running(c):
        a = await member_id_for(c)
        first = c.join_group(join_request(a))
        await settle()
        again = c.join_group(join_request(a))  # its first answer was lost
        assert answered(again)["generation_id"] == answered(first)["generation_id"] == 1
        assert state(c) is GroupState.COMPLETING_REBALANCE


async def test_the_leader_rejoining_a_stable_group_triggers_a_rebalance_a_follower_does_not() -> (
    None
):
    c = make_coordinator()
    async with running(c):
        a, b = await stable_group(c, 2)
        same = c.join_group(join_request(b))
        assert answered(same)["generation_id"] == 1
        assert state(c) is GroupState.STABLE
        c.join_group(join_request(a))
        await settle()
        assert state(c) is GroupState.PREPARING_REBALANCE


async def test_the_last_member_leaving_empties_the_group_at_a_new_generation() -> None:
    c = make_coordinator()
    async with running(c):
        a, b = await stable_group(c, 2)
        results = c.membership.leave_group(GROUP, [(a, None), ("nobody", None)])
        assert [r["error_code"] for r in results] == [NONE, UnknownMemberIdError.code]
        join_b = c.join_group(join_request(b))
        await settle()
        assert answered(join_b)["generation_id"] == 2
        c.membership.leave_group(GROUP, [(b, None)])
        # Empty before any other task runs: the next request (a DescribeGroups) sees it.
        assert state(c) is GroupState.EMPTY
        assert generation(c) == 3
        await settle()
        assert state(c) is GroupState.EMPTY and generation(c) == 3


async def test_a_rejoining_static_member_keeps_its_assignment_and_fences_its_old_id() -> None:
    c = make_coordinator()
    async with running(c):
        old = c.join_group(join_request(instance_id="host-1"))  # static: no id round trip
        await settle()
        old_id = answered(old)["member_id"]
        sync = c.sync_group(GROUP, 1, old_id, "host-1", None, None, {old_id: b"p0"})
        await settle()
        assert answered(sync)["assignment"] == b"p0"
        restarted = c.join_group(join_request(instance_id="host-1"))
        body = answered(restarted)
        new_id = body["member_id"]
        assert new_id != old_id
        assert body["generation_id"] == 1 and state(c) is GroupState.STABLE  # no rebalance
        again = c.sync_group(GROUP, 1, new_id, "host-1", None, None, {})
        assert answered(again)["assignment"] == b"p0"
        assert heartbeat_code(c, 1, old_id, instance_id="host-1") == FencedInstanceIdError.code
        assert heartbeat_code(c, 1, new_id, instance_id="host-1") == NONE
        left = c.membership.leave_group(GROUP, [(old_id, "host-1")])
        assert left[0]["error_code"] == FencedInstanceIdError.code
        left = c.membership.leave_group(GROUP, [("", "host-1")])
        assert left[0]["error_code"] == NONE


async def test_joins_that_do_not_fit_the_group_are_refused() -> None:
    c = make_coordinator()
    async with running(c):
        await stable_group(c, 1)
        other = c.join_group(join_request(protocols=[("roundrobin", b"")]))
        assert answered(other)["error_code"] == InconsistentGroupProtocolError.code
        wrong_type = c.join_group(join_request(protocol_type="connect"))
        assert answered(wrong_type)["error_code"] == InconsistentGroupProtocolError.code
        too_short = c.join_group(join_request(session_ms=10))
        assert answered(too_short)["error_code"] == InvalidSessionTimeoutError.code
        unknown = c.join_group(join_request("made-up-id"))
        assert answered(unknown)["error_code"] == UnknownMemberIdError.code


async def test_a_failed_assignment_write_answers_the_syncs_and_restarts_the_rebalance() -> None:
    log = MemoryOffsetsLog()
    c = make_coordinator(log)
    async with running(c):
        a = await member_id_for(c)
        join = c.join_group(join_request(a))
        await settle()
        assert answered(join)["generation_id"] == 1
        log.fail_with = NotEnoughReplicasError("ISR too small")
        sync = c.sync_group(GROUP, 1, a, None, None, None, {a: b"x"})
        await settle()
        # Kafka maps a failed append to COORDINATOR_NOT_AVAILABLE: the member retries.
        assert answered(sync)["error_code"] == 15
        assert state(c) is GroupState.PREPARING_REBALANCE


async def test_a_member_joining_while_the_assignment_is_written_wins_over_the_write() -> None:
    log = MemoryOffsetsLog()
    c = make_coordinator(log)
    async with running(c):
        a = await member_id_for(c)
        c.join_group(join_request(a))
        await settle()
        log.append_gate = trio.Event()  # the acks=all write is slow
        sync = c.sync_group(GROUP, 1, a, None, None, None, {a: b"x"})
        await settle()
        b = await member_id_for(c)
        c.join_group(join_request(b))
        await settle()
        assert answered(sync)["error_code"] == RebalanceInProgressError.code
        log.append_gate.set()
        await settle()
        assert state(c) is GroupState.PREPARING_REBALANCE  # the late write changed nothing


async def test_requests_for_groups_of_other_or_loading_partitions_are_refused() -> None:
    c = make_coordinator()
    async with running(c, owned=False):
        refused = c.join_group(join_request())
        assert answered(refused)["error_code"] == NotCoordinatorError.code
        c.manager.loading[0] = 3
        loading = c.join_group(join_request())
        assert answered(loading)["error_code"] == CoordinatorLoadInProgressError.code


async def test_losing_leadership_answers_parked_joins_not_coordinator() -> None:
    c = make_coordinator()
    async with running(c):
        (a,) = await stable_group(c, 1)
        b = await member_id_for(c)
        join_b = c.join_group(join_request(b))
        await settle()
        c.manager.resigned(0)
        assert answered(join_b)["error_code"] == NotCoordinatorError.code
        assert heartbeat_code(c, 1, a) == NotCoordinatorError.code


async def test_the_initial_rebalance_delay_waits_again_while_members_keep_arriving(
    mock_clock: trio.testing.MockClock,
) -> None:
    c = make_coordinator(initial_delay_ms=3000)
    async with running(c):
        a = await member_id_for(c)
        join_a = c.join_group(join_request(a))
        await settle()
        mock_clock.jump(2)
        await settle()
        assert join_a.get() is None  # everyone known has joined, still the delay runs
        b = await member_id_for(c)
        join_b = c.join_group(join_request(b))
        await settle()
        mock_clock.jump(1.1)  # the first delay is over, but b arrived during it
        await settle()
        assert join_a.get() is None
        mock_clock.jump(3)
        await settle()
        assert answered(join_a)["generation_id"] == answered(join_b)["generation_id"] == 1
        assert len(answered(join_a)["members"]) == 2


async def test_with_no_initial_delay_the_first_rebalance_gathers_members_in_short_rounds(
    mock_clock: trio.testing.MockClock,
) -> None:
    c = make_coordinator(initial_delay_ms=0, zero_delay_round_s=ZERO_DELAY_ROUND_S)
    async with running(c):
        a = await member_id_for(c)
        join_a = c.join_group(join_request(a))
        await settle()
        assert join_a.get() is None  # one round, even for the first member
        mock_clock.jump(ZERO_DELAY_ROUND_S * 0.9)
        b = await member_id_for(c)
        join_b = c.join_group(join_request(b))
        await settle()
        mock_clock.jump(ZERO_DELAY_ROUND_S * 0.2)
        await settle()
        assert join_a.get() is None  # b came within the round: one more
        third = await member_id_for(c)  # its first join comes in the last round...
        mock_clock.jump(ZERO_DELAY_ROUND_S)
        await settle()
        assert join_a.get() is None  # ...and the rebalance waits for its second
        join_third = c.join_group(join_request(third))
        await settle()
        answers = [answered(join) for join in (join_a, join_b, join_third)]
        assert [answer["generation_id"] for answer in answers] == [1, 1, 1]
        assert len(answers[0]["members"]) == 3


async def test_with_no_initial_delay_a_lone_member_waits_one_round() -> None:
    c = make_coordinator(initial_delay_ms=0, zero_delay_round_s=ZERO_DELAY_ROUND_S)
    async with running(c):
        a = await member_id_for(c)
        with trio.fail_after(ZERO_DELAY_ROUND_S * 20):
            body = await c.join_group(join_request(a)).wait()
        assert body["generation_id"] == 1


async def test_membership_apis_refuse_an_empty_group_id_the_offset_apis_accept_it() -> None:
    c = make_coordinator()
    async with running(c):
        join = c.join_group(replace(join_request(), group_id=""))
        assert answered(join)["error_code"] == InvalidGroupIdError.code
        sync = c.sync_group("", 1, "m", None, None, None, {})
        assert answered(sync)["error_code"] == InvalidGroupIdError.code
        with pytest.raises(InvalidGroupIdError):
            c.membership.heartbeat("", 1, "m", None)
        commit = c.offsets.commit_offsets(
            "", -1, "", None, {TopicPartition("t", 0): OffsetCommitValue(1, "", 0)}
        )
        await settle()
        assert answered(commit)["errors"] == {TopicPartition("t", 0): NONE}

"""Bundled consumers in groups on a 3-broker cluster: partitions shared and moved when
a member leaves or dies, every record consumed, offsets committed and resumed from.

The cluster's brokers let sessions be short (``group.min.session.timeout.ms``) and
start a new group's first rebalance quickly, so a SIGKILLed member's partitions move
in about two seconds instead of Kafka's 45.
"""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import trio

from minibroker.client.admin import Admin
from minibroker.client.consumer import Consumer, ConsumerRecord
from tests.support.broker_process import ROOT, child_env
from tests.support.cluster import LocalCluster
from tests.support.groups import (
    FAST,
    GROUP_PROPERTIES,
    SESSION_MS,
    Reader,
    create_topic,
    describe,
    produce,
    wait_for,
)

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path_factory.mktemp("groups"), properties=GROUP_PROPERTIES) as c:
        yield c


MEMBER_SCRIPT = """
import sys, trio
from minibroker import Consumer

async def main():
    async with Consumer(sys.argv[1], group_id=sys.argv[2], session_timeout_ms=int(sys.argv[4]),
                        heartbeat_interval_ms=200, auto_commit_interval_ms=200,
                        auto_offset_reset="earliest") as consumer:
        consumer.subscribe([sys.argv[3]])
        async for r in consumer:
            print(r.topic, r.partition, r.offset, r.value.decode(), flush=True)

trio.run(main)
"""


async def test_three_members_share_partitions_survive_a_leave_and_a_kill_and_resume(
    cluster: LocalCluster,
) -> None:
    bootstrap, topic, group = cluster.bootstrap, "shared", "sharing"
    await create_topic(bootstrap, topic, 6)

    a = Reader(Consumer(bootstrap, group_id=group, client_id="a", **FAST))
    b = Reader(Consumer(bootstrap, group_id=group, client_id="b", **FAST))
    a.consumer.subscribe([topic])
    b.consumer.subscribe([topic])
    killed_output: list[str] = []
    argv = [sys.executable, "-c", MEMBER_SCRIPT, bootstrap, group, topic, str(SESSION_MS)]
    process = await trio.lowlevel.open_process(
        argv, cwd=ROOT, env=child_env(), stdout=-1, stderr=None
    )
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(a.run)
            await nursery.start(b.run)

            async def read_killed_member() -> None:
                assert process.stdout is not None
                buffer = b""
                async for chunk in process.stdout:
                    buffer += chunk
                    *lines, buffer = buffer.split(b"\n")
                    killed_output.extend(line.decode() for line in lines)

            nursery.start_soon(read_killed_member)

            async def three_members_two_partitions_each() -> bool:
                d = await describe(bootstrap, group)
                return (
                    d.state == "Stable"
                    and len(d.members) == 3
                    and sorted(len(m.assignment) for m in d.members) == [2, 2, 2]
                )

            await wait_for(three_members_two_partitions_each, "3 members with 2 partitions each")
            await produce(bootstrap, topic, 6, 300, 0)
            await wait_for(lambda: killed_output, "the subprocess member to read")
            process.send_signal(signal.SIGKILL)
            b.scope.cancel()  # b leaves cleanly (its Reader closes the consumer)

            async def a_owns_everything() -> bool:
                d = await describe(bootstrap, group)
                return d.state == "Stable" and [len(m.assignment) for m in d.members] == [6]

            await wait_for(a_owns_everything, "the survivor to own all 6 partitions")
            await produce(bootstrap, topic, 6, 300, 300)

            def seen() -> set[int]:
                values = {int(r.value or b"") for r in a.records + b.records}
                return values | {int(line.split()[3]) for line in killed_output}

            await wait_for(lambda: len(seen()) == 600, "every record consumed")
            await a.consumer.commit()
            a.scope.cancel()
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()

    assert seen() == set(range(600))
    async with Admin(bootstrap) as admin:
        committed = await admin.list_group_offsets(group)
        ends = await admin.log_end_offsets([(topic, p) for p in range(6)])
    assert committed == ends == {(topic, p): 100 for p in range(6)}

    # A restarted member resumes at the committed offsets: it reads only what is new.
    await produce(bootstrap, topic, 6, 60, 600)
    restarted = Consumer(bootstrap, group_id=group, **FAST)
    restarted.subscribe([topic])
    got: list[ConsumerRecord] = []
    async with restarted:
        with trio.fail_after(60):
            while len(got) < 60:
                got += await restarted.poll(1_000)
    assert sorted(int(r.value or b"") for r in got) == list(range(600, 660))
    assert min(r.offset for r in got) == 100


async def test_cooperative_members_with_a_pattern_pick_up_a_new_topic(
    cluster: LocalCluster,
) -> None:
    bootstrap, group = cluster.bootstrap, "patterned"
    await create_topic(bootstrap, "pat-a", 4)
    options: dict[str, Any] = {**FAST, "metadata_max_age_ms": 300}
    revoked: list[list[tuple[str, int]]] = []
    readers = [
        Reader(
            Consumer(
                bootstrap,
                group_id=group,
                partition_assignment_strategy="cooperative-sticky",
                **options,
            )
        )
        for _ in range(2)
    ]
    for reader in readers:
        reader.consumer.subscribe(pattern=r"pat-.*", on_partitions_revoked=revoked.append)
    async with trio.open_nursery() as nursery:
        for reader in readers:
            await nursery.start(reader.run)

        async def balanced(total: int) -> bool:
            d = await describe(bootstrap, group)
            counts = sorted(len(m.assignment) for m in d.members)
            return d.state == "Stable" and sum(counts) == total and counts[-1] - counts[0] <= 1

        await wait_for(lambda: balanced(4), "pat-a shared by both members")
        await create_topic(bootstrap, "pat-b", 2)
        await wait_for(lambda: balanced(6), "pat-b added to the group's partitions")
        # The leader's metadata found pat-b; each member's own refresh finds it too.
        await wait_for(
            lambda: all(r.consumer.subscription() == ["pat-a", "pat-b"] for r in readers),
            "pat-b in every member's subscription",
        )
        await produce(bootstrap, "pat-b", 2, 10, 0)
        await wait_for(lambda: sum(len(r.records) for r in readers) == 10, "pat-b's records")
        while_running = list(revoked)
        for reader in readers:
            reader.scope.cancel()
    # Cooperative rebalancing only ever took away what moved: never all 3 of a member's.
    assert all(len(r) < 3 for r in while_running)


async def test_groups_cli_lists_describes_resets_and_deletes(cluster: LocalCluster) -> None:
    from tests.support.cli import run_cli

    bootstrap, topic, group = cluster.bootstrap, "cli-groups", "cli-group"
    await create_topic(bootstrap, topic, 2)
    await produce(bootstrap, topic, 2, 10, 0)

    consumed = await run_cli(
        "consume", topic, "--group", group, "--from-beginning", "--max-messages", "10",
        bootstrap=bootstrap,
    )  # fmt: skip
    assert consumed.returncode == 0, consumed.stderr
    assert sorted(consumed.stdout.split()) == sorted(str(i) for i in range(10))

    listed = await run_cli("groups", "list", "--format", "json", bootstrap=bootstrap)
    assert {"group": group, "state": "Empty", "protocol_type": "consumer"} in json.loads(
        listed.stdout
    )

    described = await run_cli("groups", "describe", group, "--format", "json", bootstrap=bootstrap)
    assert described.returncode == 0, described.stderr
    assert json.loads(described.stdout) == {
        "group": group,
        "state": "Empty",
        "partitions": [
            {"topic": topic, "partition": p, "committed": 5, "log_end": 5, "lag": 0, "member": None}
            for p in range(2)
        ],
    }

    dry = await run_cli(
        "groups", "reset-offsets", "--group", group, "--topic", topic, "--to-earliest",
        "--dry-run", bootstrap=bootstrap,
    )  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    assert [line.split()[-1] for line in dry.stdout.splitlines()[1:]] == ["0", "0"]
    executed = await run_cli(
        "groups", "reset-offsets", "--group", group, "--all-topics", "--shift-by", "-2",
        "--execute", "--format", "json", bootstrap=bootstrap,
    )  # fmt: skip
    assert executed.returncode == 0, executed.stderr
    assert [p["new_offset"] for p in json.loads(executed.stdout)["partitions"]] == [3, 3]
    lagging = json.loads(
        (await run_cli("groups", "describe", group, "--format", "json", bootstrap=bootstrap)).stdout
    )
    assert [(p["committed"], p["lag"]) for p in lagging["partitions"]] == [(3, 2), (3, 2)]

    # A group with a member: described with it, not reset, not deleted.
    member = Consumer(bootstrap, group_id=group, **FAST)
    member.subscribe([topic])
    async with member:
        await member.wait_for_assignment()
        active = json.loads(
            (
                await run_cli("groups", "describe", group, "--format", "json", bootstrap=bootstrap)
            ).stdout
        )
        assert active["state"] == "Stable"
        assert {p["member"] for p in active["partitions"]} == {member._group.member.member_id}
        refused = await run_cli(
            "groups", "reset-offsets", "--group", group, "--all-topics", "--to-latest",
            "--execute", bootstrap=bootstrap,
        )  # fmt: skip
        assert refused.returncode == 1 and "inactive" in refused.stderr
        not_empty = await run_cli("groups", "delete", group, bootstrap=bootstrap)
        assert not_empty.returncode == 1 and "NON_EMPTY_GROUP" in not_empty.stderr

    deleted = await run_cli("groups", "delete", "--group", group, bootstrap=bootstrap)
    assert deleted.returncode == 0, deleted.stderr
    listed = await run_cli("groups", "list", bootstrap=bootstrap)
    assert group not in listed.stdout.split()

"""The group coordinator over the msgpack listener, driven with raw requests on a real
3-broker cluster: two members join one generation, sync their assignments, heartbeat,
commit and fetch offsets; then the coordinator's broker is SIGKILLed and the group's
new coordinator (the new leader of its ``__consumer_offsets`` partition) still has
every committed offset. The coordinating broker's /metrics reports the group by state,
its committed offsets and its lag behind the high watermark.
"""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import trio

from minibroker.command.main import main
from minibroker.net.connection import Connection
from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import (
    NONE,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    MemberIdRequiredError,
    NotCoordinatorError,
)
from minibroker.protocol.offsets_topic import OFFSETS_TOPIC, partition_for
from tests.support.broker import batch
from tests.support.cluster import ProcessCluster
from tests.support.prometheus import promtool_problems

GROUP = "orders-readers"
TOPIC = "orders"
RETRIABLE = {
    CoordinatorNotAvailableError.code,
    CoordinatorLoadInProgressError.code,
    NotCoordinatorError.code,
}
PROPERTIES = {
    "offsets.topic.num.partitions": 6,  # a few partitions: the cluster starts them quickly
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 1000,
}
SESSION_MS = 20_000  # longer than the failover below: members must not expire meanwhile


async def find_coordinator(
    cluster: ProcessCluster, *, avoid: int | None = None, timeout: float = 60
) -> int:
    """The broker id FindCoordinator names for GROUP (retrying while it is being made,
    and until it is not ``avoid``)."""
    with trio.fail_after(timeout):
        while True:
            for broker_id in cluster.live:
                try:
                    answer = await cluster.request(
                        broker_id, ApiKey.FIND_COORDINATOR, {"key": GROUP, "key_type": 0}
                    )
                except Exception:
                    continue
                if answer["error_code"] == NONE and answer["node_id"] != avoid:
                    assert answer["coordinators"][0]["node_id"] == answer["node_id"]
                    assert answer["port"] == cluster.brokers[answer["node_id"]].port
                    node: int = answer["node_id"]
                    return node
                assert answer["error_code"] in RETRIABLE | {NONE}, answer
            await trio.sleep(0.2)


async def retrying(conn: Connection, api_key: ApiKey, body: dict[str, Any]) -> Any:
    """A request repeated while the coordinator answers that it is loading."""
    with trio.fail_after(30):
        while True:
            answer = await conn.request(api_key, body, timeout=20)
            if answer.get("error_code") not in RETRIABLE:
                return answer
            await trio.sleep(0.1)


def join_body(member_id: str, metadata: bytes) -> dict[str, Any]:
    return {
        "group_id": GROUP,
        "session_timeout_ms": SESSION_MS,
        "rebalance_timeout_ms": 10_000,
        "member_id": member_id,
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": metadata}],
    }


def commit_body(generation: int, member_id: str, offsets: dict[int, int]) -> dict[str, Any]:
    return {
        "group_id": GROUP,
        "generation_id": generation,
        "member_id": member_id,
        "topics": [
            {
                "name": TOPIC,
                "partitions": [
                    {"partition_index": p, "committed_offset": o, "committed_metadata": f"m{p}"}
                    for p, o in offsets.items()
                ],
            }
        ],
    }


async def scrape(cluster: ProcessCluster, broker_id: int) -> str:
    (port,) = re.findall(r"metrics on port (\d+)", cluster.output(broker_id))[-1:]

    def get() -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            text: str = r.read().decode()
            return text

    return await trio.to_thread.run_sync(get)


async def wait_for_metric(cluster: ProcessCluster, broker_id: int, line: str) -> None:
    """Scrape until ``line`` appears (the high watermark reaches the coordinator's
    replica a fetch after the write)."""
    with trio.fail_after(20):
        while line not in (await scrape(cluster, broker_id)).splitlines():
            await trio.sleep(0.2)


def fetched(answer: dict[str, Any]) -> dict[int, tuple[int, str | None]]:
    (group,) = answer["groups"]
    assert group["error_code"] == NONE, answer
    return {
        p["partition_index"]: (p["committed_offset"], p["metadata"])
        for t in group["topics"]
        for p in t["partitions"]
        if t["name"] == TOPIC
    }


@pytest.mark.timeout(240)
async def test_two_members_share_a_generation_and_committed_offsets_survive_the_coordinators_death(
    tmp_path: Path, zk_connect: str
) -> None:
    cluster = ProcessCluster(tmp_path, zk_connect, size=3, properties=PROPERTIES)
    for broker in cluster.brokers.values():
        broker.metrics_port = 0
    try:
        await cluster.start_all()
        await cluster.create_topic(TOPIC, 6, 3)
        coordinator = await find_coordinator(cluster)
        port = cluster.brokers[coordinator].port
        async with (
            Connection("127.0.0.1", port, client_id="alice") as alice,
            Connection("127.0.0.1", port, client_id="bob") as bob,
        ):
            # The first join of each member only hands out its member id.
            ids = []
            for conn in (alice, bob):
                first = await retrying(conn, ApiKey.JOIN_GROUP, join_body("", b"sub"))
                assert first["error_code"] == MemberIdRequiredError.code
                assert first["member_id"]
                ids.append(first["member_id"])
            answers: dict[str, Any] = {}

            async def join(conn: Connection, member_id: str, metadata: bytes) -> None:
                answers[member_id] = await conn.request(
                    ApiKey.JOIN_GROUP, join_body(member_id, metadata), timeout=20
                )

            async with trio.open_nursery() as nursery:
                nursery.start_soon(join, alice, ids[0], b"alice-sub")
                nursery.start_soon(join, bob, ids[1], b"bob-sub")
            a, b = answers[ids[0]], answers[ids[1]]
            assert a["error_code"] == b["error_code"] == NONE, answers
            assert a["generation_id"] == b["generation_id"] == 1
            assert a["leader"] == b["leader"]
            assert a["protocol_name"] == "range"
            leader_id = a["leader"]
            leader_answer = answers[leader_id]
            assert {m["member_id"]: m["metadata"] for m in leader_answer["members"]} == {
                ids[0]: b"alice-sub",
                ids[1]: b"bob-sub",
            }
            assert answers[ids[1] if leader_id == ids[0] else ids[0]]["members"] == []
            generation = a["generation_id"]

            syncs: dict[str, Any] = {}

            async def sync(conn: Connection, member_id: str) -> None:
                body = {
                    "group_id": GROUP,
                    "generation_id": generation,
                    "member_id": member_id,
                    "assignments": (
                        [
                            {"member_id": ids[0], "assignment": b"partitions 0-2"},
                            {"member_id": ids[1], "assignment": b"partitions 3-5"},
                        ]
                        if member_id == leader_id
                        else []
                    ),
                }
                syncs[member_id] = await conn.request(ApiKey.SYNC_GROUP, body, timeout=20)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(sync, alice, ids[0])
                nursery.start_soon(sync, bob, ids[1])
            assert syncs[ids[0]]["error_code"] == syncs[ids[1]]["error_code"] == NONE, syncs
            assert syncs[ids[0]]["assignment"] == b"partitions 0-2"
            assert syncs[ids[1]]["assignment"] == b"partitions 3-5"

            for conn, member_id in ((alice, ids[0]), (bob, ids[1])):
                beat = await conn.request(
                    ApiKey.HEARTBEAT,
                    {"group_id": GROUP, "generation_id": generation, "member_id": member_id},
                )
                assert beat["error_code"] == NONE

            described = await alice.request(ApiKey.DESCRIBE_GROUPS, {"groups": [GROUP]})
            (group,) = described["groups"]
            assert group["group_state"] == "Stable"
            assert {m["member_id"] for m in group["members"]} == set(ids)
            assert {m["client_host"] for m in group["members"]} == {"/127.0.0.1"}

            committed = await alice.request(
                ApiKey.OFFSET_COMMIT, commit_body(generation, ids[0], {0: 42, 1: 7})
            )
            codes = [p["error_code"] for t in committed["topics"] for p in t["partitions"]]
            assert codes == [NONE, NONE], committed
            committed = await bob.request(
                ApiKey.OFFSET_COMMIT, commit_body(generation, ids[1], {3: 99})
            )
            assert committed["topics"][0]["partitions"][0]["error_code"] == NONE
            # One group in the older shape, every partition in the batched (v8) shape.
            old_shape = await bob.request(
                ApiKey.OFFSET_FETCH,
                {"group_id": GROUP, "topics": [{"name": TOPIC, "partition_indexes": [0, 2]}]},
            )
            assert old_shape["error_code"] == NONE
            assert {
                p["partition_index"]: p["committed_offset"]
                for p in old_shape["topics"][0]["partitions"]
            } == {0: 42, 2: -1}
            before = fetched(
                await bob.request(
                    ApiKey.OFFSET_FETCH, {"groups": [{"group_id": GROUP, "topics": None}]}
                )
            )
            assert before == {0: (42, "m0"), 1: (7, "m1"), 3: (99, "m3")}

        leader = (await cluster.metadata(TOPIC))["partitions"][0]["leader_id"]
        produced = await cluster.request(
            leader,
            ApiKey.PRODUCE,
            {
                "acks": -1,
                "timeout_ms": 10_000,
                "topics": [
                    {"name": TOPIC, "partitions": [{"index": 0, "records": batch(*[b"r"] * 50)}]}
                ],
            },
        )
        assert produced["topics"][0]["partitions"][0]["error_code"] == NONE
        labels = f'consumergroup="{GROUP}",partition="0",topic="{TOPIC}"'
        await wait_for_metric(cluster, coordinator, f"kafka_consumergroup_lag{{{labels}}} 8.0")
        exposition = await scrape(cluster, coordinator)
        assert promtool_problems(exposition.encode()) == []
        text = exposition.splitlines()
        assert f"kafka_consumergroup_current_offset{{{labels}}} 42.0" in text
        assert "kafka_coordinator_group_groupmetadatamanager_numgroupsstable 1.0" in text

        cluster.kill(coordinator)
        successor = await find_coordinator(cluster, avoid=coordinator)
        port = cluster.brokers[successor].port
        async with Connection("127.0.0.1", port) as conn:
            after = await retrying(
                conn, ApiKey.OFFSET_FETCH, {"groups": [{"group_id": GROUP, "topics": None}]}
            )
            assert fetched(after) == before
            # The group's members and assignments were stored too: the survivors of the
            # generation keep heartbeating the new coordinator.
            beat = await retrying(
                conn,
                ApiKey.HEARTBEAT,
                {"group_id": GROUP, "generation_id": generation, "member_id": ids[0]},
            )
            assert beat["error_code"] == NONE
    finally:
        cluster.close()


@pytest.mark.timeout(180)
async def test_a_group_is_listed_by_its_coordinator_deleted_once_empty_and_dump_log_shows_it(
    tmp_path: Path, zk_connect: str, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = ProcessCluster(tmp_path, zk_connect, size=3, properties=PROPERTIES)
    try:
        await cluster.start_all()
        await cluster.create_topic(TOPIC, 1, 1)  # offsets are committed only for real topics
        coordinator = await find_coordinator(cluster)
        async with Connection("127.0.0.1", cluster.brokers[coordinator].port) as conn:
            member = (await retrying(conn, ApiKey.JOIN_GROUP, join_body("", b"s")))["member_id"]
            joined = await conn.request(ApiKey.JOIN_GROUP, join_body(member, b"s"), timeout=20)
            sync = {
                "group_id": GROUP,
                "generation_id": joined["generation_id"],
                "member_id": member,
                "assignments": [{"member_id": member, "assignment": b"all"}],
            }
            assert (await conn.request(ApiKey.SYNC_GROUP, sync))["error_code"] == NONE
            commit = commit_body(joined["generation_id"], member, {0: 5})
            assert (await conn.request(ApiKey.OFFSET_COMMIT, commit))["topics"][0]["partitions"][0][
                "error_code"
            ] == NONE

            listed = {
                broker_id: [
                    (g["group_id"], g["group_state"])
                    for g in (await cluster.request(broker_id, ApiKey.LIST_GROUPS, {}))["groups"]
                ]
                for broker_id in cluster.live
            }
            assert listed[coordinator] == [(GROUP, "Stable")]
            assert all(groups == [] for b, groups in listed.items() if b != coordinator)

            refused = await conn.request(ApiKey.DELETE_GROUPS, {"groups_names": [GROUP]})
            assert refused["results"][0]["error_code"] == 68  # NON_EMPTY_GROUP
            left = await conn.request(
                ApiKey.LEAVE_GROUP, {"group_id": GROUP, "members": [{"member_id": member}]}
            )
            assert left["members"][0]["error_code"] == NONE
            deleted = await conn.request(ApiKey.DELETE_GROUPS, {"groups_names": [GROUP]})
            assert deleted["results"] == [{"group_id": GROUP, "error_code": NONE}]
            after = await conn.request(
                ApiKey.OFFSET_FETCH, {"groups": [{"group_id": GROUP, "topics": None}]}
            )
            assert after["groups"][0]["topics"] == []

        offsets_partition = partition_for(GROUP, PROPERTIES["offsets.topic.num.partitions"])
        segment = (
            tmp_path
            / f"broker-{coordinator}"
            / "logs"
            / f"{OFFSETS_TOPIC}-{offsets_partition}"
            / "00000000000000000000.log"
        )
        capsys.readouterr()
        main(["dump-log", "--print-data-log", str(segment)])
        printed = capsys.readouterr().out
        assert f"offset_commit::group={GROUP} topic={TOPIC} partition=0 offset=5" in printed
        assert f"group_metadata::group={GROUP} protocol_type=consumer generation=1" in printed
        assert f"offset_commit::group={GROUP} topic={TOPIC} partition=0 <DELETE>" in printed
        assert f"group_metadata::group={GROUP} <DELETE>" in printed
    finally:
        cluster.close()

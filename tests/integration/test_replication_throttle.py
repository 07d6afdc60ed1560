"""The inter-broker replication throttle end to end: a real ZooKeeper and real brokers
(in-process, cluster mode). `reassign --execute --throttle` slows a partition copy to
about the rate and still completes it with every record intact, `--verify` then removes
the topic and broker throttle configs; in-sync followers are never held back; a
malformed throttled-replicas list is refused with a one-line CLI error."""

from __future__ import annotations

import argparse
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from minibroker.broker.broker import Broker
from minibroker.client.admin import Admin
from minibroker.client.cli import reassign
from minibroker.client.producer import Producer
from minibroker.client.reassignment import PartitionMove, parse_reassignment
from minibroker.node.node import Node
from minibroker.protocol.topic_partition import TopicPartition
from tests.integration.test_log_dir_moves import read_all, wait_until
from tests.support.broker import broker_config
from tests.support.cli import run_cli

LEADER_LIST = "leader.replication.throttled.replicas"
FOLLOWER_LIST = "follower.replication.throttled.replicas"
RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
TOPIC_CONFIG, DYNAMIC_BROKER = 1, 2  # config_source of a topic / dynamic broker override

RECORD_BYTES = 64 * 1024
RECORDS = 100  # ~6.5 MB to copy
RATE = 1_300_000  # bytes/s: the copy should take ~5 s
POLL_S = 0.05


@asynccontextmanager
async def cluster(root: Path, zk_connect: str, ids: tuple[int, ...]) -> AsyncIterator[Any]:
    """In-process brokers ``ids`` over one ZooKeeper chroot; cancelled on exit."""
    async with trio.open_nursery() as nursery:
        brokers: dict[int, Broker] = {}
        for broker_id in ids:
            config = broker_config(
                root / f"broker-{broker_id}",
                broker_id=broker_id,
                zookeeper_connect=zk_connect,
                zookeeper_session_timeout_ms=4000,
            )
            brokers[broker_id] = await nursery.start(Node(config).run)
        try:
            yield brokers
        finally:
            nursery.cancel_scope.cancel()


def cli_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    reassign.configure(parser)
    return parser.parse_args(argv)


async def produce(bootstrap: str, topic: str, records: int, acks: str = "1") -> list[bytes]:
    values = [b"%06d" % i + bytes(RECORD_BYTES - 6) for i in range(records)]
    async with Producer(bootstrap, acks=acks, batch_size=256 * 1024) as producer:
        deliveries = [producer.send_nowait(topic, v, partition=0) for v in values]
        await producer.flush()
        for delivery in deliveries:
            await delivery.result()
    return values


def plan_to_broker_2(
    tmp_path: Path, topic: str, bootstrap: str
) -> tuple[list[PartitionMove], tuple[str, ...]]:
    """A plan moving ``topic``-0 to broker 2: its moves and the reassign CLI's common
    arguments (plan file, bootstrap server)."""
    plan = tmp_path / "plan.json"
    move = {"topic": topic, "partition": 0, "replicas": [2]}
    plan.write_text(json.dumps({"version": 1, "partitions": [move]}))
    common = ("--reassignment-json-file", str(plan), "--bootstrap-server", bootstrap)
    return parse_reassignment(plan.read_text()), common


async def replicas_of(admin: Admin, topic: str) -> tuple[int, ...]:
    [described] = await admin.describe_topics([topic])
    return tuple(described.partitions[0].replicas)


async def until_replicas(admin: Admin, topic: str, replicas: tuple[int, ...]) -> None:
    """Metadata follows the controller's UpdateMetadata, which may trail the cancel's
    answer: ask again until it shows ``replicas`` (bounded)."""
    with trio.fail_after(15):
        while await replicas_of(admin, topic) != replicas:
            await trio.sleep(0.05)


async def overrides(admin: Admin, topic: str) -> dict[str, str | None]:
    return {e.name: e.value for e in await admin.describe_topic_config(topic) if e.is_override}


@pytest.mark.timeout(90)
async def test_a_throttled_reassignment_copies_at_about_the_rate_and_verify_removes_the_throttle(
    tmp_path: Path, zk_connect: str, capsys: pytest.CaptureFixture[str]
) -> None:
    async with cluster(tmp_path, zk_connect, (1, 2)) as brokers:
        bootstrap = f"127.0.0.1:{brokers[1].port}"
        async with Admin(bootstrap) as admin:
            await admin.create_topic("copied", assignments={0: [1]})
            values = await produce(bootstrap, "copied", RECORDS)
            log = brokers[1].parts.log_manager.get_log(TopicPartition("copied", 0))
            assert log is not None
            size = log.size
        moves, common = plan_to_broker_2(tmp_path, "copied", bootstrap)

        started = trio.current_time()
        executed = cli_args("--execute", *common, "--throttle", str(RATE))
        assert await reassign._execute(executed, moves) == 0
        out, _err = capsys.readouterr()
        assert f"The inter-broker throttle limit was set to {RATE} B/s" in out
        assert "You must run --verify periodically" in out
        async with Admin(bootstrap) as admin:
            set_ = await overrides(admin, "copied")
            assert (set_[LEADER_LIST], set_[FOLLOWER_LIST]) == ("0:1", "0:2")

            async def moved() -> bool:
                return await replicas_of(admin, "copied") == (2,)

            with trio.fail_after(60):
                while not await moved():
                    await trio.sleep(POLL_S)
        elapsed = trio.current_time() - started
        # Unthrottled this copy takes well under a second here.
        assert elapsed >= 0.6 * size / RATE, (elapsed, size)

        verified = cli_args("--verify", *common, "--timeout", "30000")
        assert await reassign._verify(verified, moves) == 0
        out, _err = capsys.readouterr()
        assert "Clearing topic-level throttles on topic copied" in out
        assert "Clearing broker-level throttles on brokers 1,2" in out
        async with Admin(f"127.0.0.1:{brokers[2].port}") as admin:
            assert not {LEADER_LIST, FOLLOWER_LIST} & set(await overrides(admin, "copied"))
            for broker_id in (1, 2):
                dynamic = [
                    e.name
                    for e in await admin.describe_broker_config(broker_id)
                    if e.source == DYNAMIC_BROKER
                ]
                assert dynamic == []

            async def unlimited() -> bool:
                return all(
                    b.parts.replica_manager.replicas.replication_quotas.leader.unlimited
                    and b.parts.replica_manager.replicas.replication_quotas.follower.unlimited
                    for b in brokers.values()
                )

            await wait_until(unlimited, "both brokers to drop their quotas", timeout=20)
        read = await read_all(f"127.0.0.1:{brokers[2].port}", "copied", len(values))
        assert [offset for offset, _ in read] == list(range(len(values)))
        assert [value for _, value in read] == values


@pytest.mark.timeout(90)
async def test_an_in_sync_follower_is_not_held_to_the_throttle(
    tmp_path: Path, zk_connect: str
) -> None:
    slow = 20_000  # bytes/s: 1.3 MB at this rate would take over a minute
    async with cluster(tmp_path, zk_connect, (1, 2)) as brokers:
        bootstrap = f"127.0.0.1:{brokers[1].port}"
        async with Admin(bootstrap) as admin:
            await admin.create_topic(
                "live",
                assignments={0: [1, 2]},
                config={LEADER_LIST: "*", FOLLOWER_LIST: "*"},
            )
            for broker_id in (1, 2):
                await admin.alter_broker_config(broker_id, dict.fromkeys(RATES, str(slow)))

            async def throttled() -> bool:
                return all(
                    b.parts.replica_manager.replicas.replication_quotas.leader.rate == slow
                    and b.parts.replica_manager.replicas.replication_quotas.follower.rate == slow
                    for b in brokers.values()
                )

            await wait_until(throttled, "both brokers to take the rate", timeout=20)
            with trio.fail_after(20):  # throttled, acks=all would need > 60 s
                await produce(bootstrap, "live", 20, acks="all")
            leader = brokers[1].parts.replica_manager.replicas.partitions[TopicPartition("live", 0)]
            assert leader.isr == {1, 2}
            quota = brokers[1].parts.replica_manager.replicas.replication_quotas.leader
            assert quota.recorded_total >= 20 * RECORD_BYTES  # counted, not held
            exported = dict(
                line.split(" ", 1)
                for line in brokers[1].metrics.render().decode().splitlines()
                if line.startswith("kafka_server_leaderreplication_")
            )
            assert float(exported["kafka_server_leaderreplication_bytes_total"]) == (
                quota.recorded_total
            )
            assert float(exported["kafka_server_leaderreplication_byte_rate"]) > 0


@pytest.mark.timeout(60)
async def test_a_malformed_throttled_replicas_list_is_a_one_line_cli_error(
    tmp_path: Path, zk_connect: str
) -> None:
    async with cluster(tmp_path, zk_connect, (1,)) as brokers:
        bootstrap = f"127.0.0.1:{brokers[1].port}"
        created = await run_cli(
            "topic", "create", "bad", "--config", f"{LEADER_LIST}=0-1", bootstrap=bootstrap
        )
        assert created.returncode == 1
        assert len(created.stderr.strip().splitlines()) == 1
        assert LEADER_LIST in created.stderr and "INVALID_CONFIG" in created.stderr
        assert (
            await run_cli("topic", "create", "ok", "-p", "1", "-r", "1", bootstrap=bootstrap)
        ).returncode == 0
        altered = await run_cli(
            "topic", "alter-config", "ok", "--set", f"{FOLLOWER_LIST}=x", bootstrap=bootstrap
        )
        assert altered.returncode == 1
        assert len(altered.stderr.strip().splitlines()) == 1
        assert FOLLOWER_LIST in altered.stderr and "INVALID_CONFIG" in altered.stderr
        fine = await run_cli(
            "topic", "alter-config", "ok", "--set", f"{FOLLOWER_LIST}=0:1", bootstrap=bootstrap
        )
        assert fine.returncode == 0, fine.stderr


@pytest.mark.timeout(90)
async def test_cancelling_a_throttled_reassignment_removes_the_throttle_unless_preserved(
    tmp_path: Path, zk_connect: str, capsys: pytest.CaptureFixture[str]
) -> None:
    slow = 20_000  # bytes/s: the 6.5 MB copy could not finish during this test
    async with cluster(tmp_path, zk_connect, (1, 2)) as brokers:
        bootstrap = f"127.0.0.1:{brokers[1].port}"
        async with Admin(bootstrap) as admin:
            await admin.create_topic("held", assignments={0: [1]})
        await produce(bootstrap, "held", RECORDS)
        moves, common = plan_to_broker_2(tmp_path, "held", bootstrap)
        async with Admin(bootstrap) as admin:
            for preserve in (True, False):
                executed = cli_args("--execute", *common, "--throttle", str(slow))
                assert await reassign._execute(executed, moves) == 0
                flags = ("--preserve-throttles",) if preserve else ()
                assert await reassign._cancel(cli_args("--cancel", *common, *flags), moves) == 0
                out, _err = capsys.readouterr()
                assert "Reassignment of held-0 cancelled" in out
                await until_replicas(admin, "held", (1,))
                kept = await overrides(admin, "held")
                rates = {
                    e.name
                    for e in await admin.describe_broker_config(1)
                    if e.source == DYNAMIC_BROKER
                }
                if preserve:
                    assert (kept[LEADER_LIST], kept[FOLLOWER_LIST]) == ("0:1", "0:2")
                    assert rates == set(RATES)
                else:
                    assert not {LEADER_LIST, FOLLOWER_LIST} & set(kept)
                    assert rates == set()
                    assert "Clearing topic-level throttles on topic held" in out

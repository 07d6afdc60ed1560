"""Moving replicas between the log dirs of one broker, with a real ZooKeeper and real
brokers (in-process, cluster mode): AlterReplicaLogDirs, DescribeLogDirs, the mover."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from minibroker.broker.broker import Broker
from minibroker.client.admin import Admin, LogDirDescription
from minibroker.client.consumer import Consumer
from minibroker.client.producer import Producer
from minibroker.node.node import Node
from minibroker.protocol.errors import (
    InvalidTopicError,
    LogDirNotFoundError,
    ReplicaNotAvailableError,
)
from minibroker.protocol.topic_partition import TopicPartition
from tests.support.broker import broker_config

POLL_S = 0.1


async def wait_until(condition: Callable[[], Any], what: str, timeout: float = 60) -> None:
    with trio.move_on_after(timeout):
        while not await condition():
            await trio.sleep(POLL_S)
        return
    raise AssertionError(f"timed out waiting for {what}")


@asynccontextmanager
async def one_broker(
    root: Path, zk_connect: str, **props: Any
) -> AsyncIterator[tuple[Broker, list[Path]]]:
    dirs = [root / "logs-0", root / "logs-1"]
    config = broker_config(
        dirs[0],
        log_dirs=",".join(str(d) for d in dirs),
        zookeeper_connect=zk_connect,
        zookeeper_session_timeout_ms=4000,
        **props,
    )
    async with trio.open_nursery() as nursery:
        broker: Broker = await nursery.start(Node(config).run)
        try:
            yield broker, dirs
        finally:
            nursery.cancel_scope.cancel()


def replicas_in(described: list[LogDirDescription], topic: str) -> dict[str, list[bool]]:
    """log dir -> is_future flags of ``topic``'s partition 0 there."""
    return {
        d.path: [r.is_future for r in d.replicas if r.topic == topic and r.partition == 0]
        for d in described
    }


async def moved_to(admin: Admin, topic: str, target: Path) -> bool:
    where = replicas_in(await admin.describe_log_dirs(), topic)
    return where.get(str(target)) == [False] and all(
        flags == [] for path, flags in where.items() if path != str(target)
    )


async def topic_of_400_kb(admin: Admin, broker: Broker, topic: str) -> Path:
    """Create ``topic`` (1 partition) with 400 records of 1 kB; the dir it lives in."""
    await admin.create_topic(topic, 1, 1)
    async with Producer(f"127.0.0.1:{broker.port}", acks=1) as producer:
        for i in range(400):
            producer.send_nowait(topic, bytes(1000) + b"%d" % i, partition=0)
    current = broker.parts.log_manager.get_log(TopicPartition(topic, 0))
    assert current is not None
    return current.dir.parent


async def read_all(bootstrap: str, topic: str, end: int) -> list[tuple[int, bytes | None]]:
    out: list[tuple[int, bytes | None]] = []
    async with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([(topic, 0)])
        await consumer.seek_to_beginning()
        while not out or out[-1][0] < end - 1:
            for record in await consumer.poll(timeout_ms=2000, max_records=5000):
                out.append((record.offset, record.value))
    return out


async def move_while_producing(tmp_path: Path, zk_connect: str, megabytes: int) -> None:
    value_size = 16 * 1024
    preload = megabytes * 1024 * 1024 // value_size
    async with one_broker(tmp_path, zk_connect, log_segment_bytes=32 * 1024 * 1024) as (
        broker,
        dirs,
    ):
        bootstrap = f"127.0.0.1:{broker.port}"
        async with Admin(bootstrap) as admin:
            await admin.create_topic("big", 1, 1)
            source = broker.parts.log_manager.get_log(TopicPartition("big", 0))
            assert source is not None
            target = dirs[1] if source.dir.parent == dirs[0] else dirs[0]
            acked: dict[int, bytes] = {}
            async with Producer(bootstrap, acks=1, linger_ms=5, batch_size=512 * 1024) as producer:
                deliveries = [
                    producer.send_nowait("big", b"%08d" % i + bytes(value_size - 8), partition=0)
                    for i in range(preload)
                ]
                await producer.flush()
                for i, delivery in enumerate(deliveries):
                    acked[(await delivery.result()).offset] = b"%08d" % i
            stop = trio.Event()

            async def keep_producing() -> None:
                n = preload
                async with Producer(bootstrap, acks="all", linger_ms=1) as producer:
                    while not stop.is_set():
                        meta = await producer.send("big", b"%08d" % n, partition=0)
                        acked[meta.offset] = b"%08d" % n
                        n += 1

            async with trio.open_nursery() as nursery:
                nursery.start_soon(keep_producing)
                results = await admin.alter_replica_log_dirs({("big", 0, 1): str(target)})
                assert results == {("big", 0, 1): None}
                await wait_until(lambda: moved_to(admin, "big", target), "the move", 240)
                await trio.sleep(0.5)  # some records land on the new log too
                stop.set()
        assert len(acked) > preload  # the producer did write during the move
        records = await read_all(bootstrap, "big", max(acked) + 1)
        offsets = [offset for offset, _ in records]
        assert offsets == list(range(len(offsets)))  # each offset exactly once, in order
        by_offset = {offset: value[:8] for offset, value in records if value is not None}
        assert all(by_offset[offset] == prefix for offset, prefix in acked.items())
        prefixes = [value[:8] for _, value in records if value is not None]
        assert len(set(prefixes)) == len(prefixes)  # no record written twice
        leftovers = [p.name for p in source.dir.parent.iterdir() if p.name.startswith("big-0")]
        assert leftovers == []


@pytest.mark.timeout(120)
async def test_a_partition_moves_between_dirs_while_a_producer_keeps_writing(
    tmp_path: Path, zk_connect: str
) -> None:
    await move_while_producing(tmp_path, zk_connect, 20)


@pytest.mark.slow
@pytest.mark.timeout(400)
async def test_200_mb_partition_moves_between_dirs_while_a_producer_keeps_writing(
    tmp_path: Path, zk_connect: str
) -> None:
    await move_while_producing(tmp_path, zk_connect, 200)


@pytest.mark.timeout(120)
async def test_alter_replica_log_dirs_validates_paths_and_remembers_dirs_for_new_replicas(
    tmp_path: Path, zk_connect: str
) -> None:
    async with (
        one_broker(tmp_path, zk_connect) as (broker, dirs),
        Admin(f"127.0.0.1:{broker.port}") as admin,
    ):
        results = await admin.alter_replica_log_dirs(
            {
                ("later", 0, 1): str(dirs[1]),  # no replica yet: remembered
                ("later", 1, 1): "relative/dir",
                ("later", 2, 1): str(tmp_path / "not-a-log-dir"),
                ("x" * 249, 0, 1): str(dirs[1]),
            }
        )
        assert isinstance(results[("later", 0, 1)], ReplicaNotAvailableError)
        assert isinstance(results[("later", 1, 1)], LogDirNotFoundError)
        assert isinstance(results[("later", 2, 1)], LogDirNotFoundError)
        assert isinstance(results[("x" * 249, 0, 1)], InvalidTopicError)
        # dirs[0] is where the least-loaded rule would put it; the request wins.
        await admin.create_topic("later", 1, 1)
        where = replicas_in(await admin.describe_log_dirs(), "later")
        assert where == {str(dirs[0]): [], str(dirs[1]): [False]}
        # Already there: nothing to do.
        again = await admin.alter_replica_log_dirs({("later", 0, 1): str(dirs[1])})
        assert again == {("later", 0, 1): None}


@pytest.mark.timeout(120)
async def test_a_new_request_for_another_dir_cancels_the_running_move(
    tmp_path: Path, zk_connect: str
) -> None:
    # 20 kB/s: a 400 kB log takes 20 s to copy, so the first move is surely running.
    async with one_broker(
        tmp_path, zk_connect, replica_alter_log_dirs_io_max_bytes_per_second=20_000
    ) as (broker, dirs):
        bootstrap = f"127.0.0.1:{broker.port}"
        async with Admin(bootstrap) as admin:
            home = await topic_of_400_kb(admin, broker, "slow")
            other = next(d for d in dirs if d != home)
            await admin.alter_replica_log_dirs({("slow", 0, 1): str(other)})
            described = await admin.describe_log_dirs()
            future = [
                r
                for d in described
                if d.path == str(other)
                for r in d.replicas
                if r.topic == "slow" and r.is_future
            ]
            assert len(future) == 1 and future[0].offset_lag > 0
            await admin.alter_replica_log_dirs({("slow", 0, 1): str(home)})
            assert replicas_in(await admin.describe_log_dirs(), "slow") == {
                str(home): [False],
                str(other): [],
            }
            assert not [p for p in other.iterdir() if p.name.startswith("slow-0")]

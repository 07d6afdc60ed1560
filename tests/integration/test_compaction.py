"""Compacted topics on a real broker process: what producers and consumers see."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

from minibroker.client.consumer import Consumer
from minibroker.client.producer import Producer
from minibroker.protocol.errors import InvalidRecordError
from minibroker.storage.log import Log
from minibroker.storage.log_config import LogConfig
from tests.support.cli import run_cli
from tests.support.cluster import ProcessCluster
from tests.support.compaction import (
    CLEANER,
    COMPACTED,
    TOPIC,
    bootstrap,
    partition_dir,
    read_all,
    write_rounds,
)
from tests.unit.storage.cleaning import contents

pytestmark = pytest.mark.timeout(120)

KEYS = 30


async def cleaned(cluster: ProcessCluster) -> None:
    """Wait until the cleaner has written its checkpoint for the partition."""
    checkpoint = partition_dir(cluster).parent / "cleaner-offset-checkpoint"
    with trio.fail_after(60):
        while not (checkpoint.exists() and f"{TOPIC} 0 " in checkpoint.read_text()):
            await trio.sleep(0.1)


async def test_a_compacted_topic_keeps_each_keys_latest_value_and_its_tombstones(
    tmp_path: Path, zk_connect: str
) -> None:
    cluster = ProcessCluster(tmp_path, zk_connect, size=1, properties=CLEANER)
    try:
        await cluster.start_all()
        await cluster.create_topic(TOPIC, 1, 1, COMPACTED)
        latest = await write_rounds(cluster, range(8), KEYS)
        async with Producer(bootstrap(cluster), acks="all") as producer:
            gone = await producer.send(TOPIC, None, key=b"k7", partition=0)
            latest[b"k7"] = (gone.offset, None)
            with pytest.raises(InvalidRecordError):
                await producer.send(TOPIC, b"no key", partition=0)
        end = gone.offset + 1
        await cleaned(cluster)
        records = await read_all(cluster, end)
        assert {r.key: (r.offset, r.value) for r in records} == latest
        assert [r for r in records if r.key == b"k7"][-1].value is None
        assert len(records) < 8 * KEYS
        offsets = [r.offset for r in records]
        assert offsets == sorted(set(offsets))
    finally:
        cluster.close()


async def test_a_consumer_reading_while_the_cleaner_runs_sees_no_older_values(
    tmp_path: Path, zk_connect: str
) -> None:
    cluster = ProcessCluster(tmp_path, zk_connect, size=1, properties=CLEANER)
    try:
        await cluster.start_all()
        await cluster.create_topic(TOPIC, 1, 1, {**COMPACTED, "min.compaction.lag.ms": "6000"})
        at_start = await write_rounds(cluster, range(10), KEYS)
        end = max(offset for offset, _ in at_start.values()) + 1
        seen: list[tuple[int, bytes | None, bytes | None]] = []
        checkpoint = partition_dir(cluster).parent / "cleaner-offset-checkpoint"
        async with Consumer(bootstrap(cluster), auto_offset_reset="earliest") as consumer:
            consumer.assign([(TOPIC, 0)])
            with trio.fail_after(60):
                while len(seen) < 50:  # a prefix, read before anything is cleanable
                    for r in await consumer.poll(timeout_ms=500, max_records=50 - len(seen)):
                        seen.append((r.offset, r.key, r.value))
                assert not checkpoint.exists(), "cleaned before the read began: raise the lag"
                while not checkpoint.exists():  # the cleaning runs under the open read
                    await trio.sleep(0.05)
                while seen[-1][0] < end - 1:
                    for r in await consumer.poll(timeout_ms=500, max_records=1000):
                        seen.append((r.offset, r.key, r.value))
        offsets = [o for o, _, _ in seen]
        assert offsets == sorted(set(offsets))
        last_seen = {key: (offset, value) for offset, key, value in seen}
        assert last_seen == at_start  # every key ends at its value from the start, no older
    finally:
        cluster.close()


@pytest.mark.timeout(180)
async def test_followers_compact_on_their_own_and_keep_the_same_latest_values(
    tmp_path: Path, zk_connect: str
) -> None:
    cluster = ProcessCluster(tmp_path, zk_connect, size=3, properties=CLEANER)
    try:
        await cluster.start_all()
        await cluster.create_topic(TOPIC, 1, 3, COMPACTED)
        latest = await write_rounds(cluster, range(8), KEYS)
        end = max(offset for offset, _ in latest.values()) + 1
        for broker_id in (1, 2, 3):  # every replica cleaned its own copy
            checkpoint = partition_dir(cluster, broker_id).parent / "cleaner-offset-checkpoint"
            with trio.fail_after(60):
                while not (checkpoint.exists() and f"{TOPIC} 0 " in checkpoint.read_text()):
                    await trio.sleep(0.1)
        for broker_id in (1, 2, 3):
            assert await cluster.terminate(broker_id) == 0
        for broker_id in (1, 2, 3):
            log = Log(partition_dir(cluster, broker_id), LogConfig(), had_clean_shutdown=True)
            try:
                records = contents(log)
            finally:
                log.close()
            assert {key: (o, v) for o, key, v in records} == latest, f"broker {broker_id}"
            assert len(records) < end, f"broker {broker_id} did not compact"
    finally:
        cluster.close()


async def test_the_cli_writes_tombstones_and_shows_the_policy_and_dirty_ratios(
    tmp_path: Path, zk_connect: str
) -> None:
    cluster = ProcessCluster(tmp_path, zk_connect, size=1, properties=CLEANER)
    try:
        await cluster.start_all()
        await cluster.create_topic(TOPIC, 1, 1, COMPACTED)
        server = bootstrap(cluster)
        lines = "".join(f"k{i % 5}:value-{i}\n" for i in range(50))
        produced = await run_cli(
            "produce", TOPIC, "--key-separator", ":", bootstrap=server, stdin=lines
        )
        assert produced.returncode == 0, produced.stderr
        gone = await run_cli("produce", TOPIC, "--null-value", bootstrap=server, stdin="k1\nk2\n")
        assert gone.returncode == 0, gone.stderr
        refused = await run_cli("produce", TOPIC, bootstrap=server, stdin="no key\n")
        assert refused.returncode == 1 and "INVALID_RECORD" in refused.stderr.upper()
        records = await read_all(cluster, 52)
        assert {r.key: r.value for r in records}[b"k2"] is None
        described = await run_cli("topic", "describe", TOPIC, "--format", "json", bootstrap=server)
        [topic] = json.loads(described.stdout)
        assert topic["configs"]["cleanup.policy"] == "compact"
        dirs = await run_cli("log-dirs", "describe", bootstrap=server)
        [partition] = json.loads(dirs.stdout)["brokers"][0]["logDirs"][0]["partitions"]
        assert partition["partition"] == f"{TOPIC}-0" and 0.0 <= partition["dirtyRatio"] <= 1.0
        assert {"size", "offsetLag", "isFuture"} <= partition.keys()
    finally:
        cluster.close()

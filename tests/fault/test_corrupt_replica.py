"""One corrupt replica loses nothing (RF 3, acks=all).

- A broker stopped cleanly, 16 bytes flipped in the middle of one of its segments, the
  broker restarted: its scrubber finds the corrupt batch, the replica is taken out of
  the ISR, cut before the corruption and re-fetched from the leader; it comes back in
  sync with every acknowledged record, and its metrics count the corruption.
- The same flip under a running leader: the first read of the corrupt batch answers
  KAFKA_STORAGE_ERROR, leadership moves to a healthy ISR member, consumers read every
  record from it, and the old leader is repaired and rejoins."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import trio

from minibroker.protocol.api import ApiKey
from minibroker.protocol.records import decode_records, iter_headers
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.storage.log import Log
from minibroker.storage.log_config import LogConfig
from minibroker.zk.client import ZkClient
from minibroker.zk.data import KafkaZkClient
from tests.fault.test_durability import TOPIC, read_partition
from tests.support.broker import batch
from tests.support.cluster import ProcessCluster

RECORDS = 3000
PER_BATCH = 20
SEGMENT_BYTES = 64 * 1024
"""Several closed segments for 3,000 records of ~100 bytes: the scrubber's ground."""
METRICS_PORT = re.compile(r"metrics on port (\d+)")
CORRUPT_BATCHES = "kafka_log_logcorruption_corruptbatches_total"
REPAIRS = "kafka_log_logcorruption_repairs_total"


def value(i: int) -> bytes:
    return b"acked-%06d-" % i + b"p" * 80


async def produce_all(cluster: ProcessCluster) -> None:
    """RECORDS values, PER_BATCH a batch, acks=all; each batch retried until acked."""
    for start in range(0, RECORDS, PER_BATCH):
        records = batch(*(value(i) for i in range(start, start + PER_BATCH)))
        for _attempt in range(50):
            metadata = await cluster.metadata(TOPIC)
            leader = metadata["partitions"][0]["leader_id"]
            if leader >= 0:
                body = {
                    "acks": -1,
                    "timeout_ms": 5000,
                    "topics": [{"name": TOPIC, "partitions": [{"index": 0, "records": records}]}],
                }
                response = await cluster.request(leader, ApiKey.PRODUCE, body)
                answer = response["topics"][0]["partitions"][0]
                if answer["error_code"] == 0:
                    assert answer["base_offset"] == start  # no retry ever duplicated a batch
                    break
            await trio.sleep(0.2)
        else:
            raise AssertionError(f"batch at {start} was never acknowledged")


def flip_in_the_middle(segment: Path) -> None:
    """16 bytes inverted inside the records of the batch in the middle of the file."""
    data = segment.read_bytes()
    positions = [p for p, _ in iter_headers(data)]
    target = positions[len(positions) // 2] + 80
    with segment.open("r+b") as f:
        f.seek(target)
        f.write(bytes(b ^ 0xFF for b in data[target : target + 16]))


async def scrape(port: int) -> dict[str, float]:
    """Metric samples of one broker's /metrics: name{labels} -> value."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(b"GET /metrics HTTP/1.0\r\n\r\n")
        chunks = []
        while chunk := await stream.receive_some(65536):
            chunks.append(chunk)
    body = b"".join(chunks).decode().split("\r\n\r\n", 1)[1]
    samples = {}
    for line in body.splitlines():
        if line and not line.startswith("#"):
            name, number = line.rsplit(" ", 1)
            samples[name] = float(number)
    return samples


def summed(samples: dict[str, float], name: str) -> float:
    return sum(v for k, v in samples.items() if k == name or k.startswith(name + "{"))


def cluster_of_three(root: Path, zk_connect: str, *, scrub: bool) -> ProcessCluster:
    return ProcessCluster(
        root,
        zk_connect,
        size=3,
        properties={
            "min.insync.replicas": 2,
            "unclean.leader.election.enable": "false",
            "auto.leader.rebalance.enable": "false",
            "log.segment.bytes": SEGMENT_BYTES,
            "log.scrubber.enable": str(scrub).lower(),
            "log.scrubber.interval.ms": 300,
            "log.scrubber.io.max.bytes.per.second": 64 * 1024 * 1024,
            "replica.high.watermark.checkpoint.interval.ms": 200,
        },
    )


def first_segment(root: Path, broker_id: int) -> Path:
    segments = sorted((root / f"broker-{broker_id}" / "logs" / f"{TOPIC}-0").glob("*.log"))
    assert len(segments) >= 3
    return segments[0]


@pytest.mark.timeout(240)
@pytest.mark.parametrize("stop", ["clean", "kill"])
async def test_a_corrupt_replica_is_repaired_from_the_leader_and_nothing_acked_is_lost(
    tmp_path: Path, zk_connect: str, zk_client: ZkClient, stop: str
) -> None:
    """After a clean stop the scrubber finds the flip (recovery does not look); after
    kill -9 recovery does, and cuts the log below the high watermark it checkpointed."""
    cluster = cluster_of_three(tmp_path, zk_connect, scrub=True)
    data = KafkaZkClient(zk_client)
    tp = TopicPartition(TOPIC, 0)

    async def isr() -> tuple[int, ...]:
        return tuple((await data.read_partition_states([tp]))[tp].isr)

    async def all_in_sync() -> bool:
        return len(await isr()) == 3

    try:
        await cluster.start_all()
        await cluster.create_topic(TOPIC, 1, 3)
        await cluster.wait_until(all_in_sync, "the ISR to fill up")
        await produce_all(cluster)
        leader = (await cluster.metadata(TOPIC))["partitions"][0]["leader_id"]
        if stop == "clean":
            victim = leader  # its leadership moves away in the controlled shutdown
            assert await cluster.terminate(victim) == 0
        else:
            victim = next(b for b in cluster.brokers if b != leader)
            checkpoint = tmp_path / f"broker-{victim}" / "logs" / "replication-offset-checkpoint"

            async def high_watermark_checkpointed() -> bool:
                return checkpoint.exists() and f"{TOPIC} 0 {RECORDS}" in checkpoint.read_text()

            await cluster.wait_until(high_watermark_checkpointed, "the follower's HW checkpoint")
            cluster.kill(victim)
        flip_in_the_middle(first_segment(tmp_path, victim))

        broker = cluster.brokers[victim]
        broker.metrics_port = 0
        await cluster.start(victim)
        ports = METRICS_PORT.findall(cluster.output(victim))
        metrics_port = int(ports[-1])

        async def repaired() -> bool:
            samples = await scrape(metrics_port)
            return summed(samples, CORRUPT_BATCHES) >= 1 and summed(samples, REPAIRS) >= 1

        await cluster.wait_until(repaired, "the victim to find and repair the corruption", 60)

        async def victim_back_in_sync() -> bool:
            return victim in await isr() and len(await isr()) == 3

        await cluster.wait_until(victim_back_in_sync, "the repaired replica to rejoin", 60)
        read = await read_partition(cluster, 0)
        assert [r.value for r in read] == [value(i) for i in range(RECORDS)]
        samples = await scrape(metrics_port)
        assert summed(samples, CORRUPT_BATCHES) == 1

        # The repaired copy itself holds every record: read its files once stopped.
        for broker_id in cluster.brokers:
            assert await cluster.terminate(broker_id) == 0
        replica = Log(tmp_path / f"broker-{victim}" / "logs" / f"{TOPIC}-0", LogConfig())
        try:
            copied = []
            offset = 0
            while offset < replica.log_end_offset:
                chunk = replica.read(offset, 1 << 20)
                copied += [r for r in decode_records(chunk.records) if r.offset >= offset]
                offset = chunk.next_offset
            assert [(r.offset, r.value) for r in copied] == [(i, value(i)) for i in range(RECORDS)]
        finally:
            replica.close()
        assert "corrupt follower replica" in cluster.output(victim)
    finally:
        cluster.close()


@pytest.mark.timeout(240)
async def test_a_leader_that_reads_corruption_in_its_log_hands_over_and_is_repaired(
    tmp_path: Path, zk_connect: str, zk_client: ZkClient
) -> None:
    cluster = cluster_of_three(tmp_path, zk_connect, scrub=False)  # the read finds it
    data = KafkaZkClient(zk_client)
    tp = TopicPartition(TOPIC, 0)

    async def all_in_sync() -> bool:
        return len((await data.read_partition_states([tp]))[tp].isr) == 3

    try:
        await cluster.start_all()
        await cluster.create_topic(TOPIC, 1, 3)
        await cluster.wait_until(all_in_sync, "the ISR to fill up")
        await produce_all(cluster)
        leader = (await cluster.metadata(TOPIC))["partitions"][0]["leader_id"]
        flip_in_the_middle(first_segment(tmp_path, leader))  # under the running leader

        read = await read_partition(cluster, 0)
        assert [r.value for r in read] == [value(i) for i in range(RECORDS)]
        state = (await data.read_partition_states([tp]))[tp]
        assert state.leader not in (leader, -1)
        await cluster.wait_until(all_in_sync, "the repaired old leader to rejoin", 60)
        output = cluster.output(leader)
        assert "corrupt leader replica, found by read" in output
        assert "corrupt replica repaired" in output
    finally:
        cluster.close()

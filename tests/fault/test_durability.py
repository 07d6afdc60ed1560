"""acks=all never loses an acknowledged write, whatever a nemesis does to the brokers.

Three broker processes (RF 3, min.insync.replicas 2, no unclean elections) over a real
ZooKeeper. For a bounded time, producers send unique values with acks=all (retrying a
failed send, and telling the checker so) while a nemesis kills -9, pauses and restarts
brokers - partition leaders and the active controller among them, at most two down at
once. Then everything heals, the ISRs fill up again, and a consumer reads every
partition from its start. ``tests/support/durability.py`` checks the promises: every
acknowledged value at the offset its ack named, no offset with two values, no
duplicate without a retry, offsets only growing.

Each seed fixes the nemesis' choices (not the timing of the processes, so a failure is
re-run with the same seed to see the same kind of history).
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
import trio

from minibroker.net.connection import Connection
from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import KafkaError
from minibroker.protocol.records import decode_records
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.zk.client import ZkClient
from minibroker.zk.data import KafkaZkClient
from tests.support.broker import batch, fetch_body
from tests.support.cluster import ProcessCluster
from tests.support.durability import DurabilityChecker, ReadRecord

TOPIC = "durable"
PARTITIONS = 3
PRODUCERS = 3
RUN_S = 20.0
"""How long producers and the nemesis run per seed (the test's bound, with heal + read)."""
SEND_ATTEMPTS = 6
"""Tries per value before a producer gives up on it (it is then neither acked nor lost)."""
HEAL_TIMEOUT_S = 60.0
SEEDS = [1, 2, 3]


@dataclass(frozen=True)
class Ack:
    """One acknowledged send: which broker answered, and when (``time.monotonic()``)."""

    value: bytes
    partition: int
    broker: int
    sent_at: float
    acked_at: float


class Producer:
    """Sends single-record batches (acks=all unless told), following leaders through
    Metadata; every acknowledgement is also kept in ``acks``."""

    def __init__(
        self,
        cluster: ProcessCluster,
        checker: DurabilityChecker,
        name: str,
        *,
        acks: int = -1,
        topic: str = TOPIC,
    ) -> None:
        self.cluster = cluster
        self.checker = checker
        self.name = name
        self.required_acks = acks
        self.topic = topic
        self.leaders: dict[int, int] = {}
        self.connections: dict[int, Connection] = {}
        self.acknowledged = 0
        self.acks: list[Ack] = []

    async def _leader(self, partition: int) -> int:
        if partition not in self.leaders:
            metadata = await self.cluster.metadata(self.topic)
            self.leaders = {
                p["partition_index"]: p["leader_id"]
                for p in metadata["partitions"]
                if p["leader_id"] >= 0
            }
        return self.leaders[partition]

    async def _connection(self, broker_id: int) -> Connection:
        conn = self.connections.get(broker_id)
        if conn is None or not conn.is_usable:
            conn = Connection(*self.cluster.address(broker_id), connect_timeout=2.0)
            self.connections[broker_id] = conn
            await conn.connect()
        return conn

    async def _send_once(self, partition: int, value: bytes) -> tuple[int, int, float]:
        """(offset, the broker that acknowledged, when the request went out)."""
        leader = await self._leader(partition)
        conn = await self._connection(leader)
        body = {
            "acks": self.required_acks,
            "timeout_ms": 3000,
            "topics": [
                {"name": self.topic, "partitions": [{"index": partition, "records": batch(value)}]}
            ],
        }
        sent_at = time.monotonic()
        response = await conn.request(ApiKey.PRODUCE, body, timeout=5.0)
        answer = response["topics"][0]["partitions"][0]
        if answer["error_code"] != 0:
            raise KafkaError(f"produce error {answer['error_code']}")
        offset: int = answer["base_offset"]
        return offset, leader, sent_at

    async def send(self, partition: int, value: bytes) -> None:
        self.checker.attempted(value)
        for attempt in range(SEND_ATTEMPTS):
            if attempt:
                self.checker.retried(value)
            try:
                offset, broker, sent_at = await self._send_once(partition, value)
            except (KafkaError, AssertionError, KeyError, OSError):
                self.leaders.clear()
                await trio.sleep(0.1 * attempt)
                continue
            self.checker.acknowledged(value, self.topic, partition, offset)
            self.acknowledged += 1
            self.acks.append(Ack(value, partition, broker, sent_at, time.monotonic()))
            return

    async def run(self, seed: int, partitions: Sequence[int] = range(PARTITIONS)) -> None:
        """Send one value after another, round-robin over ``partitions``, until cancelled."""
        sequence = 0
        try:
            while True:
                value = f"s{seed}-{self.name}-{sequence}".encode()
                await self.send(partitions[sequence % len(partitions)], value)
                sequence += 1
        finally:
            with trio.CancelScope(shield=True):
                for conn in self.connections.values():
                    await conn.aclose()


async def nemesis(cluster: ProcessCluster, rng: random.Random, log: list[str]) -> None:
    """Faults at random moments: kill -9 (a leader, the controller, anyone), pause,
    heal; at most two brokers down at a time."""
    killed: set[int] = set()
    paused: set[int] = set()
    while True:
        await trio.sleep(rng.uniform(0.5, 2.0))
        down = killed | paused
        if down and (len(down) == 2 or rng.random() < 0.5):
            victim = rng.choice(sorted(down))
            if victim in paused:
                cluster.resume(victim)
                paused.discard(victim)
                log.append(f"resume {victim}")
            else:
                log.append(f"restart {victim}")
                await cluster.start(victim)
                killed.discard(victim)
            continue
        up = [b for b in cluster.brokers if b not in down]
        kind = rng.choice(["kill-leader", "kill-controller", "kill", "pause"])
        target = rng.choice(up)
        if kind in ("kill-leader", "kill-controller"):
            try:
                metadata = await cluster.metadata(TOPIC)
            except AssertionError:
                metadata = {"partitions": []}
            if kind == "kill-leader":
                leaders = [p["leader_id"] for p in metadata["partitions"]]
                candidates = [b for b in leaders if b in up]
            else:
                try:
                    response = await cluster.request(up[0], ApiKey.METADATA, {"topics": []})
                except KafkaError:  # e.g. it just died on its own: pick anyone instead
                    response = {"controller_id": -1}
                candidates = [b for b in [response["controller_id"]] if b in up]
            target = candidates[0] if candidates else target
        if kind == "pause":
            cluster.pause(target)
            paused.add(target)
        else:
            cluster.kill(target)
            killed.add(target)
        log.append(f"{kind} {target}")


async def heal(cluster: ProcessCluster, data: KafkaZkClient, topic: str = TOPIC) -> None:
    for broker_id, broker in cluster.brokers.items():
        if broker.paused:
            cluster.resume(broker_id)
    for broker_id, broker in cluster.brokers.items():
        if not broker.running:
            await cluster.start(broker_id)
    await wait_in_sync(cluster, data, topic)

    async def all_replicated() -> bool:
        """Every leader's HW has reached its LEO: nothing is left to replicate.

        A leader elected during the faults starts from the HW it had as a follower and
        moves it up only as its followers fetch, so right after the ISR fills up a
        consumer may still see less than was acknowledged, for a moment.
        """
        for partition in range(PARTITIONS):
            hw, leo = await leader_offsets(cluster, partition, topic)
            if hw < 0 or hw != leo:
                return False
        return True

    await cluster.wait_until(all_replicated, "every HW to reach its LEO", timeout=HEAL_TIMEOUT_S)


async def wait_in_sync(cluster: ProcessCluster, data: KafkaZkClient, topic: str = TOPIC) -> None:
    """Wait until every partition of ``topic`` has all three replicas in its ISR."""
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]

    async def all_in_sync() -> bool:
        states = await data.read_partition_states(tps)
        return all(len(states[tp].isr) == 3 for tp in tps)

    await cluster.wait_until(all_in_sync, "every ISR to fill up again", timeout=HEAL_TIMEOUT_S)


async def leader_offsets(
    cluster: ProcessCluster, partition: int, topic: str = TOPIC
) -> tuple[int, int]:
    """(HW, LEO) of the partition's leader, or (-1, -1) while there is no clear leader.

    ListOffsets "latest" answers a consumer (replica_id -1) with the HW and a replica
    with the LEO; no broker has id 0, so asking as replica 0 changes no follower state.
    """
    metadata = await cluster.metadata(topic)
    leader = next(
        (p["leader_id"] for p in metadata["partitions"] if p["partition_index"] == partition),
        -1,
    )
    if leader < 0:
        return -1, -1
    offsets = []
    for replica_id in (-1, 0):
        body = {
            "replica_id": replica_id,
            "topics": [
                {"name": topic, "partitions": [{"partition_index": partition, "timestamp": -1}]}
            ],
        }
        try:
            response = await cluster.request(leader, ApiKey.LIST_OFFSETS, body)
        except KafkaError:
            return -1, -1
        answer = response["topics"][0]["partitions"][0]
        if answer["error_code"] != 0:
            return -1, -1
        offsets.append(answer["offset"])
    return offsets[0], offsets[1]


async def read_partition(
    cluster: ProcessCluster, partition: int, topic: str = TOPIC
) -> list[ReadRecord]:
    """Every record below the HW, read as a consumer from the partition's leader."""
    records: list[ReadRecord] = []
    offset = 0
    for _ in range(100_000):  # bounded: a round reads a batch, ends, or (rarely) retries
        metadata = await cluster.metadata(topic)
        leader = next(
            (p["leader_id"] for p in metadata["partitions"] if p["partition_index"] == partition),
            -1,
        )
        if leader < 0:  # a broker just restarted has not had UpdateMetadata yet: ask again
            await trio.sleep(0.2)
            continue
        body = fetch_body(
            topic, {partition: offset}, min_bytes=0, max_bytes=8 << 20, partition_max_bytes=8 << 20
        )
        try:
            response = await cluster.request(leader, ApiKey.FETCH, body)
        except KafkaError:  # metadata named a leader that is just moving: ask again
            await trio.sleep(0.2)
            continue
        answer = response["topics"][0]["partitions"][0]
        if answer["error_code"] != 0:
            await trio.sleep(0.2)
            continue
        batch_records = [r for r in decode_records(answer["records"]) if r.offset >= offset]
        for r in batch_records:
            assert r.value is not None
            records.append(ReadRecord(topic, partition, r.offset, r.value))
        if not batch_records:
            assert offset >= answer["high_watermark"], answer
            return records
        offset = batch_records[-1].offset + 1
    raise AssertionError("reading the partition did not end")


@pytest.mark.timeout(180)
@pytest.mark.parametrize("seed", SEEDS)
async def test_every_acknowledged_write_survives_kills_pauses_and_restarts(
    tmp_path: Path, zk_connect: str, zk_client: ZkClient, seed: int
) -> None:
    rng = random.Random(seed)
    checker = DurabilityChecker()
    cluster = ProcessCluster(
        tmp_path,
        zk_connect,
        size=3,
        properties={"min.insync.replicas": 2, "unclean.leader.election.enable": "false"},
    )
    history: list[str] = []
    try:
        await cluster.start_all()
        await cluster.create_topic(TOPIC, PARTITIONS, 3)
        data = KafkaZkClient(zk_client)
        await heal(cluster, data)
        producers = [Producer(cluster, checker, f"p{i}") for i in range(PRODUCERS)]
        with trio.move_on_after(RUN_S):
            async with trio.open_nursery() as nursery:
                for producer in producers:
                    nursery.start_soon(producer.run, seed)
                nursery.start_soon(nemesis, cluster, rng, history)
        await heal(cluster, data)
        read: list[ReadRecord] = []
        for partition in range(PARTITIONS):
            read += await read_partition(cluster, partition)
        report = checker.check(read)
        print(f"seed {seed}: {report.summary()}; faults: {', '.join(history)}")
        assert report.ok, f"seed {seed}, faults {history}: {report.summary()}"
        assert checker.acknowledged_count > 0, f"nothing was acknowledged; faults {history}"
    finally:
        cluster.close()

"""Killing the controller's broker stalls acks=all writes only until a new controller
has taken over, not until the leaders notice on their own.

Three broker processes, a topic of six partitions with RF 3 and min.insync.replicas 2.
Every partition has the controller's broker in its ISR, so an acks=all write to any of
them waits for that broker until it leaves the ISR. The leaders would drop it only after
``replica.lag.time.max.ms`` (30 s here, Kafka's default, so that only the controller can
make the difference): the new controller must take the dead broker's replicas offline,
out of the ISR, when it starts.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from minibroker.net.connection import Connection
from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import KafkaError
from minibroker.protocol.records import decode_records
from minibroker.zk.client import ZkClient
from minibroker.zk.data import KafkaZkClient
from minibroker.zk.types import WatchEvent, ZkEvent
from tests.support.broker import batch, fetch_body
from tests.support.cluster import ProcessCluster
from tests.support.durability import DurabilityChecker, ReadRecord

TOPIC = "failover"
PARTITIONS = 6
RESUME_BOUND_S = 2.0
"""Writes to every partition must be acknowledged again this soon after the election."""
PRODUCE_TIMEOUT_MS = 1000
"""The broker answers a stalled acks=all write after this; the writer then retries."""
RETRY_BACKOFF_S = 0.05
ELECTION_TIMEOUT_S = 30.0  # the dead broker's 4 s session has to expire first
RESUME_TIMEOUT_S = 40.0  # long enough to see the stall end the slow way, for the message


class PartitionWriter:
    """Writes unique values to one partition with acks=all, one at a time, following
    its leader through Metadata, and notes when each write was acknowledged."""

    def __init__(self, cluster: ProcessCluster, checker: DurabilityChecker, partition: int):
        self.cluster = cluster
        self.checker = checker
        self.partition = partition
        self.acked_at: list[float] = []
        self.acked = trio.Event()
        """Set (and replaced) on every acknowledgement: waiters learn of the next one."""
        self._leader: int | None = None
        self._connections: dict[int, Connection] = {}

    async def _send_once(self, value: bytes) -> int:
        if self._leader is None:
            metadata = await self.cluster.metadata(TOPIC)
            (state,) = [p for p in metadata["partitions"] if p["partition_index"] == self.partition]
            if state["leader_id"] < 0:
                raise KafkaError("no leader yet")
            self._leader = state["leader_id"]
        conn = self._connections.get(self._leader)
        if conn is None or not conn.is_usable:
            port = self.cluster.brokers[self._leader].port
            conn = Connection("127.0.0.1", port, connect_timeout=1.0)
            self._connections[self._leader] = conn
            await conn.connect()
        body = {
            "acks": -1,
            "timeout_ms": PRODUCE_TIMEOUT_MS,
            "topics": [
                {"name": TOPIC, "partitions": [{"index": self.partition, "records": batch(value)}]}
            ],
        }
        response = await conn.request(ApiKey.PRODUCE, body, timeout=PRODUCE_TIMEOUT_MS / 1000 + 2)
        answer = response["topics"][0]["partitions"][0]
        if answer["error_code"] != 0:
            raise KafkaError(f"produce error {answer['error_code']}")
        offset: int = answer["base_offset"]
        return offset

    async def run(self) -> None:
        try:
            for sequence in range(1_000_000):
                value = f"p{self.partition}-{sequence}".encode()
                self.checker.attempted(value)
                while True:  # until acknowledged; the caller's cancel scope bounds it
                    try:
                        offset = await self._send_once(value)
                    except (KafkaError, OSError, KeyError, ValueError):
                        self.checker.retried(value)
                        self._leader = None
                        await trio.sleep(RETRY_BACKOFF_S)
                        continue
                    break
                self.checker.acknowledged(value, TOPIC, self.partition, offset)
                self.acked_at.append(trio.current_time())
                self.acked.set()
                self.acked = trio.Event()
        finally:
            with trio.CancelScope(shield=True):
                for conn in self._connections.values():
                    await conn.aclose()

    def first_ack_after(self, moment: float) -> float | None:
        return next((t for t in self.acked_at if t > moment), None)


async def wait_for_new_controller(
    events: trio.MemoryReceiveChannel[ZkEvent], data: KafkaZkClient, old: int
) -> float:
    """Follow the /controller znode through its watch (``events`` is the ZooKeeper
    client's subscription); the moment it names a broker other than ``old``."""
    with trio.fail_after(ELECTION_TIMEOUT_S):
        while True:
            current = await data.get_controller_id(watch=True)
            if current is not None and current != old:
                return trio.current_time()
            while not isinstance(event := await events.receive(), WatchEvent):
                pass
            assert event.path.endswith("/controller"), event


async def read_partition(cluster: ProcessCluster, partition: int) -> list[ReadRecord]:
    """Every record of the partition below its high watermark, from its leader."""
    metadata = await cluster.metadata(TOPIC)
    (state,) = [p for p in metadata["partitions"] if p["partition_index"] == partition]
    records: list[ReadRecord] = []
    offset = 0
    for _ in range(100_000):  # a round reads at least one batch or ends
        body = fetch_body(
            TOPIC, {partition: offset}, min_bytes=0, max_bytes=8 << 20, partition_max_bytes=8 << 20
        )
        response = await cluster.request(state["leader_id"], ApiKey.FETCH, body)
        answer = response["topics"][0]["partitions"][0]
        assert answer["error_code"] == 0, answer
        read = [r for r in decode_records(answer["records"]) if r.offset >= offset]
        if not read:
            assert offset >= answer["high_watermark"], answer
            return records
        for r in read:
            assert r.value is not None
            records.append(ReadRecord(TOPIC, partition, r.offset, r.value))
        offset = read[-1].offset + 1
    raise AssertionError("reading the partition did not end")


@pytest.mark.timeout(180)
async def test_acks_all_writes_resume_within_two_seconds_of_the_new_controllers_election(
    tmp_path: Path, zk_connect: str, zk_client: ZkClient
) -> None:
    cluster = ProcessCluster(
        tmp_path,
        zk_connect,
        size=3,
        properties={
            "min.insync.replicas": 2,
            "unclean.leader.election.enable": "false",
            "replica.lag.time.max.ms": 30_000,
        },
    )
    data = KafkaZkClient(zk_client)
    checker = DurabilityChecker()
    writers = [PartitionWriter(cluster, checker, p) for p in range(PARTITIONS)]
    try:
        await cluster.start_all()
        await cluster.create_topic(TOPIC, PARTITIONS, 3)
        async with trio.open_nursery() as nursery:
            for writer in writers:
                nursery.start_soon(writer.run)
            for writer in writers:  # every partition has a leader and takes writes
                with trio.fail_after(30):
                    await writer.acked.wait()
            controller = await data.get_controller_id()
            assert controller is not None
            events = zk_client.subscribe()
            cluster.kill(controller)
            elected_at = await wait_for_new_controller(events, data, controller)
            with trio.move_on_after(RESUME_TIMEOUT_S):
                for writer in writers:
                    while writer.first_ack_after(elected_at) is None:
                        await writer.acked.wait()
            nursery.cancel_scope.cancel()

        stalls = {
            w.partition: (None if (t := w.first_ack_after(elected_at)) is None else t - elected_at)
            for w in writers
        }
        print(f"seconds from the election to each partition's next acknowledged write: {stalls}")
        late = {p: s for p, s in stalls.items() if s is None or s > RESUME_BOUND_S}
        assert not late, (
            f"broker {controller} (the controller) killed; seconds from the new "
            f"controller's election to each partition's next acknowledged write: {stalls}"
        )
        read: list[ReadRecord] = []
        for partition in range(PARTITIONS):
            read += await read_partition(cluster, partition)
        report = checker.check(read)
        assert report.ok, report.summary()
    finally:
        cluster.close()

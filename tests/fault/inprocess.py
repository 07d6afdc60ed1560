"""In-process replicated brokers driven by a test that plays the controller.

``InProcessCluster`` starts brokers (each in its own cancel scope, over its own log dir,
on a port it keeps across restarts), crashes them (``Broker.crash()``: no flush, no
checkpoints, no clean-shutdown marker, as kill -9 would leave the files) and restarts
them over the same dirs. ``elect`` sends LeaderAndIsr to the live replicas and
UpdateMetadata to every live broker, bumping the leader epoch each time, as the
controller would. ``records_of`` reads a replica's whole log from disk.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from minibroker.broker.broker import Broker
from minibroker.broker.replication.partition import Partition
from minibroker.node.node import Node
from minibroker.protocol.api import ApiKey
from minibroker.protocol.records import decode_batch, iter_headers
from minibroker.protocol.topic_partition import TopicPartition
from tests.support.broker import DEFAULT_CONTROLLER_ID, WireClient, broker_config

FAST_REPLICATION = {
    "replica_fetch_backoff_ms": 50,
    "replica_fetch_wait_max_ms": 200,
    "replica_lag_time_max_ms": 10_000,
}


@dataclass
class Member:
    broker_id: int
    log_dir: Path
    properties: dict[str, Any]
    port: int = 0
    broker: Broker | None = None
    scope: trio.CancelScope | None = None


@dataclass
class InProcessCluster:
    nursery: trio.Nursery
    root: Path
    properties: dict[str, Any] = field(default_factory=dict)
    controller_epoch: int = 1
    members: dict[int, Member] = field(default_factory=dict)
    epochs: dict[TopicPartition, int] = field(default_factory=dict)

    def broker(self, broker_id: int) -> Broker:
        broker = self.members[broker_id].broker
        assert broker is not None, f"broker {broker_id} is not running"
        return broker

    def partition(self, broker_id: int, topic: str, index: int = 0) -> Partition:
        manager = self.broker(broker_id).parts.replica_manager
        partition = manager.replicas.get_partition(TopicPartition(topic, index))
        assert partition is not None, f"broker {broker_id} has no replica of {topic}-{index}"
        return partition

    @property
    def live(self) -> list[int]:
        return sorted(i for i, m in self.members.items() if m.broker is not None)

    async def start(self, broker_id: int, **properties: Any) -> Broker:
        member = self.members.get(broker_id)
        if member is None:
            member = Member(broker_id, self.root / f"broker-{broker_id}", properties)
            self.members[broker_id] = member
        values = {**FAST_REPLICATION, **self.properties, **member.properties}
        config = broker_config(member.log_dir, broker_id, **values)
        if member.port:
            config = broker_config(
                member.log_dir,
                broker_id,
                listeners=f"PLAINTEXT://127.0.0.1:{member.port}",
                **values,
            )
        node = Node(config)  # in-process brokers in a ZooKeeper cluster run its controller too
        broker = node.broker
        scope = trio.CancelScope()

        async def run(*, task_status: trio.TaskStatus[Broker] = trio.TASK_STATUS_IGNORED) -> None:
            with scope:
                await node.run(task_status=task_status)

        await self.nursery.start(run)
        member.broker, member.scope, member.port = broker, scope, broker.port
        return broker

    async def crash(self, broker_id: int) -> None:
        """Stop a broker the way kill -9 would leave its files."""
        member = self.members[broker_id]
        assert member.broker is not None
        await member.broker.crash()
        member.broker = None

    async def stop(self, broker_id: int) -> None:
        member = self.members[broker_id]
        assert member.scope is not None and member.broker is not None
        member.scope.cancel()
        await member.broker.stopped.wait()
        member.broker = None

    async def _request(self, broker_id: int, api_key: ApiKey, body: dict[str, Any]) -> Any:
        async with await WireClient.connect(self.broker(broker_id).port) as client:
            return await client.request(api_key, body)

    def _address(self, broker_id: int) -> dict[str, Any]:
        return {"id": broker_id, "host": "127.0.0.1", "port": self.members[broker_id].port}

    async def elect(
        self,
        topic: str,
        *,
        leader: int,
        replicas: Sequence[int],
        isr: Sequence[int] | None = None,
        partition: int = 0,
    ) -> int:
        """Publish a new leadership (epoch + 1) to every live replica; returns the epoch."""
        tp = TopicPartition(topic, partition)
        epoch = self.epochs.get(tp, -1) + 1
        self.epochs[tp] = epoch
        state = {
            "topic_name": topic,
            "partition_index": partition,
            "controller_epoch": self.controller_epoch,
            "leader": leader,
            "leader_epoch": epoch,
            "isr": list(replicas if isr is None else isr),
            "zk_version": epoch,
            "replicas": list(replicas),
        }
        header = {
            "controller_id": DEFAULT_CONTROLLER_ID,
            "controller_epoch": self.controller_epoch,
            "broker_epoch": -1,
        }
        live = self.live
        for broker_id in replicas:
            if broker_id not in live:
                continue
            body = {
                **header,
                "partition_states": [{**state, "is_new": False}],
                "live_leaders": [self._address(leader)],
            }
            response = await self._request(broker_id, ApiKey.LEADER_AND_ISR, body)
            codes = [e["error_code"] for e in response["partition_errors"]]
            assert response["error_code"] == 0 and codes == [0], response
        for broker_id in live:
            body = {
                **header,
                "partition_states": [{**state, "offline_replicas": []}],
                "live_brokers": [self._address(b) for b in live],
            }
            await self._request(broker_id, ApiKey.UPDATE_METADATA, body)
        return epoch

    async def produce(
        self, broker_id: int, topic: str, records: bytes, *, acks: int = -1, partition: int = 0
    ) -> dict[str, Any]:
        body = {
            "acks": acks,
            "timeout_ms": 10_000,
            "topics": [{"name": topic, "partitions": [{"index": partition, "records": records}]}],
        }
        response = await self._request(broker_id, ApiKey.PRODUCE, body)
        answer: dict[str, Any] = response["topics"][0]["partitions"][0]
        return answer

    async def wait_until(self, condition: Any, what: str, timeout: float = 20.0) -> None:
        """Poll ``condition()`` (state owned by other tasks) until true or fail."""
        with trio.move_on_after(timeout):
            while not condition():
                await trio.sleep(0.01)
            return
        raise AssertionError(f"timed out waiting for {what}")


def records_of(partition: Partition) -> list[tuple[int, bytes | None, int]]:
    """(offset, value, leader epoch) of every record in the replica's log, from disk."""
    result: list[tuple[int, bytes | None, int]] = []
    log = partition.log
    for segment in log.segments:
        data = segment.log_path.read_bytes()[: segment.size]
        for pos, header in iter_headers(data):
            _, records = decode_batch(data, pos)
            result.extend(
                (r.offset, r.value, header.partition_leader_epoch)
                for r in records
                if r.offset >= log.log_start_offset
            )
    return result

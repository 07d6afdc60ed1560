"""In-memory stand-ins for the controller's unit tests: a partition-state store that
behaves like ZooKeeper's versioned znodes, a request sender that records, and brokers."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from controller.context import ControllerContext, LeaderAndIsr, TopicPartition
from controller.request_batch import Body, ResponseCallback
from controller.state_machines import WriteResult
from protocol.api import latest_version, validate_request


@dataclass(frozen=True)
class Broker:
    id: int
    host: str = "127.0.0.1"
    port: int = 9092
    rack: str | None = None


@dataclass
class FakeStateStore:
    """Versioned partition-state znodes. ``conflicts_to_inject`` makes the next N
    updates of a partition fail as if a leader had changed the ISR meanwhile (the
    znode's version moves on; ``isr_after_conflict`` is what that leader wrote)."""

    znodes: dict[TopicPartition, LeaderAndIsr] = field(default_factory=dict)
    conflicts_to_inject: dict[TopicPartition, int] = field(default_factory=dict)
    isr_after_conflict: dict[TopicPartition, tuple[int, ...]] = field(default_factory=dict)
    updates: int = 0

    async def create_partition_states(
        self, states: Mapping[TopicPartition, LeaderAndIsr]
    ) -> WriteResult:
        result = WriteResult()
        for tp, lai in states.items():
            if tp in self.znodes:
                result.conflicts.add(tp)
            else:
                self.znodes[tp] = result.written[tp] = replace(lai, zk_version=0)
        return result

    async def update_partition_states(
        self, states: Mapping[TopicPartition, LeaderAndIsr]
    ) -> WriteResult:
        result = WriteResult()
        for tp, lai in states.items():
            self.updates += 1
            current = self.znodes.get(tp)
            if self.conflicts_to_inject.get(tp, 0) > 0 and current is not None:
                self.conflicts_to_inject[tp] -= 1
                isr = self.isr_after_conflict.get(tp, current.isr)
                self.znodes[tp] = replace(current, isr=isr, zk_version=current.zk_version + 1)
                result.conflicts.add(tp)
            elif current is None or current.zk_version != lai.zk_version:
                result.conflicts.add(tp)
            else:
                self.znodes[tp] = result.written[tp] = replace(lai, zk_version=lai.zk_version + 1)
        return result

    async def read_partition_states(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, LeaderAndIsr]:
        return {tp: self.znodes[tp] for tp in partitions if tp in self.znodes}


@dataclass
class Sent:
    broker_id: int
    api_key: int
    body: Body
    on_response: ResponseCallback | None


@dataclass
class RecordingSender:
    sent: list[Sent] = field(default_factory=list)

    def send(
        self, broker_id: int, api_key: int, body: Body, on_response: ResponseCallback | None
    ) -> None:
        # Every request the controller sends must pass the wire schema.
        validate_request(api_key, latest_version(api_key), copy.deepcopy(body))
        self.sent.append(Sent(broker_id, api_key, body, on_response))

    def to(self, broker_id: int, api_key: int) -> list[Body]:
        return [s.body for s in self.sent if s.broker_id == broker_id and s.api_key == api_key]

    def partitions(self, broker_id: int, api_key: int) -> dict[TopicPartition, Body]:
        """Every partition state sent to a broker in requests of one kind, last wins."""
        out: dict[TopicPartition, Body] = {}
        for body in self.to(broker_id, api_key):
            for state in body["partition_states"]:
                out[TopicPartition(state["topic_name"], state["partition_index"])] = state
        return out


def make_context(
    live: Iterable[int], assignments: Mapping[str, Mapping[int, Iterable[int]]], epoch: int = 1
) -> ControllerContext:
    ctx = ControllerContext(epoch=epoch)
    ctx.set_live_brokers(Broker(b, port=9000 + b) for b in live)
    for topic, partitions in assignments.items():
        for partition, replicas in partitions.items():
            ctx.set_assignment(TopicPartition(topic, partition), replicas)
    return ctx

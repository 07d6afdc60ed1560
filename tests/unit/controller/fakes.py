"""In-memory stand-ins for the controller's unit tests: a partition-state store that
behaves like ZooKeeper's versioned znodes, a request sender that records, and brokers."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import trio

from minibroker.controller.context import ControllerContext
from minibroker.controller.request_batch import ResponseCallback
from minibroker.protocol.api import Body, latest_version, validate_request
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.zk.types import ZkConnectionLoss
from minibroker.zk.values import ControllerMovedError, LeaderAndIsr, WriteResult


@dataclass(frozen=True)
class Broker:
    id: int
    host: str = "127.0.0.1"
    port: int = 9092
    rack: str | None = None
    epoch: int = 0
    kafka_address: tuple[str, int] | None = None


@dataclass
class FakeStateStore:
    """Versioned partition-state znodes. ``conflicts_to_inject`` makes the next N
    updates of a partition fail as if a leader had changed the ISR meanwhile (the
    znode's version moves on; ``isr_after_conflict`` is what that leader wrote)."""

    znodes: dict[TopicPartition, LeaderAndIsr] = field(default_factory=dict)
    conflicts_to_inject: dict[TopicPartition, int] = field(default_factory=dict)
    isr_after_conflict: dict[TopicPartition, tuple[int, ...]] = field(default_factory=dict)
    updates: int = 0
    reads: int = 0

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
        self.reads += 1
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


@dataclass
class FakeTopic:
    partitions: dict[int, tuple[int, ...]]
    adding_replicas: dict[int, tuple[int, ...]] = field(default_factory=dict)
    removing_replicas: dict[int, tuple[int, ...]] = field(default_factory=dict)
    topic_id: bytes | None = None


@dataclass
class FakeControllerZk(FakeStateStore):
    """ZooKeeper as the controller sees it (controller.controller_zk.ControllerZk), in
    memory. ``fenced`` makes every write fail as if another controller took over."""

    controller_id: int | None = None
    epoch: int = 0
    brokers: dict[int, Broker] = field(default_factory=dict)
    topics: dict[str, FakeTopic] = field(default_factory=dict)
    unclean_overrides: dict[str, bool] = field(default_factory=dict)
    config_changes: dict[str, str] = field(default_factory=dict)
    """Notification name -> the topic it announces."""
    delete_marks: set[str] = field(default_factory=set)
    reassignments: dict[TopicPartition, tuple[int, ...]] = field(default_factory=dict)
    preferred: set[TopicPartition] = field(default_factory=set)
    isr_notifications: dict[str, set[TopicPartition]] = field(default_factory=dict)
    log_dir_events: dict[str, int] = field(default_factory=dict)
    """Notification name -> the broker whose log dir failed."""
    watched_states: set[TopicPartition] = field(default_factory=set)
    fenced: bool = False
    disconnected: bool = False
    """Reads of /brokers/ids fail as after a dropped connection."""

    def _fence(self) -> None:
        if self.fenced:
            raise ControllerMovedError("fenced by a newer controller")

    def add_topic(self, topic: str, partitions: Mapping[int, Iterable[int]]) -> None:
        self.topics[topic] = FakeTopic({p: tuple(r) for p, r in partitions.items()})

    async def create_partition_states(
        self, states: Mapping[TopicPartition, LeaderAndIsr]
    ) -> WriteResult:
        self._fence()
        return await super().create_partition_states(states)

    async def update_partition_states(
        self, states: Mapping[TopicPartition, LeaderAndIsr]
    ) -> WriteResult:
        self._fence()
        return await super().update_partition_states(states)

    async def get_controller_id(self, *, watch: bool) -> int | None:
        return self.controller_id

    async def register_controller(self, broker_id: int) -> tuple[int, int]:
        if self.controller_id is not None:
            raise ControllerMovedError("taken")
        self.controller_id = broker_id
        self.epoch += 1
        return self.epoch, self.epoch

    async def resign_controller(self, broker_id: int) -> None:
        if self.controller_id == broker_id:
            self.controller_id = None

    async def get_live_brokers(self, *, watch: bool) -> dict[int, Broker]:
        if self.disconnected:
            raise ZkConnectionLoss("connection dropped")
        return dict(self.brokers)

    async def get_all_topics(self, *, watch: bool) -> set[str]:
        return set(self.topics)

    async def get_topic_assignments(
        self, topics: Iterable[str], *, watch: bool
    ) -> dict[str, FakeTopic]:
        return {t: self.topics[t] for t in topics if t in self.topics}

    async def set_topic_assignment(
        self,
        topic: str,
        partitions: Mapping[int, Sequence[int]],
        adding: Mapping[int, Sequence[int]],
        removing: Mapping[int, Sequence[int]],
        *,
        topic_id: bytes | None = None,
    ) -> None:
        self._fence()
        self.topics[topic] = FakeTopic(
            {p: tuple(r) for p, r in partitions.items()},
            {p: tuple(r) for p, r in adding.items() if r},
            {p: tuple(r) for p, r in removing.items() if r},
            topic_id,
        )

    async def set_topic_id(self, topic: str, topic_id: bytes) -> bool:
        self._fence()
        current = self.topics.get(topic)
        if current is None or current.topic_id is not None:
            return False
        current.topic_id = topic_id
        return True

    async def get_unclean_leader_election_overrides(self, topics: Iterable[str]) -> dict[str, bool]:
        return {t: self.unclean_overrides[t] for t in topics if t in self.unclean_overrides}

    async def get_config_changes(self, *, watch: bool) -> list[str]:
        return sorted(self.config_changes)

    async def read_config_change_topics(self, names: Iterable[str]) -> set[str]:
        return {self.config_changes[n] for n in names if n in self.config_changes}

    async def get_topics_to_delete(self, *, watch: bool) -> set[str]:
        return set(self.delete_marks)

    async def delete_topic_deletion_marks(self, topics: Iterable[str]) -> None:
        self.delete_marks -= set(topics)

    async def delete_topic(self, topic: str) -> None:
        self._fence()
        self.topics.pop(topic, None)
        self.delete_marks.discard(topic)
        for tp in [tp for tp in self.znodes if tp.topic == topic]:
            del self.znodes[tp]

    async def get_reassignments(self, *, watch: bool) -> dict[TopicPartition, tuple[int, ...]]:
        return dict(self.reassignments)

    async def set_reassignments(self, targets: Mapping[TopicPartition, Sequence[int]]) -> None:
        self.reassignments = {tp: tuple(r) for tp, r in targets.items()}

    async def watch_partition_state(self, tp: TopicPartition) -> None:
        self.watched_states.add(tp)

    async def get_preferred_replica_election(self, *, watch: bool) -> set[TopicPartition]:
        return set(self.preferred)

    async def delete_preferred_replica_election(self) -> None:
        self.preferred.clear()

    async def get_isr_change_notifications(self, *, watch: bool) -> list[str]:
        return sorted(self.isr_notifications)

    async def read_isr_change_notifications(self, names: Iterable[str]) -> set[TopicPartition]:
        return {tp for n in names for tp in self.isr_notifications.get(n, set())}

    async def delete_isr_change_notifications(self, names: Iterable[str]) -> None:
        for name in names:
            self.isr_notifications.pop(name, None)

    async def get_log_dir_event_notifications(self, *, watch: bool) -> list[str]:
        return sorted(self.log_dir_events)

    async def read_log_dir_event_notifications(self, names: Iterable[str]) -> set[int]:
        return {self.log_dir_events[n] for n in names if n in self.log_dir_events}

    async def delete_log_dir_event_notifications(self, names: Iterable[str]) -> None:
        for name in names:
            self.log_dir_events.pop(name, None)


@dataclass
class RecordingChannel(RecordingSender):
    """The controller's broker channel: records requests to registered brokers only."""

    brokers: set[int] = field(default_factory=set)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()

    def add_broker(self, broker: Any) -> None:
        self.brokers.add(broker.id)

    def remove_broker(self, broker_id: int) -> None:
        self.brokers.discard(broker_id)

    def remove_all(self) -> None:
        self.brokers.clear()

    async def all_answered(self) -> None:
        """Recorded requests count as answered at once."""

    def send(
        self, broker_id: int, api_key: int, body: Body, on_response: ResponseCallback | None
    ) -> None:
        assert broker_id in self.brokers, f"request to unregistered broker {broker_id}"
        super().send(broker_id, api_key, body, on_response)

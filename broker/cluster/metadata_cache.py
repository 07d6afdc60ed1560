"""MetadataCache: this broker's copy of the cluster's brokers and partition states.

Every broker keeps one; the controller fills it with UpdateMetadata (each request
carries the complete list of live brokers and the states of the partitions that
changed). Metadata requests are answered from it without touching ZooKeeper. A
partition whose ``leader`` is -2 (LeaderDuringDelete) is being deleted and leaves the
cache.

The broker also records itself as live at start-up so a standalone broker (no
controller) can answer Metadata with its own address.

Answers follow Kafka's MetadataCache.getPartitionMetadata for Metadata v1+: a partition
whose leader is not a live broker is LEADER_NOT_AVAILABLE; ``replica_nodes`` always
lists every assigned replica and ``isr_nodes`` the ISR as the controller last wrote it,
so a broker that is down still shows (in ``offline_replicas``, with every replica
whose broker is not live) and ``kafka-topics --under-replicated-partitions`` style
questions get a true answer; an unknown topic is UNKNOWN_TOPIC_OR_PARTITION.

Topics being auto-created (broker/cluster/topic_auto_creation.py) are remembered here until
their UpdateMetadata arrives: they answer LEADER_NOT_AVAILABLE, which clients retry,
or the error their creation failed with.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from minibroker.broker.cluster.assignment import validate_topic_name
from minibroker.protocol.errors import (
    NONE,
    InvalidTopicError,
    LeaderNotAvailableError,
    UnknownTopicOrPartitionError,
)
from minibroker.protocol.messages import bodies
from minibroker.protocol.topic_ids import ZERO_TOPIC_ID
from minibroker.protocol.topic_partition import TopicPartition

LEADER_DURING_DELETE = -2
"""Kafka's leader sentinel for a partition whose topic is being deleted."""

NO_LEADER = -1

MAX_MEMOISED_ANSWERS = 256
"""Distinct Metadata questions remembered; a client inventing topic lists cannot grow
the memo without bound."""

AUTO_CREATE_RETRY_S = 1.0
"""How long a finished auto-creation's answer stands before the next Metadata request
tries again: a failure (too few brokers) is reported, not retried per request, and a
topic that existed but never arrived (it was being deleted) gets created afterwards."""


@dataclass(slots=True)
class _AutoCreation:
    """A topic whose creation this broker asked for and that is not in the cache yet."""

    error_code: int  # what Metadata answers for it meanwhile
    finished_at: float | None = None  # None while the CreateTopics call is outstanding


@dataclass(frozen=True, slots=True)
class CachedBroker:
    id: int
    host: str
    port: int
    rack: str | None = None
    kafka_host: str | None = None
    """Host of the broker's Kafka-protocol listener; None when it has none."""
    kafka_port: int = -1


@dataclass(frozen=True, slots=True)
class CachedPartition:
    """One partition's state as the controller last published it."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    controller_epoch: int = 0
    zk_version: int = 0


class MetadataCache:
    def __init__(self, broker_id: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.broker_id = broker_id
        self._clock = clock
        self.controller_id = -1
        self.controller_epoch = -1
        self.cluster_id: str | None = None  # /cluster/id, set on joining a cluster
        self.brokers: dict[int, CachedBroker] = {}
        # Endpoints of leaders named by LeaderAndIsr (followers fetch from them) even
        # before an UpdateMetadata lists them as live.
        self.leader_endpoints: dict[int, CachedBroker] = {}
        self._topics: dict[str, dict[int, CachedPartition]] = {}
        self._answers: dict[tuple[str, ...] | None, bodies.MetadataResponse] = {}
        # Each topic's part of an answer, kept until one of its partitions or the live
        # brokers change: after an UpdateMetadata touching a few partitions, answering
        # for 10,000 rebuilds only their topics (docs/performance.md, "Figures behind
        # the code", says what every partition cost).
        self._topic_entries: dict[str, bodies.MetadataResponseTopic] = {}
        self._auto_created: dict[str, _AutoCreation] = {}
        self._topic_ids: dict[str, bytes] = {}  # KIP-516, from UpdateMetadata
        self._topics_by_id: dict[bytes, str] = {}

    # -- updates -------------------------------------------------------------------------

    def register_self(
        self,
        host: str,
        port: int,
        rack: str | None = None,
        kafka: tuple[str, int] | None = None,
    ) -> None:
        """Make this broker visible before any controller speaks (standalone mode);
        ``kafka`` is its Kafka-protocol listener's advertised address, if any."""
        kafka_host, kafka_port = kafka if kafka is not None else (None, -1)
        self.brokers.setdefault(
            self.broker_id, CachedBroker(self.broker_id, host, port, rack, kafka_host, kafka_port)
        )
        self._answers.clear()
        self._topic_entries.clear()

    def set_cluster_id(self, cluster_id: str | None) -> None:
        self.cluster_id = cluster_id
        self._answers.clear()

    def note_leader(self, broker_id: int, host: str, port: int) -> None:
        self.leader_endpoints[broker_id] = CachedBroker(broker_id, host, port)

    def update(self, request: bodies.UpdateMetadataRequest) -> list[TopicPartition]:
        """Apply an UpdateMetadata request; returns the partitions deleted."""
        self._answers.clear()
        self.controller_id = request["controller_id"]
        self.controller_epoch = request["controller_epoch"]
        brokers = {
            b["id"]: CachedBroker(
                b["id"],
                b["host"],
                b["port"],
                b.get("rack"),
                b.get("kafka_host"),
                b.get("kafka_port", -1),
            )
            for b in request["live_brokers"]
        }
        if brokers != self.brokers:  # leaders and offline replicas read as they did not
            self._topic_entries.clear()
        self.brokers = brokers
        deleted: list[TopicPartition] = []
        for state in request["partition_states"]:
            tp = TopicPartition(state["topic_name"], state["partition_index"])
            if state["leader"] == LEADER_DURING_DELETE:
                self._remove(tp)
                deleted.append(tp)
                continue
            self.put(
                tp,
                CachedPartition(
                    leader=state["leader"],
                    leader_epoch=state["leader_epoch"],
                    isr=tuple(state["isr"]),
                    replicas=tuple(state["replicas"]),
                    offline_replicas=tuple(state.get("offline_replicas", ())),
                    controller_epoch=state["controller_epoch"],
                    zk_version=state["zk_version"],
                ),
            )
        for named in request.get("topic_ids", ()):  # hand-built bodies may lack it
            self._set_topic_id(named["topic_name"], named["topic_id"])
        return deleted

    def _set_topic_id(self, topic: str, topic_id: bytes) -> None:
        if topic not in self._topics or self._topic_ids.get(topic) == topic_id:
            return
        old = self._topic_ids.pop(topic, None)
        if old is not None:
            self._topics_by_id.pop(old, None)
        self._topic_ids[topic] = topic_id
        self._topics_by_id[topic_id] = topic
        self._topic_entries.pop(topic, None)

    def put(self, tp: TopicPartition, info: CachedPartition) -> None:
        self._answers.clear()
        self._topic_entries.pop(tp.topic, None)
        self._topics.setdefault(tp.topic, {})[tp.partition] = info
        self._auto_created.pop(tp.topic, None)

    def start_auto_creation(self, names: Iterable[str]) -> list[str]:
        """Mark the unknown, validly named ``names`` as being created; returns those
        whose creation should be asked for now (not already under way or just tried)."""
        now = self._clock()
        started = []
        for name in names:
            if name in self._topics or name in started:
                continue
            pending = self._auto_created.get(name)
            if pending is not None and (
                pending.finished_at is None or now - pending.finished_at < AUTO_CREATE_RETRY_S
            ):
                continue
            try:
                validate_topic_name(name)
            except InvalidTopicError:
                continue
            self._auto_created[name] = _AutoCreation(LeaderNotAvailableError.code)
            started.append(name)
        if started:
            self._answers.clear()
        return started

    def finish_auto_creation(self, name: str, error_code: int) -> None:
        """The creation of ``name`` answered ``error_code``: NONE keeps answering
        LEADER_NOT_AVAILABLE until the topic's UpdateMetadata arrives, an error is
        answered instead for AUTO_CREATE_RETRY_S."""
        pending = self._auto_created.get(name)
        if pending is None:
            return
        if error_code != NONE:
            pending.error_code = error_code
        pending.finished_at = self._clock()
        self._answers.clear()

    def _remove(self, tp: TopicPartition) -> None:
        self._answers.clear()
        self._topic_entries.pop(tp.topic, None)
        partitions = self._topics.get(tp.topic)
        if partitions is not None:
            partitions.pop(tp.partition, None)
            if not partitions:
                del self._topics[tp.topic]
                topic_id = self._topic_ids.pop(tp.topic, None)
                if topic_id is not None:
                    self._topics_by_id.pop(topic_id, None)

    # -- queries -------------------------------------------------------------------------

    def contains(self, topic: str) -> bool:
        return topic in self._topics

    def topic_id(self, topic: str) -> bytes | None:
        """The topic's id (KIP-516), None if it has none or is unknown."""
        return self._topic_ids.get(topic)

    def topic_named_by(self, topic_id: bytes) -> str | None:
        """The topic whose id is ``topic_id``, None if none here has it."""
        return self._topics_by_id.get(topic_id)

    def partition(self, tp: TopicPartition) -> CachedPartition | None:
        partitions = self._topics.get(tp.topic)
        return None if partitions is None else partitions.get(tp.partition)

    def topics(self) -> list[str]:
        return sorted(self._topics)

    def partition_count(self, topic: str) -> int:
        """Partitions of ``topic`` known here (0: unknown)."""
        return len(self._topics.get(topic, ()))

    def broker(self, broker_id: int) -> CachedBroker | None:
        """A broker's endpoint: live brokers first, then leaders LeaderAndIsr named."""
        return self.brokers.get(broker_id) or self.leader_endpoints.get(broker_id)

    def metadata_response(self, topics: Iterable[str] | None) -> bodies.MetadataResponse:
        """The body of a Metadata response for ``topics`` (None = every topic).

        Answers are memoised until the cache changes: clients ask the same question
        far more often than the controller changes the answer. Callers must not mutate
        the returned body.
        """
        key = None if topics is None else tuple(topics)
        answer = self._answers.get(key)
        if answer is None:
            if len(self._answers) >= MAX_MEMOISED_ANSWERS:
                self._answers.clear()
            answer = self._answers[key] = self._build_response(key)
        return answer

    def _build_response(self, topics: tuple[str, ...] | None) -> bodies.MetadataResponse:
        names = self.topics() if topics is None else list(topics)
        return {
            "throttle_time_ms": 0,
            "brokers": [
                _broker_metadata(b) for b in sorted(self.brokers.values(), key=lambda b: b.id)
            ],
            "cluster_id": self.cluster_id,
            "controller_id": self.controller_id,
            "topics": [self._topic_metadata(name) for name in names],
        }

    def _topic_metadata(self, name: str) -> bodies.MetadataResponseTopic:
        entry = self._topic_entries.get(name)
        if entry is not None:
            return entry
        partitions = self._topics.get(name)
        if partitions is None:
            creating = self._auto_created.get(name)
            if creating is not None:
                return {
                    "error_code": creating.error_code,
                    "name": name,
                    "is_internal": False,
                    "partitions": [],
                }
            try:
                validate_topic_name(name)
            except InvalidTopicError as exc:
                return {
                    "error_code": exc.code,
                    "name": name,
                    "is_internal": False,
                    "partitions": [],
                }
            return {
                "error_code": UnknownTopicOrPartitionError.code,
                "name": name,
                "is_internal": False,
                "partitions": [],
            }
        entry = self._topic_entries[name] = {
            "error_code": NONE,
            "name": name,
            "topic_id": self._topic_ids.get(name, ZERO_TOPIC_ID),
            "is_internal": name.startswith("__"),
            "partitions": [
                self._partition_metadata(index, info) for index, info in sorted(partitions.items())
            ],
        }
        return entry

    def _partition_metadata(
        self, index: int, info: CachedPartition
    ) -> bodies.MetadataResponseTopicPartition:
        live = self.brokers
        usual = info.leader in live and not info.offline_replicas
        if usual and all(r in live for r in info.replicas):  # without the sets below
            return {
                "error_code": NONE,
                "partition_index": index,
                "leader_id": info.leader,
                "leader_epoch": info.leader_epoch,
                "replica_nodes": list(info.replicas),
                "isr_nodes": list(info.isr),
                "offline_replicas": [],
            }
        offline = set(info.offline_replicas) | {r for r in info.replicas if r not in live}
        return {
            "error_code": NONE if info.leader in live else LeaderNotAvailableError.code,
            "partition_index": index,
            "leader_id": info.leader if info.leader in live else NO_LEADER,
            "leader_epoch": info.leader_epoch,
            "replica_nodes": list(info.replicas),
            "isr_nodes": list(info.isr),
            "offline_replicas": [r for r in info.replicas if r in offline],
        }


def _broker_metadata(b: CachedBroker) -> bodies.MetadataResponseBroker:
    """A Metadata broker entry; ``kafka_host`` / ``kafka_port`` (the Kafka-protocol
    listener, which that listener advertises instead of host/port) only when it has one."""
    entry: bodies.MetadataResponseBroker = {
        "node_id": b.id,
        "host": b.host,
        "port": b.port,
        "rack": b.rack,
    }
    if b.kafka_host is not None:
        entry["kafka_host"] = b.kafka_host
        entry["kafka_port"] = b.kafka_port
    return entry

"""Admin for leadership and replica placement: leader elections, partition
reassignments, and log dirs. ``Admin`` (client/admin.py) owns one and delegates these
methods to it.

Elections and reassignments go to the active controller when the metadata names one,
else to any broker; log-dir requests go to the broker they are about. Each method
returns per-partition results: None, or the error that partition got.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from minibroker.client.controller_link import ControllerLink
from minibroker.client.errors import raise_if_error, wire_error
from minibroker.client.metadata import ClusterClient
from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import KafkaError, MinibrokerError, error_for_code
from minibroker.protocol.messages import bodies
from minibroker.protocol.messages.replicas import ELECTION_PREFERRED, ELECTION_UNCLEAN

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Reassignment:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ReplicaLogDir:
    topic: str
    partition: int
    size: int
    offset_lag: int
    is_future: bool
    dirty_ratio: float = -1.0
    """Share of a compacted log not cleaned yet (0..1); -1 for other logs."""


@dataclass(frozen=True, slots=True)
class LogDirDescription:
    broker: int
    path: str
    error: str | None
    replicas: tuple[ReplicaLogDir, ...]
    total_bytes: int
    usable_bytes: int


class ReplicaAdmin:
    """The leadership, reassignment and log-dir requests of ``Admin``, over its
    ``cluster`` client and its link to the controller."""

    def __init__(
        self, cluster: ClusterClient, controller: ControllerLink, request_timeout_ms: int
    ) -> None:
        self.cluster = cluster
        self._controller = controller
        self.request_timeout_ms = request_timeout_ms

    async def elect_leaders(
        self,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        election_type: str = "preferred",
    ) -> dict[TopicPartition, KafkaError | None]:
        """Leader election of ``partitions`` (None: all), per partition None or the
        error it got. ``election_type`` "preferred" moves leadership back to the first
        assigned replica; "unclean" gives a partition without a live leader one, from
        outside the ISR if need be (Kafka's ElectionType.PREFERRED / UNCLEAN)."""
        types = {"preferred": ELECTION_PREFERRED, "unclean": ELECTION_UNCLEAN}
        if election_type.lower() not in types:
            raise MinibrokerError(f"election_type is preferred or unclean, not {election_type!r}")
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions or ():
            by_topic.setdefault(topic, []).append(partition)
        body: bodies.ElectLeadersRequestBody = {
            "election_type": types[election_type.lower()],
            "topic_partitions": None
            if partitions is None
            else [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
            "timeout_ms": self.request_timeout_ms,
        }
        response = await self._controller.request(bodies.ELECT_LEADERS, body)
        raise_if_error(response.get("error_code", 0), "elect leaders")
        results: dict[TopicPartition, KafkaError | None] = {}
        for answered in response.get("replica_election_results", ()):
            for part in answered["partition_result"]:
                code = part.get("error_code", 0)
                results[(answered["topic"], part["partition_id"])] = (
                    wire_error(
                        code,
                        f"{answered['topic']}-{part['partition_id']}",
                        part.get("error_message"),
                    )
                    if code
                    else None
                )
        return results

    async def alter_partition_reassignments(
        self, targets: Mapping[TopicPartition, list[int] | None]
    ) -> dict[TopicPartition, KafkaError | None]:
        """Start moving partitions to ``targets`` replicas (None cancels a move)."""
        by_topic: dict[str, list[bodies.AlterPartitionReassignmentsRequestBodyTopicPartition]] = {}
        for (topic, partition), replicas in targets.items():
            by_topic.setdefault(topic, []).append(
                {
                    "partition_index": partition,
                    "replicas": None if replicas is None else list(replicas),
                }
            )
        body: bodies.AlterPartitionReassignmentsRequestBody = {
            "timeout_ms": self.request_timeout_ms,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
        }
        response = await self._controller.request(bodies.ALTER_PARTITION_REASSIGNMENTS, body)
        raise_if_error(response.get("error_code", 0), "reassignment", response.get("error_message"))
        results: dict[TopicPartition, KafkaError | None] = {}
        for answered in response.get("topics", ()):
            for part in answered["partitions"]:
                code = part.get("error_code", 0)
                results[(answered["name"], part["partition_index"])] = (
                    wire_error(
                        code,
                        f"{answered['name']}-{part['partition_index']}",
                        part.get("error_message"),
                    )
                    if code
                    else None
                )
        return results

    async def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> list[Reassignment]:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions or ():
            by_topic.setdefault(topic, []).append(partition)
        body: bodies.ListPartitionReassignmentsRequestBody = {
            "timeout_ms": self.request_timeout_ms,
            "topics": None
            if partitions is None
            else [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()],
        }
        response = await self._controller.request(bodies.LIST_PARTITION_REASSIGNMENTS, body)
        raise_if_error(
            response.get("error_code", 0), "reassignments", response.get("error_message")
        )
        return [
            Reassignment(
                t["name"],
                p["partition_index"],
                tuple(p["replicas"]),
                tuple(p.get("adding_replicas", ())),
                tuple(p.get("removing_replicas", ())),
            )
            for t in response.get("topics", ())
            for p in t["partitions"]
        ]

    async def describe_log_dirs(
        self, brokers: Iterable[int] | None = None
    ) -> list[LogDirDescription]:
        meta = await self.cluster.refresh()
        out: list[LogDirDescription] = []
        for broker in sorted(brokers if brokers is not None else meta.brokers):
            response: bodies.DescribeLogDirsResponse = await self.cluster.request(
                broker, ApiKey.DESCRIBE_LOG_DIRS, {"topics": None}
            )
            raise_if_error(response.get("error_code", 0), f"broker {broker}")
            for d in response.get("results", ()):
                code = d.get("error_code", 0)
                replicas = tuple(
                    ReplicaLogDir(
                        t["name"],
                        p["partition_index"],
                        p.get("partition_size", 0),
                        p.get("offset_lag", 0),
                        p.get("is_future", False),
                        p.get("dirty_ratio", -1.0),
                    )
                    for t in d.get("topics", ())
                    for p in t["partitions"]
                )
                out.append(
                    LogDirDescription(
                        broker,
                        d["log_dir"],
                        error_for_code(code).name if code else None,
                        replicas,
                        d.get("total_bytes", -1),
                        d.get("usable_bytes", -1),
                    )
                )
        return out

    async def alter_replica_log_dirs(
        self, moves: Mapping[tuple[str, int, int], str]
    ) -> dict[tuple[str, int, int], KafkaError | None]:
        """Move replicas between the log dirs of their broker: {(topic, part, broker): dir}."""
        by_broker: dict[int, dict[str, dict[str, list[int]]]] = {}
        for (topic, partition, broker), path in moves.items():
            by_broker.setdefault(broker, {}).setdefault(path, {}).setdefault(topic, []).append(
                partition
            )
        await self.cluster.refresh()
        results: dict[tuple[str, int, int], KafkaError | None] = {}
        for broker, dirs in by_broker.items():
            if broker not in self.cluster.metadata.brokers:
                raise MinibrokerError(f"broker {broker} is not in the cluster")
            body: bodies.AlterReplicaLogDirsRequestBody = {
                "dirs": [
                    {
                        "path": path,
                        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
                    }
                    for path, topics in dirs.items()
                ]
            }
            altered: bodies.AlterReplicaLogDirsResponse = await self.cluster.request(
                broker, ApiKey.ALTER_REPLICA_LOG_DIRS, body
            )
            for moved in altered.get("results", ()):
                for part in moved["partitions"]:
                    code = part.get("error_code", 0)
                    key = (moved["topic_name"], part["partition_index"], broker)
                    results[key] = (
                        wire_error(code, f"{key[0]}-{key[1]} on broker {broker}") if code else None
                    )
        return results

"""Admin: topics, cluster, configs, leader elections, reassignments, log dirs and
consumer groups. Topics, the cluster and configs are served here; the rest by the
collaborators an Admin owns, each built with what it needs, and named by one-line
delegating methods: ``GroupAdmin`` (client/admin_groups.py), ``ReplicaAdmin``
(leadership, reassignments and log dirs: client/admin_replicas.py), ``PartitionAdmin``
(adding partitions, deleting records: client/admin_partitions.py); the way to the
controller is a ``ControllerLink`` (client/controller_link.py).

Every method sends one kind of request and returns plain dataclasses. Requests that
change cluster state (CreateTopics, DeleteTopics, ElectLeaders, partition
reassignments) go to the active controller when the metadata names one, else to any
broker (which forwards the decision through ZooKeeper); log-dir requests go to the
broker they are about. Per-resource errors are raised as their Kafka error class with
the resource in the message, except where a method returns per-partition results
(``elect_leaders``, ``alter_partition_reassignments``, ``alter_replica_log_dirs``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Unpack

import trio

from minibroker.client.admin_groups import (
    GroupAdmin,
    GroupDescription,
    GroupListing,
    PartitionLag,
)
from minibroker.client.admin_partitions import PartitionAdmin
from minibroker.client.admin_replicas import (
    LogDirDescription,
    Reassignment,
    ReplicaAdmin,
    ReplicaLogDir,
)
from minibroker.client.background import BackgroundTasks
from minibroker.client.controller_link import ControllerLink
from minibroker.client.errors import raise_if_error, wire_error
from minibroker.client.metadata import BrokerNode, ClusterClient, ClusterMetadata, PartitionInfo
from minibroker.client.security import SecurityOptions, client_security
from minibroker.net.security import ClientSecurity
from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import KafkaError
from minibroker.protocol.messages import bodies
from minibroker.protocol.messages.cluster import RESOURCE_BROKER, RESOURCE_TOPIC

TopicPartition = tuple[str, int]
CREATE_WAIT_S = 30.0  # how long create_topic waits for every new partition to get a leader
TOPIC_CONFIG_SOURCE = 1  # Kafka's DescribeConfigs config_source for a topic override
DYNAMIC_BROKER_CONFIG_SOURCE = 2  # config_source of a dynamic override of one broker
DYNAMIC_SOURCES = frozenset({TOPIC_CONFIG_SOURCE, DYNAMIC_BROKER_CONFIG_SOURCE, 3})
"""Sources of a value set through the config APIs (3: every broker's dynamic default)."""
BROKER_WAIT_MARGIN_MS = 5_000
"""A broker's own wait (DeleteTopics timeout_ms) ends this long before our request
timeout, so its answer - not a dropped connection and a retry elsewhere - reports a
deletion that cannot finish."""


@dataclass(frozen=True, slots=True)
class TopicDescription:
    name: str
    partitions: tuple[PartitionInfo, ...]
    is_internal: bool = False


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerNode, ...]


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: int  # Kafka's config_source: 1 topic, 2 dynamic broker, 3 dynamic default ...
    read_only: bool = False
    is_sensitive: bool = False

    @property
    def is_override(self) -> bool:
        return self.source == TOPIC_CONFIG_SOURCE

    @property
    def is_dynamic(self) -> bool:
        """Set through the config APIs (a topic's or a broker's dynamic override)."""
        return self.source in DYNAMIC_SOURCES


@dataclass(frozen=True, slots=True)
class ConfigOp:
    """One IncrementalAlterConfigs edit: ``operation`` is OP_SET, OP_DELETE, OP_APPEND
    or OP_SUBTRACT (protocol/messages/admin.py)."""

    name: str
    operation: int
    value: str | None = None


class Admin:
    """``async with Admin("127.0.0.1:9092") as admin: await admin.create_topic(...)``."""

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        request_timeout_ms: float = 30_000,
        client_id: str = "minibroker-admin",
        config: Mapping[str, str] | ClientSecurity | None = None,
        **security: Unpack[SecurityOptions],
    ) -> None:
        """``config`` / ``security``: TLS and SASL, as Kafka's client properties
        (client/security.py)."""
        self.request_timeout_ms = int(request_timeout_ms)
        self.cluster = ClusterClient(
            bootstrap_servers,
            security=client_security(config, **security),
            client_id=client_id,
            request_timeout_s=request_timeout_ms / 1000,
        )
        self._tasks = BackgroundTasks()
        self._controller = ControllerLink(self.cluster)
        self._groups = GroupAdmin(self.cluster, self.request_timeout_ms)
        self._replicas = ReplicaAdmin(self.cluster, self._controller, self.request_timeout_ms)
        self._partitions = PartitionAdmin(self.cluster, self._controller, self.request_timeout_ms)

    async def __aenter__(self) -> Admin:
        nursery = await self._tasks.open()
        try:
            await nursery.start(self.cluster.run)
        except BaseException:
            await self._tasks.close()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        await self._tasks.close()
        return None

    # --- topics ----------------------------------------------------------------------

    async def create_topic(
        self,
        name: str,
        partitions: int = -1,
        replication_factor: int = -1,
        *,
        config: Mapping[str, str] | None = None,
        assignments: Mapping[int, list[int]] | None = None,
        validate_only: bool = False,
        wait: bool = True,
    ) -> None:
        """Create a topic (-1 = broker default); waits until every partition has a leader."""
        topic: bodies.CreateTopicsRequestBodyTopic = {
            "name": name,
            "num_partitions": -1 if assignments else partitions,
            "replication_factor": -1 if assignments else replication_factor,
            "assignments": [
                {"partition_index": p, "broker_ids": list(r)}
                for p, r in sorted((assignments or {}).items())
            ],
            "configs": [{"name": k, "value": v} for k, v in (config or {}).items()],
        }
        body: bodies.CreateTopicsRequestBody = {
            "topics": [topic],
            "timeout_ms": self.request_timeout_ms,
            "validate_only": validate_only,
        }
        response = await self._controller.request(bodies.CREATE_TOPICS, body)
        for result in response.get("topics", ()):
            raise_if_error(
                result["error_code"], f"topic {result['name']!r}", result.get("error_message")
            )
        if wait and not validate_only:
            await self.wait_for_leaders(name)

    async def wait_for_leaders(self, name: str, timeout_s: float = CREATE_WAIT_S) -> None:
        """Until the topic exists and each of its partitions has a leader."""
        with trio.move_on_after(timeout_s):
            while True:
                meta = await self.cluster.refresh([name])
                info = meta.topics.get(name)
                if (
                    info is not None
                    and info.error_code == 0
                    and info.partitions
                    and all(p.leader >= 0 for p in info.partitions)
                ):
                    return
                await trio.sleep(0.05)
        raise wire_error(5, f"topic {name!r}", f"no leader after {timeout_s:g} s")

    async def delete_topic(self, name: str) -> None:
        """Delete a topic and return once it is gone. RequestTimedOutError means it is
        marked for deletion and finishes when every replica's broker can delete it."""
        wait_ms = max(self.request_timeout_ms - BROKER_WAIT_MARGIN_MS, 0)
        body: bodies.DeleteTopicsRequestBody = {"topic_names": [name], "timeout_ms": wait_ms}
        response = await self._controller.request(bodies.DELETE_TOPICS, body)
        for result in response.get("topics", ()):
            raise_if_error(
                result["error_code"], f"topic {result['name']!r}", result.get("error_message")
            )
        self.cluster.topics.discard(name)

    async def list_topics(self) -> list[str]:
        meta = await self.cluster.describe_all()
        return sorted(meta.topics)

    async def describe_topics(self, names: Iterable[str] | None = None) -> list[TopicDescription]:
        """Partitions, leaders, replicas and ISR of the topics (all when ``names`` is None)."""
        if names is None:
            meta: ClusterMetadata = await self.cluster.describe_all()
            wanted = sorted(meta.topics)
        else:
            wanted = list(names)
            body: bodies.MetadataRequestBody = {
                "topics": [{"name": n} for n in wanted],
                "allow_auto_topic_creation": False,  # describing never creates
            }
            meta = ClusterMetadata.from_response(
                await self.cluster.request_any(ApiKey.METADATA, body)
            )
        out = []
        for name in wanted:
            info = meta.topics.get(name)
            if info is None:
                raise wire_error(3, f"topic {name!r}")
            raise_if_error(info.error_code, f"topic {name!r}")
            out.append(TopicDescription(name, info.partitions, info.is_internal))
        return out

    async def describe_cluster(self) -> ClusterDescription:
        meta = await self.cluster.describe_all()
        brokers = tuple(sorted(meta.brokers.values(), key=lambda b: b.node_id))
        return ClusterDescription(meta.cluster_id, meta.controller_id, brokers)

    # --- configs ---------------------------------------------------------------------

    async def describe_topic_config(self, topic: str) -> list[ConfigEntry]:
        return await self._describe_configs(RESOURCE_TOPIC, topic, f"topic {topic!r}")

    async def alter_topic_config(self, topic: str, changes: Mapping[str, str | None]) -> None:
        """Set (or with None remove) topic overrides, keeping the other overrides."""
        await self._alter_configs(
            RESOURCE_TOPIC, topic, f"topic {topic!r}", changes, TOPIC_CONFIG_SOURCE
        )

    async def describe_broker_config(self, broker_id: int) -> list[ConfigEntry]:
        """The keys of ``broker_id`` (broker/admin/broker_configs.py): the dynamic ones, whose
        source 2 (DYNAMIC_BROKER_CONFIG) marks an override, then the read-only rest."""
        return await self._describe_configs(RESOURCE_BROKER, str(broker_id), f"broker {broker_id}")

    async def alter_broker_config(self, broker_id: int, changes: Mapping[str, str | None]) -> None:
        """Set (or with None remove) dynamic overrides of ``broker_id``, keeping the
        others."""
        await self._alter_configs(
            RESOURCE_BROKER,
            str(broker_id),
            f"broker {broker_id}",
            changes,
            DYNAMIC_BROKER_CONFIG_SOURCE,
        )

    async def describe_configs(self, resource_type: int, name: str) -> list[ConfigEntry]:
        """Every key of a topic (RESOURCE_TOPIC) or a broker (RESOURCE_BROKER: its id,
        or "" for the cluster-wide dynamic defaults), sorted by name."""
        return await self._describe_configs(resource_type, name, _label(resource_type, name))

    async def incremental_alter_configs(
        self,
        resource_type: int,
        name: str,
        ops: Iterable[ConfigOp],
        *,
        validate_only: bool = False,
    ) -> None:
        """Edit a topic's or a broker's dynamic config key by key (IncrementalAlterConfigs)."""
        body: bodies.IncrementalAlterConfigsRequestBody = {
            "resources": [
                {
                    "resource_type": resource_type,
                    "resource_name": name,
                    "configs": [
                        {"name": op.name, "config_operation": op.operation, "value": op.value}
                        for op in ops
                    ],
                }
            ],
            "validate_only": validate_only,
        }
        response = await self._controller.request(bodies.INCREMENTAL_ALTER_CONFIGS, body)
        for result in response.get("responses", ()):
            raise_if_error(
                result["error_code"], _label(resource_type, name), result.get("error_message")
            )

    async def _describe_configs(
        self, resource_type: int, name: str, label: str
    ) -> list[ConfigEntry]:
        """DescribeConfigs of one resource, its entries sorted by name; a broker's own
        keys are described by that broker (as Kafka's clients ask them)."""
        body: bodies.DescribeConfigsRequestBody = {
            "resources": [
                {"resource_type": resource_type, "resource_name": name, "configuration_keys": None}
            ],
            "include_synonyms": False,
            "include_documentation": False,
        }
        meta = await self.cluster.refresh()
        if resource_type == RESOURCE_BROKER and name.isdigit() and int(name) in meta.brokers:
            response: bodies.DescribeConfigsResponse = await self.cluster.request(
                int(name), ApiKey.DESCRIBE_CONFIGS, body
            )
        else:
            response = await self.cluster.request_any(ApiKey.DESCRIBE_CONFIGS, body)
        entries: list[ConfigEntry] = []
        for result in response.get("results", ()):
            raise_if_error(result["error_code"], label, result.get("error_message"))
            entries += [
                ConfigEntry(
                    c["name"],
                    c["value"],
                    c.get("config_source", -1),
                    c.get("read_only", False),
                    c.get("is_sensitive", False),
                )
                for c in result["configs"]
            ]
        return sorted(entries, key=lambda e: e.name)

    async def _alter_configs(
        self,
        resource_type: int,
        name: str,
        label: str,
        changes: Mapping[str, str | None],
        override_source: int,
    ) -> None:
        """AlterConfigs replaces a resource's whole set of overrides: read the current
        ones (entries of ``override_source``), apply ``changes``, send them all."""
        current = {
            e.name: e.value
            for e in await self._describe_configs(resource_type, name, label)
            if e.source == override_source
        }
        for key, value in changes.items():
            if value is None:
                current.pop(key, None)
            else:
                current[key] = value
        body: bodies.AlterConfigsRequestBody = {
            "resources": [
                {
                    "resource_type": resource_type,
                    "resource_name": name,
                    "configs": [{"name": k, "value": v} for k, v in sorted(current.items())],
                }
            ],
            "validate_only": False,
        }
        response = await self._controller.request(bodies.ALTER_CONFIGS, body)
        for result in response.get("responses", ()):
            raise_if_error(result["error_code"], label, result.get("error_message"))

    # --- consumer groups (GroupAdmin) -------------------------------------------------

    async def list_groups(self) -> list[GroupListing]:
        """Every group of every broker, sorted by id."""
        return await self._groups.list_groups()

    async def describe_group(self, group_id: str) -> GroupDescription:
        """State and members (with their assignments) of a group."""
        return await self._groups.describe_group(group_id)

    async def list_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, int | None]:
        """Committed offsets (all the group has, or of ``partitions``: None if none)."""
        return await self._groups.list_group_offsets(group_id, partitions)

    async def alter_group_offsets(self, group_id: str, offsets: dict[TopicPartition, int]) -> None:
        """Set committed offsets; the group must have no members (else UNKNOWN_MEMBER_ID)."""
        await self._groups.alter_group_offsets(group_id, offsets)

    async def delete_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> None:
        """Forget committed offsets (refused for a topic a member still consumes)."""
        await self._groups.delete_group_offsets(group_id, partitions)

    async def delete_groups(self, group_ids: Iterable[str]) -> None:
        """Delete groups and their offsets; refused (NON_EMPTY_GROUP) while one has members."""
        await self._groups.delete_groups(group_ids)

    async def log_end_offsets(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """The log end (high watermark) of each partition."""
        return await self._groups.log_end_offsets(partitions)

    async def describe_group_offsets(
        self, group_id: str
    ) -> tuple[GroupDescription, list[PartitionLag]]:
        """Per partition the group has an offset for or a member reads: committed
        offset, log end, lag and the member reading it."""
        return await self._groups.describe_group_offsets(group_id)

    # --- leadership, reassignments, log dirs (ReplicaAdmin) ----------------------------

    async def elect_leaders(
        self,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        election_type: str = "preferred",
    ) -> dict[TopicPartition, KafkaError | None]:
        """Leader election of ``partitions`` (None: all), per partition None or the
        error it got; ``election_type`` is "preferred" or "unclean"."""
        return await self._replicas.elect_leaders(partitions, election_type=election_type)

    async def alter_partition_reassignments(
        self, targets: Mapping[TopicPartition, list[int] | None]
    ) -> dict[TopicPartition, KafkaError | None]:
        """Start moving partitions to ``targets`` replicas (None cancels a move)."""
        return await self._replicas.alter_partition_reassignments(targets)

    async def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> list[Reassignment]:
        """The reassignments in progress (of ``partitions``; None: all)."""
        return await self._replicas.list_partition_reassignments(partitions)

    async def describe_log_dirs(
        self, brokers: Iterable[int] | None = None
    ) -> list[LogDirDescription]:
        """The log dirs of ``brokers`` (None: all) and the replicas in each."""
        return await self._replicas.describe_log_dirs(brokers)

    async def alter_replica_log_dirs(
        self, moves: Mapping[tuple[str, int, int], str]
    ) -> dict[tuple[str, int, int], KafkaError | None]:
        """Move replicas between the log dirs of their broker: {(topic, part, broker): dir}."""
        return await self._replicas.alter_replica_log_dirs(moves)

    # --- a topic's partitions (PartitionAdmin) ----------------------------------------

    async def create_partitions(
        self,
        topic: str,
        count: int,
        *,
        assignments: Sequence[Sequence[int]] | None = None,
        validate_only: bool = False,
    ) -> None:
        """Grow ``topic`` to ``count`` partitions (``assignments``: the replicas of each
        new partition, else the broker places them)."""
        await self._partitions.create_partitions(
            topic, count, assignments=assignments, validate_only=validate_only
        )

    async def delete_records(
        self, before: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int | KafkaError]:
        """Delete each partition's records below its offset (-1: below the high
        watermark); per partition the low watermark or the error it got."""
        return await self._partitions.delete_records(before)


def _label(resource_type: int, name: str) -> str:
    if resource_type == RESOURCE_TOPIC:
        return f"topic {name!r}"
    return f"broker {name}" if name else "the brokers' default"


__all__ = [
    "Admin",
    "ClusterDescription",
    "ConfigEntry",
    "ConfigOp",
    "LogDirDescription",
    "Reassignment",
    "ReplicaLogDir",
    "TopicDescription",
]

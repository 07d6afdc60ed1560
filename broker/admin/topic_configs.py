"""Topic configuration: DescribeConfigs, AlterConfigs and dynamic topic config.

How this works (ZooKeeper-era Kafka's AdminManager + DynamicConfigManager, topics only):

- A topic's overrides live in ``/config/topics/T`` as ``{"version":1,"config":{...}}``;
  every other topic key inherits its broker default (``BrokerConfig.topic_config``).
- DescribeConfigs (any broker) answers every topic key: the override when there is one
  (config_source 1, TOPIC_CONFIG), else the broker's value - 4 (STATIC_BROKER_CONFIG)
  when the broker's properties changed the inherited key, 5 (DEFAULT_CONFIG) when it is
  the built-in default. The schema has no ``is_default`` (Kafka dropped it in v1):
  source 5 is what it meant.
- AlterConfigs (any broker) replaces the topic's whole override set (non-incremental),
  after checking every key and value against the topic-config table; a bad one is
  INVALID_CONFIG naming the key. Unless ``validate_only``, it writes /config/topics/T,
  then the notification ``/config/changes/config_change_<seq>``
  ``{"version":2,"entity_path":"topics/T"}``.
- Every broker watches /config/changes (``run_change_listener``, started by
  broker/cluster_member.py with the session's event channel) and, for each new
  notification, re-reads the topic's overrides and applies them to its live partitions
  (TopicConfig) and logs (LogConfig). The active controller watches the same znodes for
  unclean.leader.election.enable (controller.py ``_on_topic_config_change``).

The replication throttle's replica lists (``leader.replication.throttled.replicas``,
``follower.replication.throttled.replicas``) are topic keys like any other: validated
here (INVALID_CONFIG on a malformed list), applied with the rest to the live
partitions' TopicConfig, where the fetch paths read the partitions throttled for this
broker (broker/quotas/replication_quota.py). A notification is applied whether or not this
broker hosts the topic yet, so a reassignment's new follower is throttled from its
first fetch.

Notifications older than ``CHANGE_EXPIRATION_MS`` are deleted by whichever broker sees
them first, as Kafka's ZkNodeChangeNotificationListener does; a concurrent deletion by
another broker is harmless.

Standalone brokers (no ZooKeeper) describe their defaults and refuse AlterConfigs: they
have nowhere durable to keep an override.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

import trio

from minibroker.broker.admin.broker_configs import effective_config, lenient_typed
from minibroker.broker.cluster.assignment import validate_topic_name
from minibroker.broker.cluster.metadata_cache import MetadataCache
from minibroker.broker.config.broker_config import BrokerConfig, TopicConfig
from minibroker.broker.config.config_describe import BrokerLayers, describe_topic
from minibroker.broker.quotas.replication_quota import (
    FOLLOWER_THROTTLED_REPLICAS,
    LEADER_THROTTLED_REPLICAS,
    AllPartitions,
    throttled_partitions,
)
from minibroker.broker.requests.dispatcher import Deferred, RequestDispatcher
from minibroker.protocol.api import RequestHeader
from minibroker.protocol.errors import (
    NONE,
    ConfigError,
    InvalidConfigError,
    InvalidRequestError,
    KafkaError,
    MinibrokerError,
    UnknownTopicOrPartitionError,
)
from minibroker.protocol.messages import bodies
from minibroker.protocol.messages.cluster import RESOURCE_BROKER, RESOURCE_TOPIC

if TYPE_CHECKING:
    from minibroker.broker.admin.broker_configs import BrokerConfigs
    from minibroker.broker.replication.hosted_replicas import HostedReplicas
    from minibroker.zk.data import KafkaZkClient
    from minibroker.zk.types import ZkEvent

log = logging.getLogger(__name__)

CHANGE_EXPIRATION_MS = 15 * 60 * 1000
"""Kafka's changeExpirationMs: long enough for every broker to have seen a change."""

TOPIC_ENTITY_PREFIX = "topics/"


def validate_topic_overrides(broker: BrokerConfig, configs: Mapping[str, str]) -> TopicConfig:
    """The topic config ``configs`` would give; InvalidConfigError naming the first bad
    key (unknown, unparsable or out of range)."""
    try:
        return broker.topic_config(configs)
    except ConfigError as exc:
        raise InvalidConfigError(str(exc)) from exc


def describe_topic_config(
    broker: BrokerConfig,
    overrides: Mapping[str, str],
    *,
    keys: list[str] | None = None,
    include_documentation: bool = False,
    include_synonyms: bool = False,
    layers: BrokerLayers | None = None,
) -> list[bodies.DescribeConfigsResponseResultConfig]:
    """DescribeConfigs ``configs[]`` of one topic: every key (or just ``keys``), in
    table order, each with its value and where it comes from (``layers``: the broker's
    dynamic overrides, none when not given)."""
    layers = layers or BrokerLayers(broker)
    typed = lenient_typed({**layers.default, **layers.broker})
    return describe_topic(
        layers,
        overrides,
        effective=effective_config(broker, typed),
        keys=keys,
        include_synonyms=include_synonyms,
        include_documentation=include_documentation,
    )


class TopicConfigs:
    """The two config APIs and the /config/changes listener of one broker."""

    def __init__(
        self,
        config: BrokerConfig,
        replicas: HostedReplicas,
        metadata_cache: MetadataCache,
        *,
        zk: KafkaZkClient | None,
        broker_configs: BrokerConfigs | None = None,
    ) -> None:
        self.config = config
        self.replicas = replicas
        self.metadata_cache = metadata_cache
        self._zk = zk
        # Resource type BROKER (4) and brokers/<id> changes (broker/admin/broker_configs.py).
        self.broker_configs = broker_configs

    def validate(self, configs: Mapping[str, str]) -> list[bodies.CreateTopicsResponseTopicConfig]:
        """CreateTopics' check of a new topic's configs (broker/admin/admin_manager.py); returns
        every config the topic then has, as CreateTopics v5+ answers them (Kafka's Admin
        client reads that list from every created topic)."""
        validate_topic_overrides(self.config, configs)
        return [
            {
                "name": entry["name"],
                "value": entry["value"],
                "read_only": entry["read_only"],
                "config_source": entry["config_source"],
                "is_sensitive": entry["is_sensitive"],
            }
            for entry in describe_topic_config(self.config, configs)
        ]

    def install(self, dispatcher: RequestDispatcher) -> None:
        dispatcher.register(bodies.DESCRIBE_CONFIGS, self.handle_describe_configs)
        dispatcher.register(bodies.ALTER_CONFIGS, self.handle_alter_configs)

    # -- DescribeConfigs -------------------------------------------------------------------

    def handle_describe_configs(
        self, header: RequestHeader, request: bodies.DescribeConfigsRequest
    ) -> Deferred[bodies.DescribeConfigsResponse]:
        async def answer() -> bodies.DescribeConfigsResponse:
            results = [
                await self._describe_resource(
                    resource, request["include_synonyms"], request["include_documentation"]
                )
                for resource in request["resources"]
            ]
            return {"throttle_time_ms": 0, "results": results}

        return Deferred(answer)

    async def _describe_resource(
        self,
        resource: bodies.DescribeConfigsRequestResource,
        include_synonyms: bool,
        include_documentation: bool,
    ) -> bodies.DescribeConfigsResponseResult:
        if resource["resource_type"] == RESOURCE_BROKER and self.broker_configs is not None:
            return await self.broker_configs.describe(
                resource,
                include_synonyms=include_synonyms,
                include_documentation=include_documentation,
            )
        result: bodies.DescribeConfigsResponseResult = {
            "resource_type": resource["resource_type"],
            "resource_name": resource["resource_name"],
            "configs": [],
        }
        topic = resource["resource_name"]
        try:
            self._check_topic_resource(resource)
            if not self.metadata_cache.contains(topic):
                raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
            overrides = await self._read_overrides(topic)
            layers = await self._broker_layers()
        except KafkaError as exc:
            return result | {"error_code": exc.code, "error_message": exc.message}
        result["configs"] = describe_topic_config(
            self.config,
            overrides,
            keys=resource["configuration_keys"],
            include_documentation=include_documentation,
            include_synonyms=include_synonyms,
            layers=layers,
        )
        return result | {"error_code": NONE, "error_message": None}

    async def _broker_layers(self) -> BrokerLayers:
        if self.broker_configs is None:
            return BrokerLayers(self.config)
        try:
            return await self.broker_configs.layers()
        except MinibrokerError as exc:  # ZooKeeper unreachable or a malformed znode
            raise KafkaError(f"cannot read the broker's dynamic config: {exc}") from exc

    async def _read_overrides(self, topic: str) -> dict[str, str]:
        data = self._zk
        if data is None:
            return dict(self.replicas.topic_overrides(topic))
        try:
            return await data.get_topic_config(topic)
        except MinibrokerError as exc:  # ZooKeeper unreachable or a malformed znode
            raise KafkaError(f"cannot read the config of topic {topic!r}: {exc}") from exc

    # -- AlterConfigs ----------------------------------------------------------------------

    def handle_alter_configs(
        self, header: RequestHeader, request: bodies.AlterConfigsRequest
    ) -> Deferred[bodies.AlterConfigsResponse]:
        async def answer() -> bodies.AlterConfigsResponse:
            responses = [
                await self._alter_resource(resource, request["validate_only"])
                for resource in request["resources"]
            ]
            return {"throttle_time_ms": 0, "responses": responses}

        return Deferred(answer)

    async def _alter_resource(
        self, resource: bodies.AlterConfigsRequestResource, validate_only: bool
    ) -> bodies.AlterConfigsResponseResponse:
        if resource["resource_type"] == RESOURCE_BROKER and self.broker_configs is not None:
            return await self.broker_configs.alter(resource, validate_only)
        result: bodies.AlterConfigsResponseResponse = {
            "resource_type": resource["resource_type"],
            "resource_name": resource["resource_name"],
        }
        topic = resource["resource_name"]
        try:
            self._check_topic_resource(resource)
            names = [c["name"] for c in resource["configs"]]
            duplicates = sorted({n for n in names if names.count(n) > 1})
            if duplicates:
                raise InvalidRequestError(f"config {duplicates[0]} appears twice")
            # A null value in a full replacement means "no override" (Kafka drops it too).
            configs = {c["name"]: c["value"] for c in resource["configs"] if c["value"] is not None}
            validate_topic_overrides(self.config, configs)
            data = self._zk
            if data is None:
                raise InvalidRequestError("a standalone broker has no ZooKeeper to keep configs")
            if await data.get_assignment(topic) is None:
                raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
            if not validate_only:
                await data.set_topic_config(topic, configs, notify=True)
                log.info("topic %s config overrides set to %s", topic, configs)
        except KafkaError as exc:
            return result | {"error_code": exc.code, "error_message": exc.message}
        except MinibrokerError as exc:  # ZooKeeper trouble: retriable for the client
            message = f"cannot write the config of {topic!r}: {exc}"
            return result | {"error_code": KafkaError.code, "error_message": message}
        return result | {"error_code": NONE, "error_message": None}

    @staticmethod
    def _check_topic_resource(
        resource: bodies.DescribeConfigsRequestResource | bodies.AlterConfigsRequestResource,
    ) -> None:
        if resource["resource_type"] != RESOURCE_TOPIC:
            raise InvalidRequestError(
                f"resource type {resource['resource_type']} is not supported; "
                f"only topics ({RESOURCE_TOPIC})"
            )
        validate_topic_name(resource["resource_name"])

    # -- dynamic topic config --------------------------------------------------------------

    async def apply_topic_config(self, data: KafkaZkClient, topic: str) -> None:
        """Re-read ``topic``'s overrides and apply them to its live partitions and logs."""
        overrides = await data.get_topic_config(topic)
        await self.replicas.update_topic_overrides(topic, overrides)
        self._log_throttle(topic, overrides)

    def _log_throttle(self, topic: str, overrides: Mapping[str, str]) -> None:
        """Say which of ``topic``'s partitions the replication throttle covers here."""
        me = self.config.broker_id
        for side, key in (
            ("leader", LEADER_THROTTLED_REPLICAS),
            ("follower", FOLLOWER_THROTTLED_REPLICAS),
        ):
            value = overrides.get(key, "")
            if value:
                here = throttled_partitions(value, me)
                shown = "all" if isinstance(here, AllPartitions) else sorted(here)
                log.info("topic %s: %s throttle here on partitions %s", topic, side, shown)

    async def run_change_listener(
        self,
        data: KafkaZkClient,
        events: trio.MemoryReceiveChannel[ZkEvent],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Apply every topic config change announced under /config/changes while this
        ZooKeeper session lasts (``events`` is the session's subscription; it closes with
        the client). At start, and on every new session, the topics this broker already
        hosts are re-read whole: a rejoin after losing ZooKeeper may have missed
        notifications (Kafka's DynamicConfigManager re-reads every entity at start-up).
        Partitions created later read their config on LeaderAndIsr."""
        from minibroker.zk.config_changes import config_change_names, topics_changed
        from minibroker.zk.model import CONFIG_CHANGES_PATH
        from minibroker.zk.types import StateChange, WatchEvent, WatchType, ZkState

        last = max(await config_change_names(data.zk, watch=True), default="")
        await self._resync(data)
        task_status.started()
        async for event in events:
            if isinstance(event, WatchEvent):
                if event.path != CONFIG_CHANGES_PATH or event.type is not WatchType.CHILD:
                    continue
            elif not (isinstance(event, StateChange) and event.state is ZkState.CONNECTED):
                continue
            try:
                if isinstance(event, StateChange) and event.new_session:
                    await self._resync(data)
                names = await config_change_names(data.zk, watch=True)
                fresh = [n for n in names if n > last]
                for topic in sorted(await topics_changed(data.zk, fresh)):
                    await self.apply_topic_config(data, topic)
                if self.broker_configs is not None:
                    await self.broker_configs.apply_changes(data, fresh)
                if fresh:
                    last = fresh[-1]
                await self._purge_expired(data, names)
            except MinibrokerError as exc:  # ZkError included
                # The reconnect re-arms the watch and replays from ``last``.
                log.warning("cannot process topic config changes: %s", exc)

    async def _resync(self, data: KafkaZkClient) -> None:
        if self.broker_configs is not None:  # start-up: /config/brokers/<own id>
            await self.broker_configs.apply(data)
        for topic in sorted({tp.topic for tp in self.replicas.partitions}):
            await self.apply_topic_config(data, topic)

    async def _purge_expired(self, data: KafkaZkClient, names: list[str]) -> None:
        from minibroker.zk.model import CONFIG_CHANGES_PATH

        paths = [f"{CONFIG_CHANGES_PATH}/{name}" for name in names]
        expired_before = self.replicas.clock() - CHANGE_EXPIRATION_MS
        for path, result in zip(paths, await data.zk.get_many(paths), strict=True):
            if isinstance(result, Exception) or result[1].ctime_ms >= expired_before:
                continue
            with contextlib.suppress(MinibrokerError):  # another broker purged it first
                await data.zk.delete(path)

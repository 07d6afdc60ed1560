"""How a broker joins a ZooKeeper cluster: registration, controller candidate, cluster APIs.

``run_cluster_member(broker)`` is what broker/broker.py starts (lazily imported, so a
standalone broker never loads kazoo). It

1. opens the ZooKeeper session (``zookeeper.connect``, chroot honoured) and creates
   Kafka's persistent paths;
2. registers ``/brokers/ids/<id>`` (ephemeral) with the broker's advertised address, and
   registers it again whenever a new session replaces an expired one;
3. runs this broker's KafkaController candidate (one event loop, one broker channel);
4. serves CreateTopics, DeleteTopics, ElectLeaders, AlterPartitionReassignments,
   ListPartitionReassignments and ControlledShutdown through controller/admin.py;
5. reads (or creates) /cluster/id for Metadata, and runs the broker's /config/changes
   listener (``broker.topic_configs``, broker/topic_configs.py) on this session.

The broker object is used duck-typed (``config``, ``address``, ``dispatcher.register``,
``metadata_cache.contains``): the controller package does not import the broker
package (DESIGN §1), except ``Deferred``, the one type KafkaApis requires of handlers
that await, which is looked up at call time from the broker's own module.

``ClusterMember.controlled_shutdown()`` is for the broker's stop path: it asks the
controller (wherever it runs) to move leadership away, retrying as
``controlled.shutdown.max.retries`` / ``.retry.backoff.ms`` say, before the broker
closes its listener.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import trio

from minibroker.client.connection import Connection
from minibroker.controller.admin import ClusterAdmin
from minibroker.controller.channel import ControllerChannelManager, connect_to_broker
from minibroker.controller.controller import ControllerConfig, KafkaController
from minibroker.controller.metrics import ControllerCollector
from minibroker.controller.zk_adapter import ControllerZkAdapter
from minibroker.protocol.api import ApiKey, Body
from minibroker.protocol.errors import KafkaError, MinibrokerError
from minibroker.zk.client import open_zk_client
from minibroker.zk.cluster_id import get_or_create_cluster_id
from minibroker.zk.data import KafkaZkClient
from minibroker.zk.model import KAFKA_LISTENER, BrokerInfo, EndPoint
from minibroker.zk.types import StateChange, ZkEvent, ZkState

log = logging.getLogger("minibroker.controller.cluster")

TOPICS_READY_POLL_S = 0.02
"""How often CreateTopics looks at the local metadata cache while waiting for a new
topic's UpdateMetadata; the cache has no change notification to wait on."""


class ClusterMember:
    def __init__(self, broker: Any, data: KafkaZkClient, controller: KafkaController) -> None:
        config = broker.config
        self.broker = broker
        self.data = data
        self.controller = controller
        self.admin = ClusterAdmin(
            data,
            controller,
            num_partitions=config.num_partitions,
            default_replication_factor=config.default_replication_factor,
            delete_topic_enable=config.delete_topic_enable,
            topics_ready=self._topics_ready,
            validate_config=getattr(getattr(broker, "topic_configs", None), "validate", None),
        )

    async def _topics_ready(self, topics: Iterable[str]) -> None:
        pending = set(topics)
        while pending:
            pending = {t for t in pending if not self.broker.metadata_cache.contains(t)}
            if pending:
                await trio.sleep(TOPICS_READY_POLL_S)

    def register_apis(self) -> None:
        deferred = sys.modules[type(self.broker.dispatcher).__module__].Deferred
        routes: dict[ApiKey, Callable[[Body], Awaitable[Body]]] = {
            ApiKey.CREATE_TOPICS: self.admin.create_topics,
            ApiKey.DELETE_TOPICS: self.admin.delete_topics,
            ApiKey.ELECT_LEADERS: self.admin.elect_leaders,
            ApiKey.ALTER_PARTITION_REASSIGNMENTS: self.admin.alter_partition_reassignments,
            ApiKey.LIST_PARTITION_REASSIGNMENTS: self.admin.list_partition_reassignments,
            ApiKey.CONTROLLED_SHUTDOWN: self.admin.controlled_shutdown,
        }
        for api_key, method in routes.items():

            def handler(header: Any, body: Body, method: Any = method) -> Any:
                return deferred(functools.partial(method, body))

            self.broker.dispatcher.register(api_key, handler)

    async def controlled_shutdown(self) -> bool:
        """Ask the active controller to move leadership off this broker; True once it
        leads no replicated partition (Kafka's KafkaServer.controlledShutdown)."""
        config = self.broker.config
        for attempt in range(config.controlled_shutdown_max_retries + 1):
            if attempt:
                await trio.sleep(config.controlled_shutdown_retry_backoff_ms / 1000)
            try:
                remaining = await self._ask_controller_to_shut_us_down()
            except (KafkaError, OSError) as exc:
                log.warning("controlled shutdown attempt %d failed: %s", attempt + 1, exc)
                continue
            if remaining is not None and not remaining:
                log.info("controlled shutdown of broker %d succeeded", config.broker_id)
                return True
            log.info("controlled shutdown: broker still leads %s", remaining)
        return False

    async def _ask_controller_to_shut_us_down(self) -> list[Body] | None:
        controller_id = await self.data.get_controller_id()
        brokers = await self.data.get_live_brokers()
        if controller_id is None or controller_id not in brokers:
            return None
        target = brokers[controller_id]
        async with Connection(target.host, target.port, client_id="controlled-shutdown") as conn:
            response = await conn.request(
                ApiKey.CONTROLLED_SHUTDOWN, {"broker_id": self.broker.config.broker_id}
            )
        if response["error_code"]:
            return None
        remaining: list[Body] = response["remaining_partitions"]
        return remaining


async def _keep_registered(
    data: KafkaZkClient, info: BrokerInfo, events: trio.MemoryReceiveChannel[ZkEvent]
) -> None:
    """A new session (after expiry) lost our ephemeral /brokers/ids znode: write it again."""
    async for event in events:
        if (
            isinstance(event, StateChange)
            and event.state is ZkState.CONNECTED
            and event.new_session
        ):
            try:
                await data.register_broker(info)
                log.info("broker %d registered again after session expiry", info.id)
            except MinibrokerError as exc:
                log.error("re-registering broker %d failed: %s", info.id, exc)


async def run_cluster_member(
    broker: Any, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
) -> None:
    config = broker.config
    session_timeout = config.zookeeper_session_timeout_ms / 1000
    connect_ms = config.zookeeper_connection_timeout_ms or config.zookeeper_session_timeout_ms
    async with open_zk_client(
        config.zookeeper_connect, session_timeout=session_timeout, connect_timeout=connect_ms / 1000
    ) as zk:
        controller_events = zk.subscribe()
        session_events = zk.subscribe()
        config_events = zk.subscribe()
        data = KafkaZkClient(zk)
        await data.create_top_level_paths()
        broker.metadata_cache.set_cluster_id(await get_or_create_cluster_id(zk))
        host, port = broker.address
        endpoints = [EndPoint("PLAINTEXT", host, port)]
        if broker.kafka_address is not None:
            endpoints.append(EndPoint(KAFKA_LISTENER, *broker.kafka_address))
        info = BrokerInfo(config.broker_id, tuple(endpoints), rack=config.broker_rack)
        # A broker restarted right after a crash finds its old znode until that
        # session expires: wait that long rather than fail (ZK layer, ed853ab).
        await data.register_broker(info, stale_wait=session_timeout)
        controller = KafkaController(
            ControllerConfig(
                broker_id=config.broker_id,
                unclean_leader_election_enable=config.unclean_leader_election_enable,
                auto_leader_rebalance_enable=config.auto_leader_rebalance_enable,
                leader_imbalance_check_interval_s=config.leader_imbalance_check_interval_seconds,
                leader_imbalance_per_broker_percentage=config.leader_imbalance_per_broker_percentage,
                delete_topic_enable=config.delete_topic_enable,
            ),
            ControllerZkAdapter(data),
            ControllerChannelManager(connect_to_broker),
        )
        registry = getattr(getattr(broker, "metrics", None), "registry", None)
        if registry is not None:
            registry.register(ControllerCollector(controller))
        member = ClusterMember(broker, data, controller)
        member.register_apis()
        broker.cluster_member = member
        async with trio.open_nursery() as nursery:
            await nursery.start(functools.partial(controller.run, zk_events=controller_events))
            nursery.start_soon(_keep_registered, data, info, session_events)
            topic_configs = getattr(broker, "topic_configs", None)  # dynamic topic config
            if topic_configs is not None:
                await nursery.start(topic_configs.run_change_listener, data, config_events)
            log.info(
                "broker %d joined the cluster at %s", config.broker_id, config.zookeeper_connect
            )
            task_status.started()

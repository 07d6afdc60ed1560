"""Node: a Broker plus, in cluster mode, the KafkaController candidate on its session,
and the group and transaction coordinators (transaction/service.py) as a broker service.

Kafka runs both in one KafkaServer; here the broker knows the controller only as a
*session service* (broker/cluster_member.py): ``Node`` passes ``_run_controller`` to the
broker, which starts it on every join of the cluster with the broker's ZooKeeper
client, and ``Node`` serves the controller-only APIs (ElectLeaders, the reassignment
APIs, ControlledShutdown: controller/apis.py) through the broker's dispatcher.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import TypeVar

import trio

from minibroker.broker.broker import Broker
from minibroker.broker.config.broker_config import BrokerConfig
from minibroker.broker.options import PRODUCTION, BrokerOptions
from minibroker.broker.requests.dispatcher import Deferred, RequestDispatcher
from minibroker.controller.apis import ControllerApis
from minibroker.controller.channel import ControllerChannelManager, connect_to_broker
from minibroker.controller.controller import ControllerConfig, KafkaController
from minibroker.controller.metrics import ControllerCollector
from minibroker.controller.zk_adapter import ControllerZkAdapter
from minibroker.protocol.api import RequestHeader
from minibroker.protocol.messages import bodies
from minibroker.storage.log_config import Clock, system_clock
from minibroker.transaction.service import run_coordinators
from minibroker.zk.data import KafkaZkClient
from minibroker.zk.types import ZkEvent

RequestT = TypeVar("RequestT")
ResponseT = TypeVar("ResponseT")


class Node:
    """``await nursery.start(node.run)`` returns the Broker once it serves requests."""

    def __init__(
        self,
        config: BrokerConfig,
        *,
        clock: Clock = system_clock,
        options: BrokerOptions = PRODUCTION,
    ) -> None:
        self.config = config
        self.controller: KafkaController | None = None
        """This node's controller candidate while the broker is a cluster member."""
        self.broker = Broker(
            config,
            clock=clock,
            session_services=(self._run_controller,),
            services=(run_coordinators,),
            options=options,
        )

    async def run(self, *, task_status: trio.TaskStatus[Broker] = trio.TASK_STATUS_IGNORED) -> None:
        await self.broker.run(task_status=task_status)

    async def stop(self) -> None:
        """Controlled shutdown, then a clean stop (Broker.stop)."""
        await self.broker.stop()

    async def _run_controller(
        self,
        zk: KafkaZkClient,
        events: trio.MemoryReceiveChannel[ZkEvent],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        config = self.config
        controller = KafkaController(
            ControllerConfig(
                broker_id=config.broker_id,
                unclean_leader_election_enable=config.unclean_leader_election_enable,
                auto_leader_rebalance_enable=config.auto_leader_rebalance_enable,
                leader_imbalance_check_interval_s=config.leader_imbalance_check_interval_seconds,
                leader_imbalance_per_broker_percentage=config.leader_imbalance_per_broker_percentage,
                delete_topic_enable=config.delete_topic_enable,
            ),
            ControllerZkAdapter(zk),
            ControllerChannelManager(
                functools.partial(
                    connect_to_broker, security=self.broker.parts.inter_broker_security
                )
            ),
        )
        registry = self.broker.metrics.registry
        collector = ControllerCollector(controller)
        registry.register(collector)
        self.controller = controller
        serve_controller_apis(
            self.broker.dispatcher, ControllerApis(controller), config.inter_broker_listener
        )
        try:
            await controller.run(zk_events=events, task_status=task_status)
        finally:
            registry.unregister(collector)


def serve_controller_apis(
    dispatcher: RequestDispatcher, apis: ControllerApis, inter_broker_listener: str
) -> None:
    """Route the controller-only API keys to ``apis`` (replacing an earlier candidate's);
    ControlledShutdown on the inter-broker listener only, from the broker it names."""
    dispatcher.register(bodies.ELECT_LEADERS, _deferred(apis.elect_leaders))
    dispatcher.register(
        bodies.ALTER_PARTITION_REASSIGNMENTS, _deferred(apis.alter_partition_reassignments)
    )
    dispatcher.register(
        bodies.LIST_PARTITION_REASSIGNMENTS, _deferred(apis.list_partition_reassignments)
    )

    def controlled_shutdown(
        header: RequestHeader, request: bodies.ControlledShutdownRequest
    ) -> Deferred[bodies.ControlledShutdownResponse]:
        peer = header.session.peer
        sender = -1 if peer is None else peer.broker_id
        return Deferred(functools.partial(apis.controlled_shutdown, request, sender=sender))

    dispatcher.register(
        bodies.CONTROLLED_SHUTDOWN, controlled_shutdown, listener=inter_broker_listener
    )


def _deferred(
    method: Callable[[RequestT], Awaitable[ResponseT]],
) -> Callable[[RequestHeader, RequestT], Deferred[ResponseT]]:
    """A handler answering with ``method``'s reply to the request, awaited in its own task
    (the controller's event queue may take a while)."""

    def handler(header: RequestHeader, request: RequestT) -> Deferred[ResponseT]:
        return Deferred(functools.partial(method, request))

    return handler

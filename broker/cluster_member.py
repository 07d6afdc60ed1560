"""ClusterMembership: a broker's life in a ZooKeeper cluster, on the session its broker
opened (broker/broker.py).

``run`` (started once the listener is bound, so the advertised port is known)

1. creates Kafka's persistent paths and reads (or creates) /cluster/id for Metadata;
2. releases the registration its previous process left behind (below), then registers
   ``/brokers/ids/<id>`` (ephemeral) with the broker's advertised address and
   gives the controller fence the broker epoch (the znode's czxid, KIP-380), registering
   again whenever a new session replaces an expired one;
3. runs the broker's controller fence (broker/security/controller_fence.py: it follows
   /controller and /controller_epoch), its /config/changes listener
   (broker/admin/topic_configs.py) and every
   *session service* it was given: what else lives on this broker's session (the
   controller candidate, which the process one layer up, node/, passes in);
4. if any of that fails after the first join, logs it and joins again after
   ``CLUSTER_REJOIN_BACKOFF_S``: the broker keeps serving what it leads meanwhile.
   Failing the first join stops the broker.

Re-registering at once after kill -9. The dead process's session, and its
/brokers/ids/<id>, outlive it until ZooKeeper expires the session (the session timeout,
18 s by default); Kafka waits that long. Here each new session's (id, password) is saved
in the first log dir (zk/session.py). At start-up, if /brokers/ids/<id> is owned by the
session saved there, that session belonged to the previous process on these log dirs,
and that process is dead: this process holds the exclusive flock on every log dir
(storage/log_manager.py), which the kernel releases only when its holder exits, so no
live process can be using that session. The broker joins it with the saved password and
closes it; ZooKeeper deletes its ephemerals at once (a /controller it held too, so a
new controller is elected without waiting either), and the broker registers. Any other
owner (another broker configured with the same id, or a session the file does not
name because the process died before writing it) is waited for as before, up to the
session timeout, then refused. Failing to close the old session only costs the wait.

``controlled_shutdown()`` is for the broker's stop path: it asks the controller
(wherever it runs) to move leadership away, retrying as ``controlled.shutdown.max.retries``
/ ``.retry.backoff.ms`` say, before the broker closes its listener.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import trio

from minibroker.broker.admin.topic_configs import TopicConfigs
from minibroker.broker.cluster.metadata_cache import MetadataCache
from minibroker.broker.config.broker_config import BrokerConfig
from minibroker.broker.security.controller_fence import ControllerFence
from minibroker.broker.security.identity_key import BrokerKey
from minibroker.net.connection import Connection
from minibroker.net.security import ClientSecurity
from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import KafkaError, MinibrokerError
from minibroker.protocol.messages import bodies
from minibroker.zk.cluster_id import get_or_create_cluster_id
from minibroker.zk.data import KafkaZkClient
from minibroker.zk.model import broker_path
from minibroker.zk.session import SESSION_FILE, close_session, read_credentials, write_credentials
from minibroker.zk.types import StateChange, ZkError, ZkEvent, ZkState
from minibroker.zk.values import KAFKA_LISTENER, BrokerInfo, EndPoint

log = logging.getLogger(__name__)

CLUSTER_REJOIN_BACKOFF_S = 2.0
"""Pause before rejoining the cluster after the membership task failed (ZooKeeper down)."""


class SessionService(Protocol):
    """Something that runs on the broker's ZooKeeper session while it is a member:
    started once per join, with its own subscription to the session's events."""

    async def __call__(
        self,
        zk: KafkaZkClient,
        events: trio.MemoryReceiveChannel[ZkEvent],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None: ...


class ClusterMembership:
    def __init__(
        self,
        config: BrokerConfig,
        zk: KafkaZkClient,
        metadata_cache: MetadataCache,
        topic_configs: TopicConfigs,
        fence: ControllerFence,
        *,
        address: tuple[str, int],
        kafka_address: tuple[str, int] | None = None,
        services: Sequence[SessionService] = (),
        identity: BrokerKey | None = None,
        security: ClientSecurity | None = None,
    ) -> None:
        """``address`` is the msgpack listener's; ``kafka_address`` the Kafka-protocol
        listener's, registered as a second (``KAFKA``) endpoint when there is one.
        ``identity``: the key whose public half the registration publishes;
        ``security``: how the controlled-shutdown connection secures and proves itself."""
        self.security = security
        self.config = config
        self.zk = zk
        self.metadata_cache = metadata_cache
        self.topic_configs = topic_configs
        self.fence = fence
        endpoints = [EndPoint(config.listener_name, *address)]
        if kafka_address is not None:
            endpoints.append(EndPoint(KAFKA_LISTENER, *kafka_address))
        self.info = BrokerInfo(
            config.broker_id,
            tuple(endpoints),
            rack=config.broker_rack,
            security_protocols=tuple(
                (e.listener, config.security_protocol(e.listener)) for e in endpoints
            ),
            identity_key=None if identity is None else identity.public_key,
        )
        self.services = services
        self.session_file = Path(config.log_dirs[0]) / SESSION_FILE

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        joined = False
        while True:
            try:
                async with trio.open_nursery() as nursery:
                    await nursery.start(self._join)
                    if not joined:
                        joined = True
                        task_status.started()
            except Exception as exc:
                if not joined:
                    raise
                log.error("cluster membership failed; rejoining: %r", exc, exc_info=exc)
            else:
                log.warning("cluster membership ended; rejoining")
            await trio.sleep(CLUSTER_REJOIN_BACKOFF_S)

    async def _join(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        config = self.config
        data = self.zk
        session_events = data.zk.subscribe()
        fence_events = data.zk.subscribe()
        config_events = data.zk.subscribe()
        service_events = [data.zk.subscribe() for _ in self.services]
        await data.create_top_level_paths()
        self.metadata_cache.set_cluster_id(await get_or_create_cluster_id(data.zk))
        session_timeout = config.zookeeper_session_timeout_ms / 1000
        await self._release_previous_registration(session_timeout)
        # A znode of a session we cannot prove ours may still be a crashed process's
        # until that session expires: wait that long rather than fail.
        self.fence.broker_epoch = await data.register_broker(self.info, stale_wait=session_timeout)
        await self._save_session()
        async with trio.open_nursery() as nursery:
            await nursery.start(self.fence.run, data, fence_events)
            for service, events in zip(self.services, service_events, strict=True):
                await nursery.start(functools.partial(service, data, events))
            nursery.start_soon(self._keep_registered, session_events)
            await nursery.start(self.topic_configs.run_change_listener, data, config_events)
            log.info(
                "broker %d joined the cluster at %s", config.broker_id, config.zookeeper_connect
            )
            task_status.started()

    async def _keep_registered(self, events: trio.MemoryReceiveChannel[ZkEvent]) -> None:
        """A new session (after expiry) lost our ephemeral /brokers/ids znode: write it
        again (a new znode: a new broker epoch)."""
        async for event in events:
            if (
                isinstance(event, StateChange)
                and event.state is ZkState.CONNECTED
                and event.new_session
            ):
                try:
                    self.fence.broker_epoch = await self.zk.register_broker(self.info)
                    log.info("broker %d registered again after session expiry", self.info.id)
                    await self._save_session()
                except MinibrokerError as exc:
                    log.error("re-registering broker %d failed: %s", self.info.id, exc)

    async def _release_previous_registration(self, timeout: float) -> None:
        """Close the session of this broker's previous process if it still holds
        /brokers/ids/<id> (the module docstring says why that is safe)."""
        saved = read_credentials(self.session_file)
        if saved is None:
            return
        stat = await self.zk.zk.exists(broker_path(self.info.id))
        if stat is None or stat.ephemeral_owner != saved[0]:
            return
        if stat.ephemeral_owner == self.zk.zk.session_id:
            return  # our own registration (a rejoin on the same session)
        log.info(
            "broker %d: /brokers/ids/%d is held by session 0x%x of this broker's previous"
            " process; closing it",
            self.info.id,
            self.info.id,
            saved[0],
        )
        try:
            await close_session(self.config.zookeeper_connect or "", saved, timeout=timeout)
        except ZkError as exc:
            log.warning("cannot close the previous session: %s", exc)

    async def _save_session(self) -> None:
        """Keep the current session's credentials in the first log dir."""
        credentials = self.zk.zk.session_credentials()
        if credentials is None:
            return
        try:
            await trio.to_thread.run_sync(write_credentials, self.session_file, credentials)
        except OSError as exc:
            log.warning("cannot save the ZooKeeper session in %s: %s", self.session_file, exc)

    async def controlled_shutdown(self) -> bool:
        """Ask the active controller to move leadership off this broker; True once it
        leads no replicated partition (Kafka's KafkaServer.controlledShutdown)."""
        config = self.config
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
            if remaining is not None and not await self._a_replica_could_take_over(remaining):
                # Retrying cannot help: no other replica of what this broker still leads
                # is alive to take it (the last brokers of a cluster that is stopping).
                log.info("controlled shutdown: no other replica is alive to take leadership")
                return False
        return False

    async def _a_replica_could_take_over(
        self, remaining: list[bodies.ControlledShutdownResponseRemainingPartition]
    ) -> bool:
        """Is another replica of one of the ``remaining`` partitions on a live broker?
        (Only then can a retry move its leadership; unknown answers yes.)"""
        try:
            brokers = await self.zk.get_live_brokers()
            others = set(brokers) - {self.config.broker_id}
            if not others:
                return False
            topics = {p["topic_name"] for p in remaining}
            assignments = await self.zk.get_assignments(topics)
        except ZkError:
            return True
        for p in remaining:
            assignment = assignments.get(p["topic_name"])
            if assignment is None:
                continue
            if others.intersection(assignment.partitions.get(p["partition_index"], ())):
                return True
        return False

    async def _ask_controller_to_shut_us_down(
        self,
    ) -> list[bodies.ControlledShutdownResponseRemainingPartition] | None:
        controller_id = await self.zk.get_controller_id()
        brokers = await self.zk.get_live_brokers()
        if controller_id is None or controller_id not in brokers:
            return None
        target = brokers[controller_id]
        async with Connection(
            target.host,
            target.port,
            client_id="controlled-shutdown",
            security=self.security,
        ) as conn:
            response = await conn.request(
                ApiKey.CONTROLLED_SHUTDOWN,
                {"broker_id": self.config.broker_id, "broker_epoch": self.fence.broker_epoch},
            )
        if response["error_code"]:
            return None
        # The connection hands back untyped decoded bodies: this is the declared shape.
        remaining: list[bodies.ControlledShutdownResponseRemainingPartition] = response[
            "remaining_partitions"
        ]
        return remaining

"""The broker process: wires config, logs, replica manager, APIs and the server.

Start-up order (Kafka's KafkaServer.startup):

1. load every log in ``log.dirs`` (recovering after an unclean stop) - in a thread;
2. with ``zookeeper.connect``: open the ZooKeeper session; every component that keeps
   state in ZooKeeper (ISR changes, topic and broker configs, log-dir failures, topic
   creation) is constructed with it, standalone with None;
   the broker's identity key is read from its first log dir, or made there
   (broker/security/identity_key.py): its connections to other brokers prove its id with it;
3. build its parts (the replica manager, the handlers, the listeners) into one frozen
   ``BrokerParts`` (broker/parts.py); bind the listener (port 0 picks a free port) -
   and, with ``kafka.listeners``, the listener speaking Kafka's own protocol
   (broker/network/kafka_codec.py) through the same dispatcher - and publish this
   broker in its own metadata cache, so a standalone broker answers Metadata with its
   address;
4. start the periodic work: HW checkpoints (replica manager), retention and the
   recovery-point / log-start checkpoints (broker/logdirs/log_maintenance.py), and the
   Prometheus endpoint when ``metrics.port`` is set (broker/metrics.py);
5. (before the listeners serve) start the broker services it was given (node/ passes
   the coordinators): they read ``broker.parts``, register their handlers with the
   dispatcher and see every LeaderAndIsr the replica manager applies;
6. in cluster mode, join the cluster (broker/cluster_member.py): register in ZooKeeper
   and start the session services the broker was given (node/ passes the controller
   candidate).

Stop: ``await broker.stop()`` (the CLI's SIGTERM / SIGINT) first asks the controller to
move leadership away (controlled shutdown, while this broker still serves so it can
receive the controller's LeaderAndIsr / StopReplica), then cancels ``run``. Plain
cancellation of ``run`` skips that step. Either way - shielded from the cancellation -
the HW checkpoint is written and the log manager flushes every log, writes its
checkpoints and the ``.kafka_cleanshutdown`` marker.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import logging
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any, Protocol

import trio

from minibroker.broker.admin.admin_manager import AdminManager
from minibroker.broker.admin.broker_configs import BrokerConfigs
from minibroker.broker.admin.client_quota_apis import ClientQuotaApis
from minibroker.broker.admin.create_partitions import CreatePartitions
from minibroker.broker.admin.delete_records import DeleteRecords
from minibroker.broker.admin.describe_producers import DescribeProducersApi
from minibroker.broker.admin.incremental_configs import IncrementalAlterConfigs
from minibroker.broker.admin.scram_apis import ScramApis
from minibroker.broker.admin.topic_configs import TopicConfigs
from minibroker.broker.apis import KafkaApis
from minibroker.broker.cluster.metadata_cache import MetadataCache
from minibroker.broker.cluster.producer_ids import install_init_producer_id
from minibroker.broker.cluster_member import ClusterMembership, SessionService
from minibroker.broker.config.broker_config import BrokerConfig
from minibroker.broker.logdirs.corruption import CorruptReplicas, Scrubber
from minibroker.broker.logdirs.log_cleaner import CleanerCollector, LogCleaner
from minibroker.broker.logdirs.log_dir_mover import LogDirMover
from minibroker.broker.logdirs.log_dirs import LogDirApis, LogDirFailures
from minibroker.broker.logdirs.log_maintenance import LogMaintenance
from minibroker.broker.metrics import BrokerMetrics, CorruptionCollector, MetricsServer
from minibroker.broker.metrics_state import BrokerStateCollector, PartitionCollector
from minibroker.broker.network.connection_limits import (
    ConnectionLimits,
    CreationRate,
    parse_overrides,
)
from minibroker.broker.network.kafka_codec import KafkaCodec
from minibroker.broker.network.queued_bytes import QueuedBytes, queued_max_bytes
from minibroker.broker.network.request_codec import MsgpackCodec
from minibroker.broker.network.server import BrokerServer, idle_timeout_seconds
from minibroker.broker.network.server_metrics import ServerLimitsCollector
from minibroker.broker.options import PRODUCTION, BrokerOptions
from minibroker.broker.parts import BrokerParts
from minibroker.broker.quotas.client_quotas import ClientQuotaCollector, ClientQuotas
from minibroker.broker.quotas.replication_quota import ReplicationQuotas
from minibroker.broker.replication.controller_apis import ControllerRequestApis
from minibroker.broker.replication.hosted_replicas import HostedReplicas, to_log_config
from minibroker.broker.replication.replica_fetcher import ReplicaFetcherManager
from minibroker.broker.replication.replica_manager import ReplicaManager
from minibroker.broker.replication.txn_markers import WriteTxnMarkersApi
from minibroker.broker.replication.txn_verification import TxnVerification
from minibroker.broker.requests.dispatcher import RequestDispatcher
from minibroker.broker.requests.request_caps import RequestCaps
from minibroker.broker.security.acl_apis import AclApis
from minibroker.broker.security.acl_sync import AclSync
from minibroker.broker.security.auth_failures import AuthFailureLimiter
from minibroker.broker.security.authorization import RequestAuthorization
from minibroker.broker.security.authorization_rules import AuthorizationContext
from minibroker.broker.security.authorizer import (
    AclAuthorizer,
    AuthorizerCollector,
    parse_super_users,
)
from minibroker.broker.security.controller_fence import ControllerFence
from minibroker.broker.security.credentials import CredentialCache
from minibroker.broker.security.identity_key import BrokerKey
from minibroker.broker.security.peer_identity import PeerProofs
from minibroker.broker.security.sasl_gate import SaslListener, install_sasl_after_login
from minibroker.broker.security.security import (
    ListenerSecurity,
    inter_broker_security,
    listener_security,
)
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.storage.log_config import Clock, system_clock
from minibroker.storage.log_manager import LogManager
from minibroker.zk.client import open_zk_client
from minibroker.zk.data import KafkaZkClient
from minibroker.zk.values import KAFKA_LISTENER

log = logging.getLogger(__name__)

TOPICS_READY_POLL_S = 0.02
"""How often CreateTopics looks at the local metadata cache while waiting for a new
topic's UpdateMetadata; the cache has no change notification to wait on."""


class BrokerService(Protocol):
    """A component that lives as long as the broker serves, built on its parts (node/
    passes the group coordinator, which broker/ must not import): started before the
    listeners serve and the broker joins the cluster, after the replica manager exists."""

    async def __call__(
        self, broker: Broker, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None: ...


class Broker:
    """One broker; ``await nursery.start(broker.run)`` returns once it serves requests.

    A cluster member is normally run by node.Node, which adds the controller candidate
    (a session service); a Broker run alone registers but never becomes controller.
    """

    def __init__(
        self,
        config: BrokerConfig,
        *,
        clock: Clock = system_clock,
        session_services: Sequence[SessionService] = (),
        services: Sequence[BrokerService] = (),
        options: BrokerOptions = PRODUCTION,
    ) -> None:
        """``session_services`` run on the ZooKeeper session while the broker is a
        cluster member (ignored standalone); ``services`` while the broker serves;
        ``options`` are the benchmarks' and crash tests' switches."""
        self.config = config
        self.clock = clock
        self.options = options
        self.credentials = CredentialCache()
        """SCRAM users (from ZooKeeper) that SASL listeners check logins against."""
        self.listener_security = listener_security(config, config.listener_name)
        self.kafka_listener_security = (
            listener_security(config, KAFKA_LISTENER) if config.kafka_listeners else None
        )
        self.uses_sasl = self.listener_security.uses_sasl or (
            self.kafka_listener_security is not None and self.kafka_listener_security.uses_sasl
        )
        self.client_quotas = ClientQuotas(
            window_num=config.quota_window_num, window_s=config.quota_window_size_seconds
        )
        self.quota_apis = ClientQuotaApis(self.client_quotas)
        session_services = (self.quota_apis.run, *session_services)
        if self.uses_sasl:
            session_services = (self.credentials.run, *session_services)
        self.session_services = session_services
        self.services = services
        self.metadata_cache = MetadataCache(config.broker_id)
        self.metrics = BrokerMetrics(request_counters=options.request_metrics)
        self.dispatcher = RequestDispatcher(
            self.metrics, RequestCaps(config.request_max_partitions)
        )
        # One budget for every listener's queued request and response bytes.
        self.queued_bytes = QueuedBytes(queued_max_bytes(config.queued_max_request_bytes))
        # One connection budget for every listener (file descriptors are the broker's).
        self.connection_limits = ConnectionLimits(
            max_connections=config.max_connections,
            max_per_ip=config.max_connections_per_ip,
            overrides=parse_overrides(config.max_connections_per_ip_overrides),
        )
        self.auth_failures = AuthFailureLimiter(
            delay_s=config.connection_failed_authentication_delay_ms / 1000,
            rate_per_s=config.connection_failed_authentication_rate_per_ip,
        )
        self._parts: BrokerParts | None = None
        self._log_manager: LogManager | None = None  # opened first: closed at any stop
        self.metrics_server: MetricsServer | None = None  # started while serving
        self.membership: ClusterMembership | None = None  # joined while serving
        self.stopped = trio.Event()
        self._cancel_scope: trio.CancelScope | None = None
        self._crashing = False
        # Registered last: prometheus_client collects once at registration.
        self.metrics.registry.register(
            ServerLimitsCollector(self.queued_bytes, self._listeners, self.auth_failures)
        )

    @property
    def parts(self) -> BrokerParts:
        """What ``run`` built before serving (RuntimeError before that)."""
        if self._parts is None:
            raise RuntimeError("the broker has not started")
        return self._parts

    @property
    def started(self) -> bool:
        """Whether ``parts`` are built."""
        return self._parts is not None

    def _listeners(self) -> list[tuple[str, BrokerServer]]:
        """The servers listening, by listener name (for the metrics)."""
        if self._parts is None:
            return []
        named = [
            (self.config.listener_name, self._parts.server),
            (KAFKA_LISTENER, self._parts.kafka_server),
        ]
        return [(name, server) for name, server in named if server is not None]

    @property
    def port(self) -> int:
        """The bound port (after start-up)."""
        return self.parts.server.port

    @property
    def address(self) -> tuple[str, int]:
        host, _ = self.config.advertised_address
        return host, self.port

    @property
    def kafka_address(self) -> tuple[str, int] | None:
        """The Kafka-protocol listener's advertised (host, port), None without one."""
        advertised = self.config.kafka_advertised_address
        kafka_server = None if self._parts is None else self._parts.kafka_server
        if advertised is None or kafka_server is None:
            return None
        host, port = advertised
        return host, port or kafka_server.port

    async def run(self, *, task_status: trio.TaskStatus[Broker] = trio.TASK_STATUS_IGNORED) -> None:
        log_manager = await trio.to_thread.run_sync(self._open_log_manager)
        self._log_manager = log_manager
        identity = None
        if self.config.zookeeper_connect:  # with the log dirs locked: ours alone
            identity = await trio.to_thread.run_sync(
                BrokerKey.load_or_create, self.config.broker_id, self.config.log_dirs[0]
            )
        try:
            async with self._zookeeper_session() as zk:
                await self._serve(log_manager, identity, zk, task_status)
        finally:
            gc.unfreeze()  # what start-up froze may now become garbage
            with trio.CancelScope(shield=True):
                await self._shutdown()

    @contextlib.asynccontextmanager
    async def _zookeeper_session(self) -> AsyncIterator[KafkaZkClient | None]:
        """The ZooKeeper session of a cluster member (open for the broker's lifetime;
        kazoo replaces an expired session by itself); None standalone."""
        config = self.config
        if not config.zookeeper_connect:
            yield None
            return
        connect_ms = config.zookeeper_connection_timeout_ms or config.zookeeper_session_timeout_ms
        async with open_zk_client(
            config.zookeeper_connect,
            session_timeout=config.zookeeper_session_timeout_ms / 1000,
            connect_timeout=connect_ms / 1000,
        ) as client:
            yield KafkaZkClient(client)

    async def _serve(
        self,
        log_manager: LogManager,
        identity: BrokerKey | None,
        zk: KafkaZkClient | None,
        task_status: trio.TaskStatus[Broker],
    ) -> None:
        config = self.config
        security = inter_broker_security(config, identity)
        quotas = ReplicationQuotas.unlimited()
        fetchers = ReplicaFetcherManager(
            config, address_of=self._address_of, quota=quotas.follower, security=security
        )
        log_dir_failures = LogDirFailures(log_manager, config.broker_id, zk=zk)
        replicas = HostedReplicas(  # what the parts below work on
            config,
            log_manager,
            self.metadata_cache,
            clock=self.clock,
            metrics=self.metrics,
            fetcher=fetchers,
            replication_quotas=quotas,
            isr_store=zk,
            topic_config_loader=None if zk is None else zk.get_topic_config,
            on_log_dir_failure=log_dir_failures.failed,
            corruption=functools.partial(CorruptReplicas, zk=zk),
        )
        replica_manager = ReplicaManager(replicas)
        scrubber = Scrubber(config, replicas)
        log_cleaner = LogCleaner(config, replicas, stop_at=self.options.cleaner_stop_at)
        fence = ControllerFence(
            zk, config.broker_id, accept_any=config.standalone_accept_controller_requests
        )
        txn_verification = TxnVerification()
        apis = KafkaApis(
            replica_manager,
            self.metadata_cache,
            is_replica=fence.is_broker,
            txn_verification=txn_verification,
        )
        apis.install(self.dispatcher)
        DeleteRecords(replicas, self.metadata_cache).install(self.dispatcher)
        ControllerRequestApis(replica_manager, self.metadata_cache, fence).install(
            self.dispatcher, listener=config.inter_broker_listener
        )
        PeerProofs(zk, config.broker_id).install(
            self.dispatcher, listener=config.inter_broker_listener
        )
        install_sasl_after_login(self.dispatcher)
        log_dir_mover = LogDirMover(  # moves between this broker's dirs
            replicas,
            rate_bytes_per_s=config.replica_alter_log_dirs_io_max_bytes_per_second,
        )
        LogDirApis(replicas, log_dir_mover, dirty_ratio=log_cleaner.dirty_ratio).install(
            self.dispatcher
        )
        topic_configs = TopicConfigs(  # DescribeConfigs / AlterConfigs
            config,
            replicas,
            self.metadata_cache,
            zk=zk,
            broker_configs=BrokerConfigs(  # dynamic broker keys
                config,
                log_dir_mover,
                zk=zk,
                quotas=quotas,
                cleaner=log_cleaner,
                on_topic_defaults=replicas.update_topic_defaults,
            ),
        )
        topic_configs.install(self.dispatcher)
        IncrementalAlterConfigs(topic_configs, zk=zk).install(self.dispatcher)
        # Idempotent producers' ids: blocks from ZooKeeper, or the log dirs standalone.
        producer_ids = install_init_producer_id(
            self.dispatcher, config.broker_id, config.log_dirs, zk
        )
        txn_markers = WriteTxnMarkersApi(replica_manager, clock=self.clock)
        txn_markers.install(self.dispatcher)
        DescribeProducersApi(replicas).install(self.dispatcher)
        authorizer, acl_sync = self._install_authorizer(zk)
        admin_manager = None
        if zk is not None:
            admin_manager = AdminManager(
                zk,
                num_partitions=config.num_partitions,
                default_replication_factor=config.default_replication_factor,
                delete_topic_enable=config.delete_topic_enable,
                topics_ready=self._topics_ready,
                validate_config=topic_configs.validate,
                topic_id_of=self.metadata_cache.topic_id,
                topic_named_by=self.metadata_cache.topic_named_by,
            )
            admin_manager.install(self.dispatcher)
            CreatePartitions(
                zk, self._partitions_ready, max_new_partitions=config.request_max_partitions
            ).install(self.dispatcher)
        host, port = config.listen_address
        server = BrokerServer(
            MsgpackCodec(self.dispatcher, listener=config.listener_name),
            host=host,
            port=port,
            max_frame_bytes=config.socket_request_max_bytes,
            idle_timeout_s=idle_timeout_seconds(config.connections_max_idle_ms),
            request_receive_timeout_s=config.request_receive_timeout_ms / 1000,
            queued_bytes=self.queued_bytes,
            **self._security_of(self.listener_security),
        )
        kafka_listen = config.kafka_listen_address
        kafka_server = None
        if kafka_listen is not None:
            kafka_server = BrokerServer(
                KafkaCodec(self.dispatcher),
                host=kafka_listen[0],
                port=kafka_listen[1],
                max_frame_bytes=config.socket_request_max_bytes,
                idle_timeout_s=idle_timeout_seconds(config.connections_max_idle_ms),
                request_receive_timeout_s=config.request_receive_timeout_ms / 1000,
                queued_bytes=self.queued_bytes,
                **self._security_of(self.kafka_listener_security, raw_tokens=True),
            )
        self._parts = BrokerParts(
            log_manager=log_manager,
            replica_manager=replica_manager,
            kafka_apis=apis,
            txn_markers=txn_markers,
            txn_verification=txn_verification,
            producer_ids=producer_ids,
            topic_configs=topic_configs,
            log_dir_mover=log_dir_mover,
            log_cleaner=log_cleaner,
            scrubber=scrubber,
            server=server,
            kafka_server=kafka_server,
            admin_manager=admin_manager,
            authorizer=authorizer,
            identity=identity,
            inter_broker_security=security,
        )
        self.metrics.registry.register(PartitionCollector(replicas))
        self.metrics.registry.register(CorruptionCollector(log_manager.corruption_stats))
        self.metrics.registry.register(CleanerCollector(log_cleaner))
        self.metrics.registry.register(
            BrokerStateCollector(replicas=replicas, server=server, log_manager=log_manager)
        )
        if acl_sync is not None:
            await acl_sync.load()  # the ACLs in force before any listener opens
        if zk is not None and self.uses_sasl:
            await self.credentials.load(zk)  # SASL listeners: users known before they open
        if zk is not None:
            await self.quota_apis.reload()  # quotas in force from the first request
        self.metrics.registry.register(ClientQuotaCollector(self.client_quotas))
        await server.listen()  # before the nursery: a bind error stays one error
        if kafka_server is not None:
            await kafka_server.listen()
        async with trio.open_nursery() as nursery:
            self._cancel_scope = nursery.cancel_scope
            for service in self.services:  # their handlers are in place before anyone asks
                await nursery.start(service, self)
            await nursery.start(server.run)
            if kafka_server is not None:
                await nursery.start(kafka_server.run)
            adv_host, adv_port = config.advertised_address
            self.metadata_cache.register_self(
                adv_host, adv_port or server.port, config.broker_rack, self.kafka_address
            )
            await nursery.start(replica_manager.run)
            await nursery.start(fetchers.run)
            maintenance = LogMaintenance(config, log_manager, replicas.log_manager_lock)
            await nursery.start(maintenance.run)
            await nursery.start(log_dir_mover.run)
            await nursery.start(log_dir_failures.run, replicas.log_dir_failed)
            if replicas.corruption is not None:
                await nursery.start(replicas.corruption.run)
            await nursery.start(scrubber.run)
            if config.log_cleaner_enable:
                await nursery.start(log_cleaner.run)
            if acl_sync is not None:
                await nursery.start(acl_sync.run)
            if config.metrics_port >= 0:
                metrics_host = (
                    host if config.metrics_bind_address is None else config.metrics_bind_address
                )
                self.metrics_server = MetricsServer(
                    self.metrics, host=metrics_host, port=config.metrics_port
                )
                await nursery.start(self.metrics_server.run)
            if zk is not None:
                self.membership = ClusterMembership(
                    config,
                    zk,
                    self.metadata_cache,
                    topic_configs,
                    fence,
                    address=self.address,
                    kafka_address=self.kafka_address,
                    services=self.session_services,
                    identity=identity,
                    security=security,
                )
                await nursery.start(self.membership.run)
                if admin_manager is not None and config.auto_create_topics_enable:
                    await nursery.start(apis.topic_auto_creator.run, admin_manager.create_topics)
            log.info(
                "broker %d serving on port %d (log dirs %s)",
                config.broker_id,
                server.port,
                ",".join(config.log_dirs),
            )
            # What start-up built (every log's segments, indexes, partitions) lives as
            # long as the broker: out of the collector's sight, a full collection no
            # longer walks it (one stalled every client with thousands of partitions:
            # docs/performance.md, "Figures behind the code").
            gc.collect()
            gc.freeze()
            task_status.started(self)

    def _security_of(
        self, security: ListenerSecurity | None, *, raw_tokens: bool = False
    ) -> dict[str, Any]:
        """BrokerServer's TLS, SASL and connection-limit arguments for a listener of
        ``security``; ``raw_tokens``: the Kafka listener's (SaslHandshake v0, sessions)."""
        if security is None:
            return {
                "limits": self.connection_limits,
                "creation_rate": CreationRate(self.config.max_connection_creation_rate),
            }
        sasl = None
        if security.uses_sasl:
            sasl = SaslListener(
                security.name,
                security.mechanisms,
                self.credentials.lookup,
                raw_tokens=raw_tokens,
                limiter=self.auth_failures,
                # Sessions end on the Kafka listener only: minibroker's own clients and
                # brokers (the msgpack listener) do not re-authenticate.
                max_reauth_ms=self.config.connections_max_reauth_ms if raw_tokens else 0,
            )
        return {
            "ssl_context": security.ssl_context,
            "ssl_handshake_timeout_s": security.handshake_timeout_s,
            "sasl": sasl,
            "limits": self.connection_limits,
            "creation_rate": CreationRate(self.config.max_connection_creation_rate),
        }

    def _install_authorizer(
        self, zk: KafkaZkClient | None
    ) -> tuple[AclAuthorizer | None, AclSync | None]:
        """With ``authorizer.class.name``: every request goes through the ACL table
        (broker/security/authorization.py); returns the authorizer and, in cluster mode,
        what loads the ACLs from ZooKeeper (before any listener opens) and keeps them
        current. The ACL APIs are served either way (SECURITY_DISABLED without an
        authorizer)."""
        config = self.config
        authorizer = None
        if config.authorizer_class_name:
            authorizer = AclAuthorizer(
                super_users=parse_super_users(config.super_users),
                allow_everyone_if_no_acl_found=config.allow_everyone_if_no_acl_found,
            )
            self.dispatcher.authorization = RequestAuthorization(
                AuthorizationContext(
                    authorizer,
                    self.metadata_cache,
                    auto_create_topics=config.auto_create_topics_enable,
                )
            )
            self.metrics.registry.register(AuthorizerCollector(authorizer))
        AclApis(authorizer, None if zk is None else zk.zk).install(self.dispatcher)
        ScramApis(zk, self.credentials).install(self.dispatcher)
        self.quota_apis.zk = zk
        self.quota_apis.install(self.dispatcher)
        if authorizer is None or zk is None:
            return authorizer, None
        return authorizer, AclSync(authorizer, zk.zk, clock_ms=self.clock)

    async def stop(self) -> None:
        """Controlled shutdown (cluster mode, if enabled), then stop ``run`` cleanly."""
        member = self.membership
        if member is not None and self.config.controlled_shutdown_enable:
            try:
                moved = await member.controlled_shutdown()
            except Exception as exc:  # the stop must go on whatever the cluster says
                log.warning("controlled shutdown failed: %r", exc)
            else:
                if not moved:
                    log.warning("controlled shutdown did not complete; stopping anyway")
        if self._cancel_scope is not None:
            self._cancel_scope.cancel()
        await self.stopped.wait()

    async def crash(self) -> None:
        """Test hook: stop as kill -9 would leave the files - no flush, no checkpoints,
        no clean-shutdown marker (open files are closed so the dirs can be reopened)."""
        self._crashing = True
        if self._cancel_scope is not None:
            self._cancel_scope.cancel()
        await self.stopped.wait()

    async def _topics_ready(self, topics: Iterable[str]) -> None:
        """Returns once this broker's metadata cache knows every one of ``topics``."""
        pending = set(topics)
        while pending:
            pending = {t for t in pending if not self.metadata_cache.contains(t)}
            if pending:
                await trio.sleep(TOPICS_READY_POLL_S)

    async def _partitions_ready(self, topic: str, count: int) -> None:
        """Returns once this broker's metadata cache shows a leader for each of
        ``topic``'s partitions 0..count-1 (CreatePartitions waits for it)."""
        pending = set(range(count))
        while pending:
            for partition in list(pending):
                info = self.metadata_cache.partition(TopicPartition(topic, partition))
                if info is not None and info.leader >= 0:
                    pending.discard(partition)
            if pending:
                await trio.sleep(TOPICS_READY_POLL_S)

    def _address_of(self, broker_id: int) -> tuple[str, int] | None:
        info = self.metadata_cache.broker(broker_id)
        return None if info is None else (info.host, info.port)

    def _open_log_manager(self) -> LogManager:
        config = self.config
        expiration = config.producer_id_expiration_ms
        return LogManager(
            config.log_dirs,
            to_log_config(config.topic_config(), producer_id_expiration_ms=expiration),
            topic_config=lambda topic: to_log_config(
                config.topic_config(), producer_id_expiration_ms=expiration
            ),
            clock=self.clock,
        )

    async def _shutdown(self) -> None:
        replica_manager = None if self._parts is None else self._parts.replica_manager
        log_manager = self._log_manager
        if self._crashing:
            if replica_manager is not None:
                replica_manager.shutdown()
            if log_manager is not None:
                log_manager.abandon()
            self.stopped.set()
            return
        if replica_manager is not None:
            replica_manager.shutdown()
            try:
                await replica_manager.checkpoint_high_watermarks()
            except OSError as exc:
                log.error("cannot write the HW checkpoint at shutdown: %s", exc)
        if log_manager is not None:
            await trio.to_thread.run_sync(log_manager.close)
        log.info("broker %d stopped cleanly", self.config.broker_id)
        self.stopped.set()

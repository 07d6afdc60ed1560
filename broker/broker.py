"""The broker process: wires config, logs, replica manager, APIs and the server.

Start-up order (Kafka's KafkaServer.startup, minus what later issues add):

1. load every log in ``log.dirs`` (recovering after an unclean stop) - in a thread;
2. bind the listener (port 0 picks a free port) and publish this broker in its own
   metadata cache, so a standalone broker answers Metadata with its address;
3. start the periodic work: HW checkpoints (replica manager), retention and the
   recovery-point / log-start checkpoints (broker/log_maintenance.py), and the
   Prometheus endpoint when ``metrics.port`` is set (broker/metrics.py);
4. with ``zookeeper.connect``: register in ZooKeeper and run the controller candidate
   (the controller engineer's ``controller`` package, hooked in ``_run_cluster_member``).

Stop: ``await broker.stop()`` (the CLI's SIGTERM / SIGINT) first asks the controller to
move leadership away (controlled shutdown, while this broker still serves so it can
receive the controller's LeaderAndIsr / StopReplica), then cancels ``run``. Plain
cancellation of ``run`` skips that step. Either way - shielded from the cancellation -
the HW checkpoint is written and the log manager flushes every log, writes its
checkpoints and the ``.kafka_cleanshutdown`` marker.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

import trio

from minibroker.broker.apis import KafkaApis
from minibroker.broker.broker_configs import BrokerConfigs
from minibroker.broker.config import BrokerConfig
from minibroker.broker.log_dir_mover import LogDirMover
from minibroker.broker.log_dirs import LogDirApis, LogDirFailures
from minibroker.broker.log_maintenance import LogMaintenance
from minibroker.broker.metadata_cache import MetadataCache
from minibroker.broker.metrics import BrokerMetrics, MetricsServer
from minibroker.broker.metrics_state import BrokerStateCollector
from minibroker.broker.producer_ids import install_init_producer_id
from minibroker.broker.replica_fetcher import ReplicaFetcherManager
from minibroker.broker.replica_manager import ReplicaManager, to_log_config
from minibroker.broker.server import BrokerServer, idle_timeout_seconds
from minibroker.broker.topic_configs import TopicConfigs
from minibroker.storage.log_config import Clock, system_clock
from minibroker.storage.log_manager import LogManager

log = logging.getLogger(__name__)

CLUSTER_REJOIN_BACKOFF_S = 2.0
"""Pause before rejoining the cluster after the membership task failed (ZooKeeper down)."""


class Broker:
    """One broker; ``await nursery.start(broker.run)`` returns once it serves requests."""

    def __init__(self, config: BrokerConfig, *, clock: Clock = system_clock) -> None:
        self.config = config
        self.clock = clock
        self.metadata_cache = MetadataCache(config.broker_id)
        self.log_manager: LogManager | None = None
        self.replica_manager: ReplicaManager | None = None
        self.apis: KafkaApis | None = None
        self.log_dir_mover: LogDirMover | None = None
        self.server: BrokerServer | None = None
        self.metrics = BrokerMetrics()
        self.metrics.registry.register(BrokerStateCollector(self))  # reads self at scrape time
        self.metrics_server: MetricsServer | None = None
        self.cluster_member: Any = None  # set by controller.broker_hooks in cluster mode
        self.topic_configs: TopicConfigs | None = None
        self.stopped = trio.Event()
        self._cancel_scope: trio.CancelScope | None = None
        self._crashing = False

    @property
    def port(self) -> int:
        """The bound port (after start-up)."""
        assert self.server is not None, "broker not started"
        return self.server.port

    @property
    def address(self) -> tuple[str, int]:
        host, _ = self.config.advertised_address
        return host, self.port

    async def run(self, *, task_status: trio.TaskStatus[Broker] = trio.TASK_STATUS_IGNORED) -> None:
        config = self.config
        log_manager = await trio.to_thread.run_sync(self._open_log_manager)
        self.log_manager = log_manager
        try:
            replica_manager = ReplicaManager(
                config, log_manager, self.metadata_cache, clock=self.clock, metrics=self.metrics
            )
            self.replica_manager = replica_manager
            fetchers = ReplicaFetcherManager(
                config,
                address_of=self._address_of,
                quota=replica_manager.replication_quotas.follower,
            )
            replica_manager.fetcher = fetchers
            # Cluster mode: ISR changes and topic overrides go through ZooKeeper.
            replica_manager.isr_store = lambda: getattr(self.cluster_member, "data", None)
            replica_manager.topic_config_loader = self._topic_config
            self.apis = KafkaApis(replica_manager, self.metadata_cache)
            self.log_dir_mover = LogDirMover(  # issue 6: moves between this broker's dirs
                replica_manager,
                rate_bytes_per_s=config.replica_alter_log_dirs_io_max_bytes_per_second,
            )
            LogDirApis(replica_manager, self.log_dir_mover).install(self.apis)
            self.topic_configs = TopicConfigs(  # DescribeConfigs / AlterConfigs
                config,
                replica_manager,
                self.metadata_cache,
                zk_data=lambda: getattr(self.cluster_member, "data", None),
            )
            self.topic_configs.broker_configs = BrokerConfigs(  # dynamic throttles
                config,
                self.log_dir_mover,
                zk_data=lambda: getattr(self.cluster_member, "data", None),
                quotas=replica_manager.replication_quotas,
            )
            self.topic_configs.install(self.apis)
            install_init_producer_id(  # idempotent producers' ids (ZooKeeper blocks)
                self.apis,
                config.broker_id,
                config.log_dirs,
                (lambda: getattr(self.cluster_member, "data", None))
                if config.zookeeper_connect
                else None,
            )
            log_dir_failures = LogDirFailures(
                replica_manager, zk_data=lambda: getattr(self.cluster_member, "data", None)
            )
            replica_manager.on_log_dir_failure = log_dir_failures.failed
            host, port = config.listen_address
            self.server = BrokerServer(
                self.apis,
                host=host,
                port=port,
                max_frame_bytes=config.socket_request_max_bytes,
                idle_timeout_s=idle_timeout_seconds(config.connections_max_idle_ms),
            )
            self.metrics.watch(replica_manager)
            await self.server.listen()  # before the nursery: a bind error stays one error
            async with trio.open_nursery() as nursery:
                self._cancel_scope = nursery.cancel_scope
                await nursery.start(self.server.run)
                adv_host, adv_port = config.advertised_address
                self.metadata_cache.register_self(
                    adv_host, adv_port or self.server.port, config.broker_rack
                )
                await nursery.start(replica_manager.run)
                await nursery.start(fetchers.run)
                maintenance = LogMaintenance(config, log_manager, replica_manager.log_manager_lock)
                await nursery.start(maintenance.run)
                await nursery.start(self.log_dir_mover.run)
                await nursery.start(log_dir_failures.run)
                if config.metrics_port >= 0:
                    self.metrics_server = MetricsServer(
                        self.metrics, host=host, port=config.metrics_port
                    )
                    await nursery.start(self.metrics_server.run)
                if config.zookeeper_connect:
                    await nursery.start(self._run_cluster_member)
                log.info(
                    "broker %d serving on port %d (log dirs %s)",
                    config.broker_id,
                    self.server.port,
                    ",".join(config.log_dirs),
                )
                task_status.started(self)
        finally:
            with trio.CancelScope(shield=True):
                await self._shutdown()

    async def stop(self) -> None:
        """Controlled shutdown (cluster mode, if enabled), then stop ``run`` cleanly."""
        member = self.cluster_member
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

    async def _topic_config(self, topic: str) -> dict[str, str]:
        """A topic's overrides from /config/topics/T ({} standalone)."""
        data = getattr(self.cluster_member, "data", None)
        if data is None:
            return {}
        config: dict[str, str] = await data.get_topic_config(topic)
        return config

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

    async def _run_cluster_member(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """ZooKeeper registration and the controller candidate (issue 4 hooks in here).

        The controller package is imported lazily so a standalone broker never needs
        kazoo or ZooKeeper. Failing to join at start-up stops the broker; failing
        later (the membership task dies) must not: the broker keeps serving what it
        leads, logs the failure and rejoins after ``CLUSTER_REJOIN_BACKOFF_S``.
        """
        from minibroker.controller import broker_hooks

        hook: Any = broker_hooks
        joined = False
        while True:
            try:
                async with trio.open_nursery() as nursery:
                    await nursery.start(partial(hook.run_cluster_member, self))
                    if not joined:
                        joined = True
                        task_status.started()
            except Exception as exc:
                if not joined:
                    raise
                log.error("cluster membership failed; rejoining: %r", exc, exc_info=exc)
            else:
                log.warning("cluster membership ended; rejoining")
            self.cluster_member = None
            await trio.sleep(CLUSTER_REJOIN_BACKOFF_S)

    async def _shutdown(self) -> None:
        if self._crashing:
            if self.replica_manager is not None:
                self.replica_manager.shutdown()
            if self.log_manager is not None:
                self.log_manager.abandon()
            self.stopped.set()
            return
        if self.replica_manager is not None:
            self.replica_manager.shutdown()
            try:
                await self.replica_manager.checkpoint_high_watermarks()
            except OSError as exc:
                log.error("cannot write the HW checkpoint at shutdown: %s", exc)
        if self.log_manager is not None:
            await trio.to_thread.run_sync(self.log_manager.close)
        log.info("broker %d stopped cleanly", self.config.broker_id)
        self.stopped.set()

"""Scrape-time gauges of a broker's state, named as the JMX exporter names Kafka's MBeans.

Nothing here runs on the request path: ``BrokerStateCollector.collect`` reads the
broker's structures when Prometheus scrapes (a few hundred partitions cost well under a
millisecond), so these figures are free for produce and fetch. The traffic counters
(messages / bytes in and out, requests and their time) live in broker/metrics.py.

    kafka_server_replicamanager_underminisrpartitioncount   gauge  led partitions whose ISR
                                                            is smaller than the topic's
                                                            min.insync.replicas
    kafka_server_replicamanager_isrshrinks_total            counter (IsrManager.shrinks)
    kafka_server_replicamanager_isrexpands_total            counter (IsrManager.expands)
    kafka_server_delayedoperationpurgatory_purgatorysize    gauge  {delayedOperation=Produce|Fetch}
    kafka_server_socket_server_metrics_connection_count     untyped {listener, networkProcessor}
    kafka_server_replicafetchermanager_maxlag               gauge  {clientId="Replica"}
    kafka_log_logflushstats_logflushrateandtimems           summary (_count, _sum in ms)
    kafka_server_leaderreplication_byte_rate                gauge  throttled replication bytes/s
    kafka_server_followerreplication_byte_rate              gauge  (the quotas' window,
                                                            broker/quotas/replication_quota.py)
    kafka_server_leaderreplication_bytes_total              counter throttled bytes since
    kafka_server_followerreplication_bytes_total            counter start (sent / received)

The socket-server name keeps the JMX exporter's spelling of Kafka's
``socket-server-metrics`` type (dashes become underscores), which is what Kafka
dashboards query; Kafka has one acceptor and several network processors, minibroker one
Trio listener, reported as ``networkProcessor="0"``. It is untyped, as the JMX exporter
exports it by default: Prometheus's lint reserves a ``_count`` suffix for histograms and
summaries unless the metric is untyped. Label names keep the case of the MBean keys
they come from (``delayedOperation``, ``networkProcessor``, ``clientId``), as the JMX
exporter writes them by default, so dashboards built on Kafka's exporter match as they
are; Prometheus's lint (``promtool check metrics``) only warns about camelCase label
names.

The collectors are given the broker's components when ``Broker.run`` has built them;
before that the state families are absent. Fetcher lag needs fetch states that record a
``lag``; without them the family is left out rather than reported as a misleading 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    SummaryMetricFamily,
    UnknownMetricFamily,
)
from prometheus_client.registry import Collector

from minibroker.broker.network.server import BrokerServer
from minibroker.broker.quotas.replication_quota import ReplicationQuotas
from minibroker.broker.replication.hosted_replicas import HostedReplicas
from minibroker.broker.replication.isr import IsrManager
from minibroker.broker.replication.partition import Partition
from minibroker.storage.log_manager import LogManager

LISTENER = "PLAINTEXT"
"""Kafka's listener name for minibroker's one plaintext listener."""

FETCHER_CLIENT_ID = "Replica"
"""Kafka's clientId label of the replica fetcher manager's MBeans."""

REPLICA_MANAGER = "kafka_server_replicamanager_"
PURGATORY_SIZE = "kafka_server_delayedoperationpurgatory_purgatorysize"
CONNECTION_COUNT = "kafka_server_socket_server_metrics_connection_count"
FETCHER_MAX_LAG = "kafka_server_replicafetchermanager_maxlag"
LOG_FLUSH = "kafka_log_logflushstats_logflushrateandtimems"


def under_min_isr_count(partitions: Iterable[Partition]) -> int:
    """Led partitions whose ISR is below their topic's ``min.insync.replicas`` (Kafka's
    UnderMinIsrPartitionCount: acks=all produce to them fails)."""
    return sum(1 for p in partitions if p.is_leader and len(p.isr) < p.config.min_insync_replicas)


def _replication_quotas(quotas: ReplicationQuotas) -> Iterator[Metric]:
    """Kafka's LeaderReplication / FollowerReplication byte-rate, plus a byte count."""
    for side, quota in (("leader", quotas.leader), ("follower", quotas.follower)):
        prefix = f"kafka_server_{side}replication_"
        yield GaugeMetricFamily(
            prefix + "byte_rate", f"Throttled {side} replication bytes/s.", quota.measured_rate()
        )
        yield CounterMetricFamily(
            prefix + "bytes", f"Throttled {side} replication bytes.", quota.recorded_total
        )


class BrokerStateCollector(Collector):
    """Reads the broker's components at each scrape (a missing one is left out)."""

    def __init__(
        self,
        *,
        replicas: HostedReplicas | None,
        server: BrokerServer | None,
        log_manager: LogManager | None,
    ) -> None:
        self.replicas = replicas
        self.server = server
        self.log_manager = log_manager

    def collect(self) -> Iterator[Metric]:
        manager = self.replicas
        if manager is not None:
            partitions = list(manager.partitions.values())
            yield GaugeMetricFamily(
                REPLICA_MANAGER + "underminisrpartitioncount",
                "Led partitions whose ISR is smaller than min.insync.replicas.",
                under_min_isr_count(partitions),
            )
            yield from _isr_changes(manager.isr_manager)
            purgatory = GaugeMetricFamily(
                PURGATORY_SIZE,
                "Requests waiting in a purgatory, by delayed operation.",
                labels=["delayedOperation"],
            )
            purgatory.add_metric(["Produce"], manager.produce_waiters.watched)
            purgatory.add_metric(["Fetch"], manager.fetch_waiters.watched)
            yield purgatory
            yield from _replication_quotas(manager.replication_quotas)
            if manager.fetcher is not None:  # no replication: no figure, not a false 0
                yield _labelled_gauge(
                    FETCHER_MAX_LAG,
                    "Largest lag, in messages, of a partition this broker follows.",
                    {"clientId": FETCHER_CLIENT_ID},
                    manager.fetcher.max_lag(),
                )
        if self.server is not None:
            connections = UnknownMetricFamily(
                CONNECTION_COUNT,
                "Open client connections.",
                labels=["listener", "networkProcessor"],
            )
            connections.add_metric([LISTENER, "0"], self.server.connections)
            yield connections
        if self.log_manager is not None:
            stats = self.log_manager.flush_stats
            yield SummaryMetricFamily(
                LOG_FLUSH,
                "Log flushes (fsync) and the milliseconds they took.",
                count_value=int(stats.count),
                sum_value=float(stats.seconds) * 1000,
            )


def _isr_changes(isr_manager: IsrManager) -> Iterator[Metric]:
    yield CounterMetricFamily(
        REPLICA_MANAGER + "isrshrinks", "ISR shrinks of partitions led here.", isr_manager.shrinks
    )
    yield CounterMetricFamily(
        REPLICA_MANAGER + "isrexpands",
        "ISR expansions of partitions led here.",
        isr_manager.expands,
    )


def _labelled_gauge(
    name: str, documentation: str, labels: dict[str, str], value: float
) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, documentation, labels=list(labels))
    family.add_metric(list(labels.values()), value)
    return family


class PartitionCollector(Collector):
    """Per-partition gauges and the replica manager's partition counts."""

    def __init__(self, replicas: HostedReplicas) -> None:
        self.replicas = replicas

    def collect(self) -> Iterator[Metric]:
        partitions = list(self.replicas.partitions.values())
        leaders = [p for p in partitions if p.is_leader]
        under = sum(1 for p in leaders if len(p.isr) < len(p.assigned_replicas))
        prefix = "kafka_server_replicamanager_"
        yield GaugeMetricFamily(prefix + "partitioncount", "Partitions here.", len(partitions))
        yield GaugeMetricFamily(prefix + "leadercount", "Partitions led here.", len(leaders))
        yield GaugeMetricFamily(
            prefix + "underreplicatedpartitions", "Led partitions whose ISR < AR.", under
        )
        labels = ["topic", "partition"]
        size = GaugeMetricFamily("kafka_log_log_size", "Log size in bytes.", labels=labels)
        end = GaugeMetricFamily("kafka_log_log_logendoffset", "Log end offset.", labels=labels)
        start = GaugeMetricFamily("kafka_log_log_logstartoffset", "Log start.", labels=labels)
        hw = GaugeMetricFamily(
            "kafka_cluster_partition_highwatermark", "High watermark.", labels=labels
        )
        lso_lag = GaugeMetricFamily(
            "kafka_cluster_partition_laststableoffsetlag",
            "High watermark minus last stable offset (open transactions), led partitions.",
            labels=labels,
        )
        for p in partitions:
            key = [p.tp.topic, str(p.tp.partition)]
            size.add_metric(key, p.log.size)
            end.add_metric(key, p.log.log_end_offset)
            start.add_metric(key, p.log.log_start_offset)
            hw.add_metric(key, p.high_watermark)
            if p.is_leader:
                lso_lag.add_metric(key, p.high_watermark - p.last_stable_offset)
        yield from (size, end, start, hw, lso_lag)

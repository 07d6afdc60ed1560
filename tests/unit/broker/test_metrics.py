"""Broker metrics: Kafka's JMX-exporter names, scrape-time gauges, a lint-clean exposition.

The broker here is assembled without its server or network (a LogManager in tmp_path, a
ReplicaManager told what it leads the way LeaderAndIsr would), then scraped through its
own registry exactly as the /metrics endpoint does.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from minibroker.broker.apis import KafkaApis
from minibroker.broker.broker import Broker
from minibroker.broker.config.broker_config import BrokerConfig
from minibroker.broker.metrics import BrokerMetrics
from minibroker.broker.metrics_state import (
    BrokerStateCollector,
    PartitionCollector,
    under_min_isr_count,
)
from minibroker.broker.network.request_codec import MsgpackCodec
from minibroker.broker.network.server import BrokerServer
from minibroker.broker.options import BrokerOptions
from minibroker.broker.replication.controller_apis import ControllerRequestApis
from minibroker.broker.replication.hosted_replicas import HostedReplicas
from minibroker.broker.replication.partition import LeaderAndIsrPartition
from minibroker.broker.replication.replica_fetcher import ReplicaFetcherManager
from minibroker.broker.replication.replica_manager import ReplicaManager
from minibroker.broker.security.controller_fence import ControllerFence
from minibroker.node.cli import CLEANER_STOP_AT_ENV, METRICS_SWITCH_ENV, options_from
from minibroker.protocol.api import ApiKey, encode_request, latest_version
from minibroker.protocol.records import Record, encode_batch
from minibroker.protocol.topic_partition import TopicPartition
from tests.support.broker import broker_config, fetch_body
from tests.support.prometheus import promtool_problems

ME = 1
TP = TopicPartition("orders", 0)

# Families a Kafka dashboard built on the JMX exporter queries.
DASHBOARD_FAMILIES = {
    "kafka_server_brokertopicmetrics_messagesin",
    "kafka_server_brokertopicmetrics_bytesin",
    "kafka_server_brokertopicmetrics_bytesout",
    "kafka_network_requestmetrics_requests",
    "kafka_network_requestmetrics_totaltimems",
    "kafka_server_replicamanager_underreplicatedpartitions",
    "kafka_server_replicamanager_underminisrpartitioncount",
    "kafka_server_replicamanager_partitioncount",
    "kafka_server_replicamanager_leadercount",
    "kafka_server_delayedoperationpurgatory_purgatorysize",
    "kafka_log_log_size",
    "kafka_log_log_logstartoffset",
    "kafka_log_log_logendoffset",
    "kafka_server_socket_server_metrics_connection_count",
}

# Every label a broker may export: bounded by topics x partitions, never per client.
ALLOWED_LABELS = {
    "topic",
    "partition",
    "request",
    "delayedOperation",
    "listener",
    "networkProcessor",
    "clientId",
    "source",  # what found a corrupt batch: recovery, read or scrub
    "le",
    "quantile",
    "reason",  # why the broker closed connections: four values (server.CLOSE_REASONS)
}


def leader_state(
    isr: tuple[int, ...] = (ME,), replicas: tuple[int, ...] = (ME,)
) -> LeaderAndIsrPartition:
    return LeaderAndIsrPartition(
        controller_epoch=1,
        leader=ME,
        leader_epoch=0,
        isr=isr,
        zk_version=0,
        replicas=replicas,
        is_new=True,
    )


class StorageOnlyBroker(Broker):
    """A Broker never run: its storage and replica manager made by the fixture, no
    server, no network (so no ``parts``)."""

    replica_manager_of_test: ReplicaManager


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    """A Broker whose storage and replica manager exist, with no server and no network."""
    broker = StorageOnlyBroker(broker_config(tmp_path, min_insync_replicas=2))
    log_manager = broker._open_log_manager()
    manager = ReplicaManager(
        HostedReplicas(
            broker.config,
            log_manager,
            broker.metadata_cache,
            clock=broker.clock,
            metrics=broker.metrics,
        )
    )
    broker.replica_manager_of_test = manager
    server = BrokerServer(MsgpackCodec(broker.dispatcher))  # never listens
    registry = broker.metrics.registry  # the collectors Broker.run registers
    registry.register(PartitionCollector(manager.replicas))
    registry.register(
        BrokerStateCollector(replicas=manager.replicas, server=server, log_manager=log_manager)
    )
    try:
        yield broker
    finally:
        log_manager.close()


def manager_of(broker: Broker) -> ReplicaManager:
    assert isinstance(broker, StorageOnlyBroker)
    return broker.replica_manager_of_test


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


async def produce(broker: Broker, *values: bytes) -> None:
    batch = encode_batch([Record(v, timestamp=1) for v in values])
    [(_, result)] = manager_of(broker).append_records(1, [(TP, batch)])
    assert not isinstance(result, Exception), result


async def test_exposition_carries_the_names_kafka_dashboards_query(broker: Broker) -> None:
    await manager_of(broker).leadership.become_leader_or_follower(1, {TP: leader_state()})
    await produce(broker, b"a", b"b", b"c")
    families = {f.name for f in text_string_to_metric_families(broker.metrics.render().decode())}
    assert families >= DASHBOARD_FAMILIES


async def test_exposition_parses_and_promtool_finds_no_problems(broker: Broker) -> None:
    await manager_of(broker).leadership.become_leader_or_follower(1, {TP: leader_state()})
    await produce(broker, b"a")
    broker.metrics.record_request(ApiKey.PRODUCE, {}, time.perf_counter())
    text = broker.metrics.render()
    families = list(text_string_to_metric_families(text.decode()))
    labels = {name for f in families for s in f.samples for name in s.labels}
    assert labels <= ALLOWED_LABELS
    assert promtool_problems(text) == []


async def test_messages_in_counts_records_and_bytes_in_counts_batch_bytes(broker: Broker) -> None:
    await manager_of(broker).leadership.become_leader_or_follower(1, {TP: leader_state()})
    await produce(broker, b"a", b"b")
    await produce(broker, b"c")
    registry = broker.metrics.registry
    messages = "kafka_server_brokertopicmetrics_messagesin_total"
    assert sample(registry, messages, topic="orders") == 3
    bytes_in = sample(registry, "kafka_server_brokertopicmetrics_bytesin_total", topic="orders")
    assert bytes_in is not None and bytes_in > 3


async def test_fetches_are_named_by_who_asks_and_bytes_out_counts_consumers_only(
    broker: Broker,
) -> None:
    manager = manager_of(broker)
    await manager.leadership.become_leader_or_follower(
        1, {TP: leader_state(isr=(ME, 2), replicas=(ME, 2))}
    )
    await produce(broker, b"a", b"b", b"c")
    fence = ControllerFence(None, ME, accept_any=True)
    KafkaApis(manager, broker.metadata_cache).install(broker.dispatcher)
    ControllerRequestApis(manager, broker.metadata_cache, fence).install(broker.dispatcher)
    codec = MsgpackCodec(broker.dispatcher)

    def fetch(replica_id: int, offset: int) -> None:
        body = fetch_body(TP.topic, {TP.partition: offset}) | {"replica_id": replica_id}
        codec.handle(encode_request(ApiKey.FETCH, latest_version(ApiKey.FETCH), 1, "t", body))

    registry = broker.metrics.registry
    bytes_out = "kafka_server_brokertopicmetrics_bytesout_total"
    fetch(2, 0)  # the follower reads the three records: replication, not BytesOut
    fetch(2, 3)
    assert sample(registry, bytes_out, topic=TP.topic) == 0
    partition = manager.replicas.partitions[TP]
    partition.remote_replicas[2].log_end_offset = 3  # the follower has them: HW moves
    partition.maybe_increment_high_watermark()
    fetch(-1, 0)
    consumed = sample(registry, bytes_out, topic=TP.topic)
    assert consumed is not None and consumed > 0
    requests = "kafka_network_requestmetrics_requests_total"
    assert sample(registry, requests, request="FetchFollower") == 2
    assert sample(registry, requests, request="FetchConsumer") == 1
    assert sample(registry, requests, request="Fetch") is None


def test_the_metrics_switch_turns_request_path_counters_into_no_ops() -> None:
    metrics = BrokerMetrics(request_counters=False)
    metrics.record_append("t", 5, 500)
    metrics.record_fetch("t", 500)
    metrics.record_request(ApiKey.PRODUCE, {}, time.perf_counter())
    assert (metrics.topics, metrics.requests) == ({}, {})


async def test_a_leader_with_an_isr_below_min_insync_is_under_min_isr_and_under_replicated(
    broker: Broker,
) -> None:
    registry = broker.metrics.registry
    await manager_of(broker).leadership.become_leader_or_follower(
        1, {TP: leader_state(isr=(ME, 2), replicas=(ME, 2))}
    )
    assert sample(registry, "kafka_server_replicamanager_underminisrpartitioncount") == 0
    assert sample(registry, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    partition = manager_of(broker).replicas.partitions[TP]
    partition.isr = frozenset({ME})  # what an ISR shrink leaves behind
    assert under_min_isr_count([partition]) == 1
    assert sample(registry, "kafka_server_replicamanager_underminisrpartitioncount") == 1
    assert sample(registry, "kafka_server_replicamanager_underreplicatedpartitions") == 1


async def test_purgatory_size_counts_requests_parked_per_delayed_operation(
    broker: Broker,
) -> None:
    registry = broker.metrics.registry
    name = "kafka_server_delayedoperationpurgatory_purgatorysize"
    replicas = manager_of(broker).replicas
    fetches, produces = replicas.fetch_waiters, replicas.produce_waiters
    with fetches.watch([TP]), fetches.watch([TP]), produces.watch([TP]):
        assert sample(registry, name, delayedOperation="Fetch") == 2
        assert sample(registry, name, delayedOperation="Produce") == 1
    assert sample(registry, name, delayedOperation="Fetch") == 0
    assert sample(registry, name, delayedOperation="Produce") == 0


async def test_isr_shrinks_and_expands_are_read_from_the_isr_manager(broker: Broker) -> None:
    replicas = manager_of(broker).replicas
    collector = CollectorRegistry()
    collector.register(
        BrokerStateCollector(replicas=replicas, server=None, log_manager=replicas.log_manager)
    )
    assert sample(collector, "kafka_server_replicamanager_isrshrinks_total") == 0
    replicas.isr_manager = SimpleNamespace(shrinks=3, expands=2)  # type: ignore[assignment]
    assert sample(collector, "kafka_server_replicamanager_isrshrinks_total") == 3
    assert sample(collector, "kafka_server_replicamanager_isrexpands_total") == 2


def test_fetcher_max_lag_is_the_largest_lag_over_followed_partitions(tmp_path: Path) -> None:
    def fetcher(*lags: int) -> SimpleNamespace:
        return SimpleNamespace(states={i: SimpleNamespace(lag=lag) for i, lag in enumerate(lags)})

    config = BrokerConfig.from_properties(None, {"broker.id": "1", "log.dirs": str(tmp_path)})
    manager = ReplicaFetcherManager(config, address_of=lambda broker: None)
    assert manager.max_lag() == 0  # following nothing
    manager.fetchers = {(2, 0): fetcher(5, 40), (3, 0): fetcher(7)}  # type: ignore[dict-item]
    assert manager.max_lag() == 40


def test_log_flush_stats_become_a_summary_in_milliseconds() -> None:
    stats = SimpleNamespace(count=4, seconds=0.25)
    log_manager = SimpleNamespace(flush_stats=stats)
    registry = CollectorRegistry()
    registry.register(
        BrokerStateCollector(replicas=None, server=None, log_manager=log_manager)  # type: ignore[arg-type]
    )
    name = "kafka_log_logflushstats_logflushrateandtimems"
    assert sample(registry, name + "_count") == 4
    assert sample(registry, name + "_sum") == pytest.approx(250.0)


def test_state_gauges_are_left_out_before_the_broker_runs(tmp_path: Path) -> None:
    broker = Broker(broker_config(tmp_path))
    names = {family.name for family in broker.metrics.registry.collect()}
    assert not any(name.startswith("kafka_server_replicamanager_") for name in names)


def test_the_broker_command_reads_its_switches_from_the_environment_once() -> None:
    assert options_from({}) == BrokerOptions()
    switched = options_from({METRICS_SWITCH_ENV: "OFF", CLEANER_STOP_AT_ENV: "swap"})
    assert switched == BrokerOptions(request_metrics=False, cleaner_stop_at="swap")

"""A real Prometheus scraping a real 3-broker cluster (`minibroker dev up`) with the repo's
deploy/prometheus.yml: the figures Kafka dashboards read are right, seen through
Prometheus's own query API.

The cluster and the Prometheus server are shared by the module; the tests run in file
order (the second pauses a follower and resumes it before it ends).
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator

import pytest

from tests.support.cluster import LocalCluster
from tests.support.prometheus import PrometheusServer, metrics_ports

TOPIC = "metrics-e2e"
RECORDS = 1000
# A paused follower drops out of the ISR after this long (Kafka's default is 30 s).
LAG_TIME_MAX_MS = 3000
SEEN_TIMEOUT_S = 60.0  # a few 1 s scrapes, plus the ISR check period on a loaded machine

MESSAGES_IN = "sum(kafka_server_brokertopicmetrics_messagesin_total)"
ACTIVE_CONTROLLERS = "sum(kafka_controller_kafkacontroller_activecontrollercount)"
URP = "sum(kafka_server_replicamanager_underreplicatedpartitions)"
ISR_SHRINKS = "sum(kafka_server_replicamanager_isrshrinks_total)"
BROKERS_UP = 'count(up{job="minibroker"} == 1)'

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    data_dir = tmp_path_factory.mktemp("metrics-cluster")
    properties = (f"replica.lag.time.max.ms={LAG_TIME_MAX_MS}",)
    with LocalCluster(data_dir, brokers=3, properties=properties) as running:
        yield running


@pytest.fixture(scope="module")
def prometheus(
    cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PrometheusServer]:
    targets = [f"127.0.0.1:{port}" for _, port in sorted(metrics_ports(cluster).items())]
    with PrometheusServer(tmp_path_factory.mktemp("prometheus"), targets) as server:
        server.wait_for(BROKERS_UP, lambda v: v == 3, timeout=SEEN_TIMEOUT_S)
        yield server


def run_cli(cluster: LocalCluster, *args: str, stdin: bytes | None = None) -> str:
    done = cluster.cli(*args, stdin=stdin)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


def partition_zero(cluster: LocalCluster) -> dict[str, object]:
    described = json.loads(run_cli(cluster, "topic", "describe", TOPIC, "--format", "json"))
    [topic] = described
    row: dict[str, object] = topic["partitions"][0]
    return row


def test_prometheus_counts_every_produced_record_one_controller_and_no_urp(
    cluster: LocalCluster, prometheus: PrometheusServer
) -> None:
    run_cli(cluster, "topic", "create", TOPIC, "--partitions", "1", "--replication-factor", "3")
    lines = b"".join(b"record-%d\n" % i for i in range(RECORDS))
    run_cli(cluster, "produce", TOPIC, "--acks", "1", stdin=lines)

    assert prometheus.wait_for(MESSAGES_IN, lambda v: v == RECORDS, SEEN_TIMEOUT_S) == RECORDS
    assert prometheus.wait_for(ACTIVE_CONTROLLERS, lambda v: v == 1, SEEN_TIMEOUT_S) == 1
    assert prometheus.wait_for(URP, lambda v: v == 0, SEEN_TIMEOUT_S) == 0
    per_topic = prometheus.query(
        f'sum by (topic) (kafka_server_brokertopicmetrics_messagesin_total{{topic="{TOPIC}"}})'
    )
    assert [value for _, value in per_topic] == [RECORDS]
    end_offsets = prometheus.query(f'kafka_log_log_logendoffset{{topic="{TOPIC}"}}')
    assert end_offsets and max(value for _, value in end_offsets) == RECORDS


def test_a_paused_follower_makes_the_partition_under_replicated_and_shrinks_the_isr(
    cluster: LocalCluster, prometheus: PrometheusServer
) -> None:
    row = partition_zero(cluster)
    leader = row["leader"]
    replicas = row["replicas"]
    assert isinstance(replicas, list)
    follower = next(r for r in replicas if r != leader)
    shrinks_before = prometheus.wait_for(ISR_SHRINKS, lambda v: v is not None, SEEN_TIMEOUT_S)
    assert shrinks_before is not None

    pid = cluster.broker_pid(follower)
    os.kill(pid, signal.SIGSTOP)
    try:
        urp = prometheus.wait_for(URP, lambda v: v is not None and v > 0, SEEN_TIMEOUT_S)
        assert urp is not None and urp > 0
        shrinks = prometheus.wait_for(
            ISR_SHRINKS, lambda v: v is not None and v > shrinks_before, SEEN_TIMEOUT_S
        )
        assert shrinks is not None and shrinks > shrinks_before
    finally:
        os.kill(pid, signal.SIGCONT)

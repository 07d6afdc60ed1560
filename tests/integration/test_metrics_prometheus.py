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
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.cluster import LocalCluster
from tests.support.prometheus import PrometheusServer, metrics_ports, promtool_problems

TOPIC = "metrics-e2e"
PAUSE_TOPIC = "metrics-isr"  # the pause test's own topic, so tests need no order
RECORDS = 1000
# A paused follower drops out of the ISR after this long (Kafka's default is 30 s).
LAG_TIME_MAX_MS = 3000
SEEN_TIMEOUT_S = 60.0  # a few 1 s scrapes, plus the ISR check period on a loaded machine

MESSAGES_IN = f'sum(kafka_server_brokertopicmetrics_messagesin_total{{topic="{TOPIC}"}})'
ACTIVE_CONTROLLERS = "sum(kafka_controller_kafkacontroller_activecontrollercount)"
URP = "sum(kafka_server_replicamanager_underreplicatedpartitions)"
ISR_SHRINKS = "sum(kafka_server_replicamanager_isrshrinks_total{{instance={instance!r}}})"
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


def create_topic(cluster: LocalCluster, topic: str) -> None:
    run_cli(cluster, "topic", "create", topic, "--partitions", "1", "--replication-factor", "3")


def partition_zero(cluster: LocalCluster, topic: str) -> dict[str, object]:
    described = json.loads(run_cli(cluster, "topic", "describe", topic, "--format", "json"))
    [description] = described
    row: dict[str, object] = description["partitions"][0]
    return row


def test_every_brokers_live_exposition_passes_promtool_and_has_the_state_families(
    cluster: LocalCluster,
) -> None:
    wanted = {
        "kafka_controller_kafkacontroller_activecontrollercount",
        "kafka_server_replicamanager_underminisrpartitioncount",
        "kafka_server_replicamanager_isrshrinks",
        "kafka_server_delayedoperationpurgatory_purgatorysize",
        "kafka_server_socket_server_metrics_connection_count",
        "kafka_server_replicafetchermanager_maxlag",
        "kafka_log_logflushstats_logflushrateandtimems",
    }
    for broker_id, port in sorted(metrics_ports(cluster).items()):
        url = f"http://127.0.0.1:{port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            text: bytes = response.read()
        assert promtool_problems(text) == [], broker_id
        families = {f.name for f in text_string_to_metric_families(text.decode())}
        assert wanted <= families, (broker_id, wanted - families)


def test_prometheus_counts_every_produced_record_one_controller_and_no_urp(
    cluster: LocalCluster, prometheus: PrometheusServer
) -> None:
    create_topic(cluster, TOPIC)
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
    create_topic(cluster, PAUSE_TOPIC)
    row = partition_zero(cluster, PAUSE_TOPIC)
    leader, isr = row["leader"], row["isr"]
    assert isinstance(leader, int) and isinstance(isr, list)
    follower = next(r for r in isr if r != leader)
    # The leader shrinks the ISR; a paused broker's own series go stale, so ask the leader.
    shrinks_on_leader = ISR_SHRINKS.format(instance=f"127.0.0.1:{metrics_ports(cluster)[leader]}")
    shrinks_before = prometheus.wait_for(shrinks_on_leader, lambda v: v is not None)
    assert shrinks_before is not None

    pid = cluster.broker_pid(follower)
    os.kill(pid, signal.SIGSTOP)
    try:
        urp = prometheus.wait_for(URP, lambda v: v is not None and v > 0, SEEN_TIMEOUT_S)
        assert urp is not None and urp > 0
        shrinks = prometheus.wait_for(
            shrinks_on_leader, lambda v: v is not None and v > shrinks_before, SEEN_TIMEOUT_S
        )
        assert shrinks is not None and shrinks > shrinks_before
    finally:
        os.kill(pid, signal.SIGCONT)

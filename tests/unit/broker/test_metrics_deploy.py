"""deploy/prometheus.yml and deploy/grafana-dashboard.json agree with what brokers export.

promtool (Debian's prometheus package) validates the scrape config, both as shipped and
as tests/support/prometheus.py rewrites it; every metric the dashboard queries must be a
family some broker exports, so a renamed metric cannot silently blank a panel.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from minibroker.broker.metrics import BrokerMetrics
from minibroker.broker.metrics_state import BrokerStateCollector, PartitionCollector
from minibroker.broker.quotas.replication_quota import ReplicationQuotas
from minibroker.broker.replication.purgatory import Purgatory
from minibroker.controller.metrics import ControllerCollector
from tests.support.prometheus import SCRAPE_CONFIG, scrape_config
from tests.unit.controller.test_controller import cluster

DASHBOARD = SCRAPE_CONFIG.parent / "grafana-dashboard.json"
BUILT_IN = {"up"}  # series Prometheus itself adds to every target
# Histogram and summary series are queried by their sample names.
_SAMPLE_SUFFIX = re.compile(r"_(bucket|sum|count|total)$")
_METRIC = re.compile(r"\b(kafka_[a-z_]+|up)\b")


def promtool(*args: str) -> subprocess.CompletedProcess[bytes]:
    binary = shutil.which("promtool")
    assert binary is not None, "promtool comes with Debian's prometheus package"
    return subprocess.run([binary, *args], capture_output=True, timeout=30)


def exported_families() -> set[str]:
    """Every family a broker can export: traffic counters, partition and state gauges
    (with every optional source present) and the controller's."""
    manager = SimpleNamespace(
        partitions={},
        produce_waiters=Purgatory("produce"),
        fetch_waiters=Purgatory("fetch"),
        isr_manager=SimpleNamespace(shrinks=0, expands=0),
        replication_quotas=ReplicationQuotas.unlimited(),
        fetcher=SimpleNamespace(max_lag=lambda: 0),
    )
    metrics = BrokerMetrics()
    metrics.registry.register(PartitionCollector(manager))  # type: ignore[arg-type]
    names = {f.name for f in text_string_to_metric_families(metrics.render().decode())}
    collectors: list[Collector] = [
        BrokerStateCollector(
            replicas=manager,  # type: ignore[arg-type]
            server=SimpleNamespace(connections=0),  # type: ignore[arg-type]
            log_manager=SimpleNamespace(  # type: ignore[arg-type]
                flush_stats=SimpleNamespace(count=0, seconds=0.0)
            ),
        ),
        ControllerCollector(cluster()[0]),
    ]
    for collector in collectors:
        registry = CollectorRegistry()
        registry.register(collector)
        names |= {family.name for family in registry.collect()}
    return names


def dashboard_expressions() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]
    exprs += [v["query"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
    return exprs


def test_the_shipped_scrape_config_is_valid() -> None:
    checked = promtool("check", "config", str(SCRAPE_CONFIG))
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_test_rewrite_keeps_the_config_valid_with_new_targets_and_interval(
    tmp_path: Path,
) -> None:
    text = scrape_config(["127.0.0.1:1111", "127.0.0.1:2222"], interval="1s")
    assert '["127.0.0.1:1111", "127.0.0.1:2222"]' in text
    assert "15s" not in text
    config = tmp_path / "prometheus.yml"
    config.write_text(text)
    checked = promtool("check", "config", str(config))
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_every_metric_the_dashboard_queries_is_exported_by_brokers() -> None:
    exported = exported_families() | BUILT_IN
    queried = {name for expr in dashboard_expressions() for name in _METRIC.findall(expr)}
    assert queried, "the dashboard queries nothing"
    unknown = {
        n for n in queried if n not in exported and _SAMPLE_SUFFIX.sub("", n) not in exported
    }
    assert unknown == set()


def test_the_dashboard_asks_for_a_prometheus_data_source_on_import() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert [i["pluginId"] for i in dashboard["__inputs"]] == ["prometheus"]
    assert all(panel["datasource"]["type"] == "prometheus" for panel in dashboard["panels"])


_GROUPED_BY = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")
_LEGEND_LABEL = re.compile(r"\{\{\s*(\w+)\s*\}\}")
SCRAPE_LABELS = {"job", "instance", "cluster"}  # added by Prometheus and the scrape config


def exported_labels() -> set[str]:
    manager = SimpleNamespace(
        partitions={},
        produce_waiters=Purgatory("produce"),
        fetch_waiters=Purgatory("fetch"),
        isr_manager=SimpleNamespace(shrinks=0, expands=0),
        replication_quotas=ReplicationQuotas.unlimited(),
        fetcher=SimpleNamespace(max_lag=lambda: 0),
    )
    collector = BrokerStateCollector(
        replicas=manager,  # type: ignore[arg-type]
        server=SimpleNamespace(connections=0),  # type: ignore[arg-type]
        log_manager=None,
    )
    registry = CollectorRegistry()
    registry.register(collector)
    labels = {name for family in registry.collect() for s in family.samples for name in s.labels}
    # The traffic counters' labels, and the bucket bound of their request-time histogram.
    return labels | {"topic", "partition", "request", "le"}


def test_every_label_the_dashboard_groups_by_is_exported_in_kafka_exporter_case() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    legends = [t.get("legendFormat", "") for p in dashboard["panels"] for t in p.get("targets", [])]
    used = {
        label.strip()
        for expr in dashboard_expressions()
        for group in _GROUPED_BY.findall(expr)
        for label in group.split(",")
        if label.strip()
    } | {label for legend in legends for label in _LEGEND_LABEL.findall(legend)}
    assert "delayedOperation" in used
    assert used - SCRAPE_LABELS <= exported_labels()

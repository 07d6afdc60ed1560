"""The transaction coordinator's metrics, under the names the JMX exporter gives Kafka's
MBeans: ``kafka.coordinator.transaction`` (transactional ids per state, as the group
coordinator's ``numgroups``) and the marker channel's queue (markers sent so far)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from minibroker.protocol.transaction_log import STATUS_NAMES
from minibroker.transaction.markers import MarkerSender
from minibroker.transaction.state_manager import TransactionStateManager


class TransactionCollector(Collector):
    def __init__(self, state: TransactionStateManager, markers: MarkerSender) -> None:
        self.state = state
        self.markers = markers

    def collect(self) -> Iterator[Metric]:
        prefix = "kafka_coordinator_transaction_transactionstatemanager_"
        by_state = Counter(meta.state_name for meta in self.state.owned_transactions())
        ids = GaugeMetricFamily(
            prefix + "numtransactionalids",
            "Transactional ids this broker coordinates, per state.",
            labels=["state"],
        )
        for name in STATUS_NAMES.values():
            ids.add_metric([name], by_state.get(name, 0))
        yield ids
        yield GaugeMetricFamily(
            prefix + "ownedpartitions",
            "__transaction_state partitions this broker coordinates.",
            len(self.state.owned),
        )
        yield CounterMetricFamily(
            "kafka_coordinator_transaction_transactionmarkerchannelmanager_markers",
            "Partition markers written and acknowledged.",
            self.markers.markers_sent,
        )

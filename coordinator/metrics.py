"""Scrape-time metrics of the groups this broker coordinates.

Group counts under the names the JMX exporter gives Kafka's GroupMetadataManager
MBeans, and consumer positions and lag under kafka-exporter's names, which is where
people already dashboard them:

    kafka_coordinator_group_groupmetadatamanager_numgroups                    gauge
    kafka_coordinator_group_groupmetadatamanager_numgroupsstable              gauge
    kafka_coordinator_group_groupmetadatamanager_numgroupspreparingrebalance  gauge
    kafka_coordinator_group_groupmetadatamanager_numgroupscompletingrebalance gauge
    kafka_coordinator_group_groupmetadatamanager_numgroupsempty               gauge
    kafka_coordinator_group_groupmetadatamanager_numgroupsdead                gauge
    kafka_coordinator_group_groupmetadatamanager_numoffsets                   gauge
    kafka_consumergroup_members            gauge {consumergroup}
    kafka_consumergroup_current_offset     gauge {consumergroup, topic, partition}
    kafka_consumergroup_lag                gauge {consumergroup, topic, partition}

Lag is the partition's high watermark minus the committed offset (never below 0). The
high watermark is this broker's view of the partition: exact where it leads it, a
fetch behind where it follows; a partition with no replica here has no lag series
rather than a wrong one.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from minibroker.coordinator.group import GroupState
from minibroker.coordinator.group_metadata_manager import GroupMetadataManager
from minibroker.coordinator.offsets_log import OffsetsLog

_PREFIX = "kafka_coordinator_group_groupmetadatamanager_"


class CoordinatorCollector(Collector):
    def __init__(self, manager: GroupMetadataManager, offsets_log: OffsetsLog) -> None:
        self.manager = manager
        self.offsets_log = offsets_log

    def collect(self) -> Iterator[Metric]:
        groups = self.manager.owned_groups()
        by_state = dict.fromkeys(GroupState, 0)
        for group in groups:
            by_state[group.state] += 1
        yield GaugeMetricFamily(
            _PREFIX + "numgroups", "Groups this broker coordinates.", value=len(groups)
        )
        for state, count in by_state.items():
            yield GaugeMetricFamily(
                _PREFIX + "numgroups" + state.value.lower(),
                f"Groups in state {state.value}.",
                value=count,
            )
        yield GaugeMetricFamily(
            _PREFIX + "numoffsets",
            "Committed offsets held for the groups this broker coordinates.",
            value=sum(len(g.offsets) for g in groups),
        )
        members = GaugeMetricFamily(
            "kafka_consumergroup_members", "Members of a group.", labels=["consumergroup"]
        )
        current = GaugeMetricFamily(
            "kafka_consumergroup_current_offset",
            "Committed offset of a group in a partition.",
            labels=["consumergroup", "topic", "partition"],
        )
        lag = GaugeMetricFamily(
            "kafka_consumergroup_lag",
            "High watermark minus the committed offset of a group in a partition.",
            labels=["consumergroup", "topic", "partition"],
        )
        for group in groups:
            members.add_metric([group.group_id], len(group.members))
            for tp, value in sorted(group.offsets.items()):
                labels = [group.group_id, tp.topic, str(tp.partition)]
                current.add_metric(labels, value.offset)
                hw = self.offsets_log.high_watermark(tp.topic, tp.partition)
                if hw is not None:
                    lag.add_metric(labels, max(hw - value.offset, 0))
        yield members
        yield current
        yield lag

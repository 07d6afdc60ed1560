"""The controller's Prometheus metrics, named as the JMX exporter names Kafka's MBeans.

Computed at scrape time from the KafkaController, read through ``ControllerStats``
(nothing is updated on the controller's paths except two counters it keeps anyway).
Every broker exports them; only the active controller reports 1 in
ActiveControllerCount and non-zero partition figures, which is how Kafka dashboards find
the controller.

    kafka_controller_kafkacontroller_activecontrollercount      gauge 0/1
    kafka_controller_kafkacontroller_offlinepartitionscount     gauge
    kafka_controller_kafkacontroller_globalpartitioncount       gauge
    kafka_controller_kafkacontroller_controllerepoch            gauge (this extra one
                                                                helps tell failovers apart)
    kafka_controller_controllerstats_uncleanleaderelections_total         counter
    kafka_controller_controllerstats_leaderelectionrateandtimems_{count,sum}  summary (ms)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, SummaryMetricFamily
from prometheus_client.registry import Collector

from minibroker.controller.context import ControllerContext


class ControllerStats(Protocol):
    """What the collector reads of the KafkaController."""

    @property
    def is_active(self) -> bool: ...
    @property
    def offline_partitions_count(self) -> int: ...
    @property
    def context(self) -> ControllerContext: ...
    @property
    def unclean_elections(self) -> int: ...
    @property
    def leader_elections(self) -> int: ...
    @property
    def leader_election_seconds(self) -> float: ...


PREFIX = "kafka_controller_kafkacontroller_"
STATS = "kafka_controller_controllerstats_"


class ControllerCollector(Collector):
    def __init__(self, controller: ControllerStats) -> None:
        self._controller = controller

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily | SummaryMetricFamily]:
        c = self._controller
        active = c.is_active
        yield GaugeMetricFamily(
            PREFIX + "activecontrollercount", "1 on the active controller.", int(active)
        )
        yield GaugeMetricFamily(
            PREFIX + "offlinepartitionscount",
            "Partitions without a live leader (active controller only).",
            c.offline_partitions_count,
        )
        yield GaugeMetricFamily(
            PREFIX + "globalpartitioncount",
            "Partitions in the cluster (active controller only).",
            sum(1 for _ in c.context.all_partitions()) if active else 0,
        )
        yield GaugeMetricFamily(
            PREFIX + "controllerepoch", "Epoch of the active controller.", c.context.epoch
        )
        yield CounterMetricFamily(
            STATS + "uncleanleaderelections",
            "Leaders elected from outside the ISR.",
            c.unclean_elections,
        )
        yield SummaryMetricFamily(
            STATS + "leaderelectionrateandtimems",
            "Leader elections and the milliseconds they took.",
            count_value=c.leader_elections,
            sum_value=c.leader_election_seconds * 1000,
        )

"""Controller metrics as Kafka's JMX exporter names them."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from minibroker.controller import events as ev
from minibroker.controller.metrics import ControllerCollector
from minibroker.zk.values import LeaderAndIsr
from tests.unit.controller.test_controller import T0, active_cluster, cluster


def sample(registry: CollectorRegistry, name: str) -> float | None:
    return registry.get_sample_value(name)


async def test_only_the_active_controller_counts_itself_and_its_offline_partitions() -> None:
    controller, _, _ = cluster()
    registry = CollectorRegistry()
    registry.register(ControllerCollector(controller))
    assert sample(registry, "kafka_controller_kafkacontroller_activecontrollercount") == 0
    await controller.process(ev.Startup())
    assert sample(registry, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert sample(registry, "kafka_controller_kafkacontroller_globalpartitioncount") == 2
    assert sample(registry, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert sample(registry, "kafka_controller_kafkacontroller_controllerepoch") == 1


async def test_elections_and_unclean_elections_are_counted() -> None:
    controller, zk, _ = await active_cluster(unclean=True)
    registry = CollectorRegistry()
    registry.register(ControllerCollector(controller))
    zk.znodes[T0] = LeaderAndIsr(1, 0, (1,), 0, 0)
    controller.context.leadership[T0] = zk.znodes[T0]
    del zk.brokers[1]
    await controller.process(ev.BrokerChange())
    assert sample(registry, "kafka_controller_controllerstats_uncleanleaderelections_total") == 1
    count = sample(registry, "kafka_controller_controllerstats_leaderelectionrateandtimems_count")
    assert count is not None and count >= 1
    assert (
        sample(registry, "kafka_controller_controllerstats_leaderelectionrateandtimems_sum")
        is not None
    )

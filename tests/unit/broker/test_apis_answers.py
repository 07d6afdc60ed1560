"""KafkaApis answers assembled from the metadata cache and the controller fence
(broker/apis.py): DescribeCluster's broker entries and the controller requests' refusals."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from minibroker.broker.apis import KafkaApis
from minibroker.broker.cluster.metadata_cache import CachedBroker
from minibroker.broker.replication.controller_apis import ControllerRequestApis
from minibroker.broker.requests.dispatcher import Deferred
from minibroker.broker.security.controller_fence import NOT_FROM_CONTROLLER, ControllerFence
from minibroker.protocol.api import RequestHeader
from minibroker.protocol.errors import (
    NONE,
    ClusterAuthorizationFailedError,
)
from minibroker.protocol.messages.form import NO_AUTHORIZED_OPERATIONS
from tests.support.broker import broker_config, replica_manager

ME = 1
HEADER = RequestHeader(0, 0, 1, "test")


@pytest.fixture
def apis(tmp_path: Path) -> Iterator[KafkaApis]:
    """KafkaApis of a standalone broker."""
    with replica_manager(broker_config(tmp_path, broker_id=ME)) as manager:
        yield KafkaApis(manager, manager.replicas.metadata_cache)


@pytest.fixture
def controller_apis(tmp_path: Path) -> Iterator[ControllerRequestApis]:
    """ControllerRequestApis of a standalone broker whose fence obeys no controller."""
    with replica_manager(broker_config(tmp_path, broker_id=ME)) as manager:
        yield ControllerRequestApis(
            manager, manager.replicas.metadata_cache, ControllerFence(None, ME)
        )


async def answer_of(result: object) -> object:
    assert isinstance(result, Deferred)
    return await result.wait()


def test_describe_cluster_names_brokers_by_id_with_their_kafka_listener_if_any(
    apis: KafkaApis,
) -> None:
    apis.metadata_cache.register_self("h1", 9001, rack="r1", kafka=("k1", 19001))
    apis.metadata_cache.brokers[2] = CachedBroker(2, "h2", 9002)
    apis.metadata_cache.set_cluster_id("cluster-a")
    answer = apis.handle_describe_cluster(
        HEADER, {"include_cluster_authorized_operations": False, "endpoint_type": 1}
    )
    assert answer == {
        "throttle_time_ms": 0,
        "error_code": NONE,
        "error_message": None,
        "cluster_id": "cluster-a",
        "controller_id": -1,
        "brokers": [
            {
                "broker_id": ME,
                "host": "h1",
                "port": 9001,
                "rack": "r1",
                "kafka_host": "k1",
                "kafka_port": 19001,
            },
            {"broker_id": 2, "host": "h2", "port": 9002, "rack": None},
        ],
        "cluster_authorized_operations": NO_AUTHORIZED_OPERATIONS,
    }
    asked = apis.handle_describe_cluster(
        HEADER, {"include_cluster_authorized_operations": True, "endpoint_type": 1}
    )
    # No authorizer: every cluster operation (KIP-430 bits 5, 7, 8, 9, 10, 11, 12).
    assert asked["cluster_authorized_operations"] == sum(1 << n for n in (5, 7, 8, 9, 10, 11, 12))


def test_describe_cluster_answers_an_empty_cluster_id_before_joining_a_cluster(
    apis: KafkaApis,
) -> None:
    answer = apis.handle_describe_cluster(
        HEADER, {"include_cluster_authorized_operations": False, "endpoint_type": 1}
    )
    assert answer is not None and not isinstance(answer, Deferred)
    assert answer["cluster_id"] == ""


CONTROL = {"controller_id": 2, "controller_epoch": 5, "broker_epoch": 10}


async def test_leader_and_isr_from_no_controller_is_refused_with_a_fixed_reason_and_no_partitions(
    controller_apis: ControllerRequestApis,
) -> None:
    request = CONTROL | {"partition_states": [], "live_leaders": []}
    answer = await answer_of(controller_apis.handle_leader_and_isr(HEADER, request))
    assert answer == {
        "error_code": ClusterAuthorizationFailedError.code,
        "error_message": NOT_FROM_CONTROLLER,
        "partition_errors": [],
    }


async def test_stop_replica_from_no_controller_is_refused_with_a_fixed_reason_and_no_partitions(
    controller_apis: ControllerRequestApis,
) -> None:
    request = CONTROL | {"partition_states": []}
    answer = await answer_of(controller_apis.handle_stop_replica(HEADER, request))
    assert answer == {
        "error_code": ClusterAuthorizationFailedError.code,
        "error_message": NOT_FROM_CONTROLLER,
        "partition_errors": [],
    }


async def test_update_metadata_from_no_controller_is_refused_and_changes_nothing(
    controller_apis: ControllerRequestApis,
) -> None:
    request = CONTROL | {"partition_states": [], "live_brokers": []}
    controller_apis.metadata_cache.register_self("h1", 9001)
    answer = await answer_of(controller_apis.handle_update_metadata(HEADER, request))
    assert answer == {
        "error_code": ClusterAuthorizationFailedError.code,
        "error_message": NOT_FROM_CONTROLLER,
    }
    assert list(controller_apis.metadata_cache.brokers) == [ME]

"""confluent-kafka's AdminClient describes a consumer group nobody has used: Kafka answers
DescribeGroups for it with no error, state Dead and no members, and so does minibroker
(a client asking about a group before its consumers start must not wait for a timeout)."""

from __future__ import annotations

import time

import confluent_kafka
import pytest
from confluent_kafka import ConsumerGroupState
from confluent_kafka.admin import AdminClient

from tests.support.cluster import LocalCluster

pytestmark = pytest.mark.timeout(60)

CLIENT = f"confluent-kafka {confluent_kafka.version()[0]}"


@pytest.mark.judge(CLIENT, "describe_consumer_groups of a group that does not exist: Dead at once")
def test_describing_a_group_that_does_not_exist_answers_dead_at_once(
    cluster: LocalCluster,
) -> None:
    client = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap})
    started = time.monotonic()
    futures = client.describe_consumer_groups(
        ["judged-no-such-group"], include_authorized_operations=True, request_timeout=20
    )
    described = futures["judged-no-such-group"].result(30)
    assert (described.state, described.members) == (ConsumerGroupState.DEAD, [])
    assert time.monotonic() - started < 10  # answered, not timed out

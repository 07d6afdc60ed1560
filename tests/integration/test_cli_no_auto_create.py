"""With auto.create.topics.enable=false, a missing topic fails at once, naming the fix.

Kafka's producer waits max.block.ms for a topic that never comes; the CLI instead tells
the user, within a second, that the topic does not exist and how to create it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.support.cluster import LocalCluster

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

PROCESS_START_S = 3.0  # a CLI process's Python start-up on a loaded machine


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(
        tmp_path_factory.mktemp("cluster"),
        brokers=1,
        properties=("auto.create.topics.enable=false",),
    ) as running:
        yield running


@pytest.mark.parametrize("command", ["produce", "consume"])
def test_a_missing_topic_fails_at_once_naming_topic_create(
    cluster: LocalCluster, command: str
) -> None:
    started = time.monotonic()
    result = cluster.cli(command, "nosuchtopic", stdin=b"hello\n")
    elapsed = time.monotonic() - started
    err = result.stderr.decode()
    assert result.returncode == 1, err
    assert err.count("\n") == 1, err
    assert "topic 'nosuchtopic' does not exist" in err
    assert "`minibroker topic create nosuchtopic`" in err
    assert elapsed < 2 + PROCESS_START_S
    assert cluster.cli("topic", "describe", "nosuchtopic").returncode == 1


def test_an_existing_topic_is_produced_to_as_before(cluster: LocalCluster) -> None:
    assert cluster.cli("topic", "create", "made-by-hand").returncode == 0
    produced = cluster.cli("produce", "made-by-hand", stdin=b"hello\n")
    assert produced.returncode == 0, produced.stderr

"""An operator's bad day on a dev cluster: one of 3 brokers is SIGKILLed.

`topic describe` must then tell the truth: every assigned replica listed, the dead
broker's in offline_replicas, and --under-replicated-partitions lists every partition
it held. `dev restart-broker` brings the broker back into every ISR.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support.cluster import LocalCluster

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

DEAD = 2
WAIT_S = 60.0  # ZooKeeper session expiry (6 s here) plus ISR changes on a loaded machine


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path_factory.mktemp("cluster")) as running:
        yield running


def _dev(cluster: LocalCluster, *args: str) -> str:
    done = cluster.cli("dev", *args, "--data-dir", str(cluster.data_dir), bootstrap=False)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


def _describe(cluster: LocalCluster, *args: str) -> Any:
    done = cluster.cli("topic", "describe", *args, "--format", "json")
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout)


def _poll(what: str, check: Callable[[], Any]) -> Any:
    """``check()``'s first truthy answer, asked until WAIT_S passes (state lives in other
    processes: there is no event to wait on from here)."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        answer = check()
        if answer:
            return answer
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_describe_lists_a_killed_broker_offline_and_restart_brings_it_back_into_every_isr(
    cluster: LocalCluster,
) -> None:
    assert cluster.cli("topic", "create", "orders", "-p", "6", "-r", "3").returncode == 0
    assert cluster.cli("topic", "create", "audit", "-p", "2", "-r", "3").returncode == 0

    _dev(cluster, "stop-broker", str(DEAD), "--kill")
    status = json.loads(_dev(cluster, "status", "--format", "json"))
    assert {b["id"]: b["alive"] for b in status["brokers"]} == {1: True, 2: False, 3: True}

    def dead_is_offline_everywhere() -> list[dict[str, Any]] | None:
        topics = _describe(cluster, "orders", "audit")
        partitions = [p for t in topics for p in t["partitions"]]
        if all(p["offline_replicas"] == [DEAD] and DEAD not in p["isr"] for p in partitions):
            return partitions
        return None

    partitions = _poll("broker 2 offline in every partition", dead_is_offline_everywhere)
    assert len(partitions) == 8
    for p in partitions:
        assert sorted(p["replicas"]) == [1, 2, 3]
        assert sorted(p["isr"]) == [1, 3]
        assert p["leader"] in (1, 3)
    under = _describe(cluster, "--under-replicated-partitions")
    assert sorted((p["topic"], p["partition"]) for p in under) == sorted(
        (p["topic"], p["partition"]) for p in partitions
    )

    _dev(cluster, "restart-broker", str(DEAD))

    def back_in_every_isr() -> bool:
        topics = _describe(cluster, "orders", "audit")
        return all(
            sorted(p["isr"]) == [1, 2, 3] and not p["offline_replicas"]
            for t in topics
            for p in t["partitions"]
        )

    _poll("broker 2 back in every ISR", back_in_every_isr)
    assert _describe(cluster, "--under-replicated-partitions") == []
    status = json.loads(_dev(cluster, "status", "--format", "json"))
    assert all(b["alive"] for b in status["brokers"])

"""The judges: Kafka's own tools and clients, and other projects' test suites, against a
3-broker cluster's Kafka listener. Every test is marked ``@pytest.mark.judge(CLIENT,
WHAT)``; each outcome is recorded in ``build/judges/results.json`` (per test id, merged
over runs), from which ``scripts/compatibility-report`` writes docs/compatibility.md."""

from __future__ import annotations

import json
import time
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.broker_process import ROOT
from tests.support.cluster import LocalCluster

RESULTS = ROOT / "build" / "judges" / "results.json"

JUDGE_PROPERTIES = ("group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=1000")
"""Members joining one by one each cause a rebalance (the judges want those); short
sessions, as kafka-python's own test brokers allow (its group tests ask for 3 s)."""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "judge(client, what): the client or tool (with version) a test judges by"
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    marker = item.get_closest_marker("judge")
    if marker is None or (report.when != "call" and report.passed):
        return
    record_result(
        item.nodeid,
        {
            "client": marker.args[0],
            "what": marker.args[1],
            "outcome": report.outcome,
            "seconds": round(report.duration, 1),
            "when": time.strftime("%Y-%m-%d"),
        },
    )


def record_result(key: str, entry: dict[str, Any], path: Path = RESULTS) -> None:
    """Merge one result into the results file (a test run may cover only some judges)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    results = json.loads(path.read_text()) if path.exists() else {}
    results[key] = entry
    path.write_text(json.dumps(results, indent=1, sort_keys=True))


def judged_cluster(
    tmp_path_factory: pytest.TempPathFactory,
    name: str,
    *,
    properties: tuple[str, ...] = (),
    **options: Any,
) -> Iterator[LocalCluster]:
    """A cluster with Kafka listeners and the judges' properties (and ``properties``), for
    a fixture to yield."""
    with LocalCluster(
        tmp_path_factory.mktemp(name),
        kafka_listeners=True,
        properties=JUDGE_PROPERTIES + properties,
        **options,
    ) as running:
        yield running


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """One plain 3-broker cluster for every judge (a start costs ~10 s)."""
    yield from judged_cluster(tmp_path_factory, "judged")

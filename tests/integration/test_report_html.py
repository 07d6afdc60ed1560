"""``minibroker analyze`` on a real cluster's log, its report.html opened in headless
Chromium (Debian's ``chromium``), and checked from the rendered page.

The cluster (``dev up``, 3 brokers) gets three topics (one compacted), gzip and zstd
batches from idempotent producers, and a leader change (the leader of orders-0 stopped
cleanly while records keep coming, then started again); after it stops, one broker's
copy of events-0 has a byte flipped. Then, in the browser: every chart drew as many
series or bars as the data has, the corrupt file heads the page, no request left the
page (Chromium's own network log, with a control page proving the check can fail), and
a screenshot is kept under ``test-artifacts/report-html/`` (``MINIBROKER_TEST_ARTIFACTS``
moves it).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
import trio

from minibroker import Admin, Producer
from minibroker.protocol.records import BATCH_HEADER_SIZE
from tests.support.broker_process import ROOT, child_env
from tests.support.browser import HeadlessChromium, page_requests_in_net_log
from tests.support.cli import cli_command
from tests.support.cluster import LocalCluster

pytestmark = [pytest.mark.extended, pytest.mark.timeout(1200)]

ANALYZE_TIMEOUT_S = 600.0  # a Spark JVM and one job over a few segments, 2 busy cores
ARTIFACTS = Path(os.environ.get("MINIBROKER_TEST_ARTIFACTS") or ROOT / "test-artifacts")
TOPICS = {"orders": 3, "events": 2, "state": 1}  # partitions
PER_TOPIC = {"orders": 300, "events": 200, "state": 120}  # records before the leader change
AFTER_CHANGE = 90  # more orders while orders-0 has its new leader


async def _produce(bootstrap: str, topic: str, count: int, codec: str, start: int = 0) -> None:
    async with Producer(bootstrap, acks="all", compression=codec, linger_ms=20) as producer:
        for i in range(start, start + count):
            key = f"key-{i % (7 if topic == 'state' else 40)}".encode()
            producer.send_nowait(topic, b"v" * (100 + i % 300), key=key)
        await producer.flush()


async def _describe(bootstrap: str, topic: str, partition: int) -> Any:
    async with Admin(bootstrap) as admin:
        [described] = await admin.describe_topics([topic])
    return described.partitions[partition]


async def _wait_for(condition: Any, what: str, timeout: float = 90) -> None:
    with trio.fail_after(timeout):
        while not await condition():
            await trio.sleep(0.2)  # cluster metadata changes have no event to wait on


async def _write_cluster(cluster: LocalCluster) -> None:
    """Three topics, then a leader change of orders-0 with records coming in."""
    bootstrap = cluster.bootstrap
    async with Admin(bootstrap) as admin:
        for topic, partitions in TOPICS.items():
            config = {"cleanup.policy": "compact"} if topic == "state" else None
            await admin.create_topic(
                topic, partitions=partitions, replication_factor=3, config=config
            )
    for topic, codec in (("orders", "gzip"), ("events", "none"), ("state", "zstd")):
        await _produce(bootstrap, topic, PER_TOPIC[topic], codec)
    leader = (await _describe(bootstrap, "orders", 0)).leader
    await trio.to_thread.run_sync(cluster.kill_broker, leader, signal.SIGTERM)

    async def moved() -> bool:
        return (await _describe(bootstrap, "orders", 0)).leader not in (-1, leader)

    await _wait_for(moved, "orders-0 to get a new leader")
    await _produce(bootstrap, "orders", AFTER_CHANGE, "gzip", start=PER_TOPIC["orders"])
    await cluster.restart_broker(leader)

    async def caught_up() -> bool:
        return leader in (await _describe(bootstrap, "orders", 0)).isr

    await _wait_for(caught_up, "the old leader back in orders-0's ISR")


def _corrupt_one_copy(data_dir: Path) -> Path:
    """Flip a byte inside the first batch's records of one broker's events-0 segment."""
    copies = sorted(data_dir.glob("broker-*/logs-*/events-0/00000000000000000000.log"))
    victim = next(p for p in copies if p.stat().st_size)
    with victim.open("r+b") as f:
        f.seek(BATCH_HEADER_SIZE + 5)
        byte = f.read(1)
        f.seek(BATCH_HEADER_SIZE + 5)
        f.write(bytes([byte[0] ^ 0xFF]))
    return victim


CHARTS_JS = """Array.from(document.querySelectorAll('figure.chart')).map(f => ({
    key: f.id.replace('chart-', ''), drawn: f.dataset.drawn, error: f.dataset.error || '',
    expected: +f.dataset.marks,
    marks: f.querySelectorAll('svg g.' + f.dataset.markClass + ' path').length,
    labels: Array.from(f.querySelectorAll('svg .role-axis-label text')).map(t => t.textContent),
}))"""


async def test_analyze_draws_a_real_clusters_log_that_renders_offline_in_chromium(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "cluster"
    cluster = LocalCluster(data_dir)
    await trio.to_thread.run_sync(cluster.start)
    try:
        await _write_cluster(cluster)
    finally:
        await trio.to_thread.run_sync(cluster.stop)
    corrupted = _corrupt_one_copy(data_dir)
    out = tmp_path / "report"

    env = child_env() | {"XDG_CACHE_HOME": str(tmp_path / "cache"), "SPARK_LOCAL_IP": "127.0.0.1"}
    done = await trio.to_thread.run_sync(
        lambda: subprocess.run(
            cli_command("analyze", "--data-dir", str(data_dir), "--out", str(out)),
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=env,
            timeout=ANALYZE_TIMEOUT_S,
        )
    )

    assert done.returncode == 0, done.stderr[-3000:]
    page_path = out / "report.html"
    assert done.stdout.splitlines()[-1] == f"HTML report: {page_path}"
    assert (out / "summary.txt").read_text().splitlines()[-1] == f"HTML report: {page_path}"
    artifacts = ARTIFACTS / "report-html"
    shutil.rmtree(artifacts, ignore_errors=True)
    artifacts.mkdir(parents=True)
    shutil.copy(page_path, artifacts / "report.html")

    browser = HeadlessChromium(tmp_path / "chromium")
    with browser:
        page = browser.open(page_path.as_uri())
        drawn = page.evaluate("window.reportRendered")
        charts = {c["key"]: c for c in page.evaluate(CHARTS_JS)}
        first = page.evaluate("document.querySelector('main > section').id")
        damage = page.evaluate(
            "Array.from(document.querySelectorAll('#integrity td.path')).map(t => t.textContent)"
        )
        tiles = page.evaluate("document.querySelector('.tiles').textContent")
        page.screenshot(artifacts / "report.png")
        control = browser.open('data:text/html,<img src="http://127.0.0.1:9/probe.png">')
    net_log = page_requests_in_net_log(browser.net_log)

    assert drawn == len(charts) >= 13
    for key, chart in charts.items():
        assert chart["drawn"] == "yes", (key, chart["error"])
        assert chart["marks"] == chart["expected"] > 0, (key, chart)
    assert charts["traffic-records"]["marks"] == len(TOPICS)  # a line per topic
    assert charts["skew-records"]["marks"] == sum(TOPICS.values())  # a tick per partition
    assert charts["compression-codec"]["marks"] == 3  # gzip, zstd, none
    assert "orders-0" in charts["leader-epochs"]["labels"]
    assert first == "integrity" and str(corrupted.resolve()) in damage
    records = sum(PER_TOPIC.values()) + AFTER_CHANGE
    assert f"{records:,}records (one copy)" in tiles
    assert page.requests == [page_path.as_uri()]  # what the page asked for: itself
    assert control.requests[-1] == "http://127.0.0.1:9/probe.png"
    assert net_log == ["http://127.0.0.1:9/probe.png"]  # the control page's, and no other
    assert (artifacts / "report.png").stat().st_size > 50_000

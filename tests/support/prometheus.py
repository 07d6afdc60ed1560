"""A real Prometheus server for tests, configured from the repo's deploy/prometheus.yml.

``PrometheusServer(work_dir, targets)`` writes a copy of deploy/prometheus.yml with the
test's scrape targets and a short scrape interval, runs the ``prometheus`` binary
(Debian's ``prometheus`` package; never its systemd service) on 127.0.0.1 with its
TSDB under ``work_dir``, and waits until ``/-/ready`` answers. ``query(expr)`` is
Prometheus's instant query API; ``wait_for(expr, predicate)`` polls it until the
predicate holds or a deadline passes - the scrape loop is outside the test's control,
so polling an HTTP API with a deadline is the only way to see it.

``metrics_ports(cluster)`` finds the /metrics ports a ``LocalCluster``'s brokers chose
(all ports are 0 there) in their logs: each broker logs ``metrics on port N``.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tests.support.broker_process import ROOT
from tests.support.cluster import LocalCluster

SCRAPE_CONFIG = ROOT / "deploy" / "prometheus.yml"
KAFKA_LABEL_CASE = re.compile(
    r"^\S+ label names should be written in 'snake_case' not 'camelCase'$"
)
"""promtool's lint finding about label names such as ``delayedOperation``: brokers keep
the JMX exporter's casing of Kafka's MBean keys on purpose, so dashboards match."""
LINT_FINDINGS = 3  # promtool check metrics' exit code when it only has lint findings
SCRAPE_INTERVAL = "1s"  # fast enough for a test to see a change within a few seconds
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
POLL_S = 0.25  # how often wait_for asks again: a quarter of the scrape interval
HTTP_TIMEOUT_S = 5.0

_TARGETS_LINE = re.compile(r"^(\s*- targets: ).*$", re.MULTILINE)
_INTERVAL = re.compile(r"(scrape_interval|evaluation_interval): \S+")
_METRICS_PORT = re.compile(r"metrics on port (\d+)")

Sample = tuple[dict[str, str], float]


class PrometheusError(Exception):
    """Prometheus could not start, or did not answer as expected."""


def scrape_config(targets: Sequence[str], interval: str = SCRAPE_INTERVAL) -> str:
    """deploy/prometheus.yml with ``targets`` in the minibroker job and ``interval``
    as every scrape / evaluation interval."""
    text = SCRAPE_CONFIG.read_text()
    text, replaced = _TARGETS_LINE.subn(
        lambda m: m.group(1) + json.dumps(list(targets)), text, count=1
    )
    if replaced != 1:
        raise PrometheusError(f"no `- targets:` line in {SCRAPE_CONFIG}")
    return _INTERVAL.sub(lambda m: f"{m.group(1)}: {interval}", text)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def metrics_ports(cluster: LocalCluster) -> dict[int, int]:
    """Broker id -> the port its /metrics endpoint listens on (from the broker's log)."""
    ports = {}
    for broker_id, info in cluster.state["brokers"].items():
        recorded = info.get("metrics_port") or 0
        if not recorded:
            found = _METRICS_PORT.findall(Path(info["log"]).read_text(errors="replace"))
            if not found:
                raise PrometheusError(f"broker {broker_id} logged no metrics port")
            recorded = int(found[-1])
        ports[int(broker_id)] = recorded
    return ports


class PrometheusServer:
    def __init__(self, work_dir: Path, targets: Sequence[str]) -> None:
        self.work_dir = work_dir
        self.targets = list(targets)
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> PrometheusServer:
        binary = shutil.which("prometheus")
        if binary is None:
            raise PrometheusError("no `prometheus` binary: install Debian's prometheus package")
        self.work_dir.mkdir(parents=True, exist_ok=True)
        config = self.work_dir / "prometheus.yml"
        config.write_text(scrape_config(self.targets))
        self.port = free_port()
        argv = [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={self.work_dir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--log.level=warn",
        ]
        with (self.work_dir / "prometheus.log").open("ab") as out:
            self.process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT_S
        try:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise PrometheusError(f"prometheus exited: {self.log()}")
                with contextlib.suppress(OSError):
                    if self._get("/-/ready").startswith("Prometheus"):
                        return self
                time.sleep(0.1)
            raise PrometheusError(f"prometheus not ready in {START_TIMEOUT_S:g} s: {self.log()}")
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> PrometheusServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- the HTTP API ---------------------------------------------------------------

    def query(self, expr: str) -> list[Sample]:
        """An instant query: one (labels, value) per series of the vector result."""
        answer = json.loads(self._get("/api/v1/query?" + urllib.parse.urlencode({"query": expr})))
        if answer.get("status") != "success":
            raise PrometheusError(f"query {expr!r} failed: {answer}")
        data: dict[str, Any] = answer["data"]
        if data["resultType"] == "scalar":
            return [({}, float(data["result"][1]))]
        return [(r["metric"], float(r["value"][1])) for r in data["result"]]

    def value(self, expr: str) -> float | None:
        """The single value of ``expr`` (e.g. a ``sum(...)``); None if it has no series."""
        samples = self.query(expr)
        if not samples:
            return None
        if len(samples) > 1:
            raise PrometheusError(f"{expr!r} has {len(samples)} series, expected one")
        return samples[0][1]

    def wait_for(
        self, expr: str, predicate: Callable[[float | None], bool], timeout: float = 30.0
    ) -> float | None:
        """Poll ``value(expr)`` until ``predicate`` holds; raise with the last value if
        ``timeout`` seconds pass first."""
        deadline = time.monotonic() + timeout
        while True:
            current = self.value(expr)
            if predicate(current):
                return current
            if time.monotonic() >= deadline:
                health = self.targets_health()
                raise PrometheusError(f"{expr!r} is {current} after {timeout:g} s; {health}")
            time.sleep(POLL_S)

    def targets_health(self) -> list[tuple[str, str, str]]:
        """(scrape url, health, last error) of every active target."""
        answer = json.loads(self._get("/api/v1/targets"))
        return [
            (t["scrapeUrl"], t["health"], t.get("lastError", ""))
            for t in answer["data"]["activeTargets"]
        ]

    def log(self) -> str:
        with contextlib.suppress(OSError):
            return (self.work_dir / "prometheus.log").read_text(errors="replace")[-2000:]
        return ""

    def _get(self, path: str) -> str:
        try:
            with urllib.request.urlopen(self.url + path, timeout=HTTP_TIMEOUT_S) as response:
                body: bytes = response.read()
        except urllib.error.HTTPError as exc:
            body = exc.read()  # the API explains a bad query in a JSON error body
        return body.decode()


def promtool_problems(exposition: bytes) -> list[str]:
    """What ``promtool check metrics`` finds wrong with ``exposition``, apart from the
    camelCase label names we keep on purpose; [] when it is clean."""
    promtool = shutil.which("promtool")
    assert promtool is not None, "promtool comes with Debian's prometheus package"
    checked = subprocess.run(
        [promtool, "check", "metrics"], input=exposition, capture_output=True, timeout=30
    )
    lines = (checked.stdout + checked.stderr).decode().splitlines()
    problems = [line for line in lines if line.strip() and not KAFKA_LABEL_CASE.match(line)]
    if checked.returncode not in (0, LINT_FINDINGS):
        problems.append(f"promtool exited with code {checked.returncode}")
    return problems

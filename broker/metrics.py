"""Broker metrics for Prometheus, named as the JMX exporter names Kafka's MBeans.

Counters are plain ints bumped on the request path (the Trio thread is their only
writer) and become Prometheus metric families when scraped; gauges describing the
partitions are computed at scrape time from the ReplicaManager. Each
broker has its own CollectorRegistry: several in-process brokers (tests) never mix.

``MetricsServer`` answers ``GET /metrics`` on ``metrics.port`` with a tiny Trio HTTP
responder: one request per connection, then close - all a scraper needs.

Which request-path figures follow Kafka: messages / bytes in count leader appends of
produced batches only (Kafka's BytesIn leaves replication out); bytes out counts record
bytes sent to consumers (follower fetches are Kafka's ReplicationBytesOut, not counted
here); a Fetch is named FetchConsumer or FetchFollower by its replica_id. State gauges
(under-min-ISR, purgatories, connections, fetcher lag, ISR changes, flushes) are in
broker/metrics_state.py.

``MINIBROKER_METRICS=off`` in the environment turns the request-path counters into
no-ops (the registry and endpoint stay): it exists so bench/broker_bench.py can measure
what the counters cost.
"""

from __future__ import annotations

import bisect
import itertools
import logging
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import trio
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from broker.replica_manager import ReplicaManager
    from broker.server import BrokerServer

log = logging.getLogger(__name__)

REQUEST_TIME_BUCKETS_MS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 5000)
"""From sub-millisecond answers to long polls."""

MAX_HTTP_REQUEST_BYTES = 8192
"""A scrape's request line and headers; anything longer is not a scraper."""

HTTP_TIMEOUT_S = 10.0

METRICS_SWITCH_ENV = "MINIBROKER_METRICS"
"""Set to ``off`` to measure the broker without request-path counters (benchmarks)."""


class _Timings:
    """A histogram's counts kept as plain ints (no locks: only the Trio thread adds)."""

    __slots__ = ("buckets", "count", "total")

    def __init__(self) -> None:
        self.buckets = [0] * (len(REQUEST_TIME_BUCKETS_MS) + 1)  # the last one is +Inf
        self.count = 0
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.buckets[bisect.bisect_left(REQUEST_TIME_BUCKETS_MS, value)] += 1
        self.count += 1
        self.total += value


class BrokerMetrics:
    """Counters as plain dicts of ints on the hot path, turned into Prometheus metric
    families only when scraped (a prometheus_client Counter costs a lock per bump,
    which showed up at ~10% of a small produce)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.messages_in: dict[str, int] = {}
        self.bytes_in: dict[str, int] = {}
        self.bytes_out: dict[str, int] = {}
        self.requests: dict[str, _Timings] = {}
        self.registry.register(_CounterCollector(self))
        if os.environ.get(METRICS_SWITCH_ENV, "").lower() == "off":
            for hook in ("record_append", "record_fetch", "record_request"):
                setattr(self, hook, _ignore)  # the instance attribute shadows the method

    def record_append(self, topic: str, messages: int, size: int) -> None:
        self.messages_in[topic] = self.messages_in.get(topic, 0) + messages
        self.bytes_in[topic] = self.bytes_in.get(topic, 0) + size

    def record_fetch(self, topic: str, size: int) -> None:
        if size:
            self.bytes_out[topic] = self.bytes_out.get(topic, 0) + size

    def record_request(self, request: str, elapsed_ms: float) -> None:
        timings = self.requests.get(request)
        if timings is None:
            timings = self.requests[request] = _Timings()
        timings.observe(elapsed_ms)

    def watch(self, replica_manager: ReplicaManager, server: BrokerServer | None = None) -> None:
        """Report partition, purgatory (and connection) gauges at every scrape."""
        self.registry.register(_PartitionCollector(replica_manager, server))

    def render(self) -> bytes:
        return generate_latest(self.registry)


def _ignore(*args: object) -> None:
    """What the request-path hooks become with ``MINIBROKER_METRICS=off``."""


class _CounterCollector(Collector):
    def __init__(self, metrics: BrokerMetrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        m = self.metrics
        prefix = "kafka_server_brokertopicmetrics_"
        for name, doc, values in (
            ("messagesin", "Records appended, by topic.", m.messages_in),
            ("bytesin", "Record bytes appended, by topic.", m.bytes_in),
            ("bytesout", "Record bytes sent in fetch responses, by topic.", m.bytes_out),
        ):
            family = CounterMetricFamily(prefix + name, doc, labels=["topic"])
            for topic, value in sorted(values.items()):
                family.add_metric([topic], value)
            yield family
        requests = CounterMetricFamily(
            "kafka_network_requestmetrics_requests",
            "Requests handled, by type.",
            labels=["request"],
        )
        times = HistogramMetricFamily(
            "kafka_network_requestmetrics_totaltimems",
            "Time from a request's arrival to its answer being ready (ms).",
            labels=["request"],
        )
        for request, timings in sorted(m.requests.items()):
            requests.add_metric([request], timings.count)
            cumulative = list(itertools.accumulate(timings.buckets))
            bounds = [str(b) for b in REQUEST_TIME_BUCKETS_MS] + ["+Inf"]
            times.add_metric([request], list(zip(bounds, cumulative, strict=True)), timings.total)
        yield requests
        yield times


class _PartitionCollector(Collector):
    def __init__(self, replica_manager: ReplicaManager, server: BrokerServer | None) -> None:
        self.replica_manager = replica_manager
        self.server = server

    def collect(self) -> Iterator[Metric]:
        manager = self.replica_manager
        partitions = list(manager.partitions.values())
        leaders = [p for p in partitions if p.is_leader]
        under = sum(1 for p in leaders if len(p.isr) < len(p.assigned_replicas))
        under_min = sum(1 for p in leaders if len(p.isr) < p.config.min_insync_replicas)
        prefix = "kafka_server_replicamanager_"
        yield GaugeMetricFamily(prefix + "partitioncount", "Partitions here.", len(partitions))
        yield GaugeMetricFamily(prefix + "leadercount", "Partitions led here.", len(leaders))
        yield GaugeMetricFamily(
            prefix + "underreplicatedpartitions", "Led partitions whose ISR < AR.", under
        )
        yield GaugeMetricFamily(
            prefix + "underminisrpartitioncount", "Led partitions with ISR < min ISR.", under_min
        )
        purgatory = GaugeMetricFamily(
            "kafka_server_delayedoperationpurgatory_purgatorysize",
            "Requests parked, by kind.",
            labels=["delayedoperation"],
        )
        purgatory.add_metric(["Fetch"], manager.fetch_waiters.watched)
        purgatory.add_metric(["Produce"], manager.produce_waiters.watched)
        yield purgatory
        if self.server is not None:
            yield GaugeMetricFamily(
                "kafka_server_socket_server_metrics_connection_count",
                "Open client connections.",
                self.server.connections,
            )
        labels = ["topic", "partition"]
        size = GaugeMetricFamily("kafka_log_log_size", "Log size in bytes.", labels=labels)
        end = GaugeMetricFamily("kafka_log_log_logendoffset", "Log end offset.", labels=labels)
        start = GaugeMetricFamily("kafka_log_log_logstartoffset", "Log start.", labels=labels)
        hw = GaugeMetricFamily(
            "kafka_cluster_partition_highwatermark", "High watermark.", labels=labels
        )
        for p in partitions:
            key = [p.tp.topic, str(p.tp.partition)]
            size.add_metric(key, p.log.size)
            end.add_metric(key, p.log.log_end_offset)
            start.add_metric(key, p.log.log_start_offset)
            hw.add_metric(key, p.high_watermark)
        yield from (size, end, start, hw)


class MetricsServer:
    """``GET /metrics`` over HTTP/1.0-style one-shot connections."""

    def __init__(self, metrics: BrokerMetrics, *, host: str = "", port: int = 0) -> None:
        self.metrics = metrics
        self.host = host
        self.port = port

    async def run(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(self.port, host=self.host or None)
        self.port = listeners[0].socket.getsockname()[1]
        log.info("metrics on port %d", self.port)
        async with trio.open_nursery() as nursery:
            await nursery.start(trio.serve_listeners, self._answer, listeners)
            task_status.started(self.port)

    async def _answer(self, stream: trio.SocketStream) -> None:
        try:
            with trio.move_on_after(HTTP_TIMEOUT_S):
                head = b""
                while b"\r\n\r\n" not in head and len(head) < MAX_HTTP_REQUEST_BYTES:
                    chunk = await stream.receive_some(4096)
                    if not chunk:
                        break
                    head += chunk
                parts = head.split(b" ", 2)
                if (
                    len(parts) >= 2
                    and parts[0] == b"GET"
                    and parts[1].split(b"?")[0]
                    in (
                        b"/metrics",
                        b"/",
                    )
                ):
                    body = self.metrics.render()
                    status = b"200 OK"
                else:
                    body, status = b"not found\n", b"404 Not Found"
                await stream.send_all(
                    b"HTTP/1.1 " + status + b"\r\nContent-Type: text/plain; version=0.0.4\r\n"
                    b"Content-Length: " + str(len(body)).encode() + b"\r\n"
                    b"Connection: close\r\n\r\n" + body
                )
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        finally:
            await trio.aclose_forcefully(stream)

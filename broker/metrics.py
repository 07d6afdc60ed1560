"""Broker metrics for Prometheus, named as the JMX exporter names Kafka's MBeans.

Counters are bumped on the request path (cached per-label children, so a bump is a
dict lookup and a locked add); gauges describing the partitions are computed when
Prometheus scrapes, from the ReplicaManager, so they cost nothing in between. Each
broker has its own CollectorRegistry: several in-process brokers (tests) never mix.

``MetricsServer`` answers ``GET /metrics`` on ``metrics.port`` with a tiny Trio HTTP
responder: one request per connection, then close - all a scraper needs.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

import trio
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from broker.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

REQUEST_TIME_BUCKETS_MS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 5000)
"""From sub-millisecond answers to long polls."""

MAX_HTTP_REQUEST_BYTES = 8192
"""A scrape's request line and headers; anything longer is not a scraper."""

HTTP_TIMEOUT_S = 10.0


class BrokerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.messages_in = Counter(
            "kafka_server_brokertopicmetrics_messagesin",
            "Records appended, by topic.",
            ["topic"],
            registry=r,
        )
        self.bytes_in = Counter(
            "kafka_server_brokertopicmetrics_bytesin",
            "Record bytes appended, by topic.",
            ["topic"],
            registry=r,
        )
        self.bytes_out = Counter(
            "kafka_server_brokertopicmetrics_bytesout",
            "Record bytes sent in fetch responses, by topic.",
            ["topic"],
            registry=r,
        )
        self.requests = Counter(
            "kafka_network_requestmetrics_requests",
            "Requests handled, by request type.",
            ["request"],
            registry=r,
        )
        self.request_time = Histogram(
            "kafka_network_requestmetrics_totaltimems",
            "Time from a request's arrival to its answer being ready (ms).",
            ["request"],
            buckets=REQUEST_TIME_BUCKETS_MS,
            registry=r,
        )
        self.isr_shrinks = Counter(
            "kafka_server_replicamanager_isrshrinks", "ISR shrinks on this leader.", registry=r
        )
        self.isr_expands = Counter(
            "kafka_server_replicamanager_isrexpands", "ISR expansions on this leader.", registry=r
        )
        self._topic_children: dict[str, tuple[Counter, Counter, Counter]] = {}
        self._request_children: dict[str, tuple[Counter, Histogram]] = {}

    def _topic(self, topic: str) -> tuple[Counter, Counter, Counter]:
        children = self._topic_children.get(topic)
        if children is None:
            children = (
                self.messages_in.labels(topic),
                self.bytes_in.labels(topic),
                self.bytes_out.labels(topic),
            )
            self._topic_children[topic] = children
        return children

    def record_append(self, topic: str, messages: int, size: int) -> None:
        messages_in, bytes_in, _ = self._topic(topic)
        messages_in.inc(messages)
        bytes_in.inc(size)

    def record_fetch(self, topic: str, size: int) -> None:
        if size:
            self._topic(topic)[2].inc(size)

    def record_request(self, request: str, elapsed_ms: float) -> None:
        children = self._request_children.get(request)
        if children is None:
            children = (self.requests.labels(request), self.request_time.labels(request))
            self._request_children[request] = children
        children[0].inc()
        children[1].observe(elapsed_ms)

    def watch(self, replica_manager: ReplicaManager) -> None:
        """Report partition gauges from ``replica_manager`` at every scrape."""
        self.registry.register(_PartitionCollector(replica_manager))

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _PartitionCollector(Collector):
    def __init__(self, replica_manager: ReplicaManager) -> None:
        self.replica_manager = replica_manager

    def collect(self) -> Iterator[Metric]:
        partitions = list(self.replica_manager.partitions.values())
        leaders = [p for p in partitions if p.is_leader]
        under = sum(1 for p in leaders if len(p.isr) < len(p.assigned_replicas))
        prefix = "kafka_server_replicamanager_"
        yield GaugeMetricFamily(prefix + "partitioncount", "Partitions here.", len(partitions))
        yield GaugeMetricFamily(prefix + "leadercount", "Partitions led here.", len(leaders))
        yield GaugeMetricFamily(
            prefix + "underreplicatedpartitions", "Led partitions whose ISR < AR.", under
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

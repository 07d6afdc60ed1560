"""Broker metrics for Prometheus, named as the JMX exporter names Kafka's MBeans.

Counters are plain ints bumped on the request path (the Trio thread is their only
writer) and become Prometheus metric families when scraped; gauges describing the
partitions and the broker's state are computed at scrape time by the collectors in
broker/metrics_state.py. Each broker has its own CollectorRegistry: several in-process
brokers (tests) never mix.

``MetricsServer`` answers ``GET /metrics`` on ``metrics.port`` with a tiny Trio HTTP
responder: one request per connection, then close - all a scraper needs.

Which request-path figures follow Kafka: messages / bytes in count leader appends of
produced batches only (Kafka's BytesIn leaves replication out); bytes out counts record
bytes sent to consumers (follower fetches are Kafka's ReplicationBytesOut, not counted
here); a Fetch is named FetchConsumer or FetchFollower by its replica_id.

``BrokerMetrics(request_counters=False)`` turns the request-path counters into no-ops
(the registry and endpoint stay): it exists so a benchmark can measure what the
counters cost (``minibroker broker`` sets it from ``MINIBROKER_METRICS=off``,
node/cli.py).
"""

from __future__ import annotations

import bisect
import itertools
import logging
import time
from collections.abc import Iterator, Mapping
from typing import Any

import trio
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import NONE, error_for_code
from minibroker.storage.corruption import CorruptionStats

log = logging.getLogger(__name__)

REQUEST_TIME_BUCKETS_MS = tuple(
    float(ms) for ms in (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 5000)
)
"""From sub-millisecond answers to long polls (floats: bisect compares them with floats)."""

MAX_HTTP_REQUEST_BYTES = 8192
"""A scrape's request line and headers; anything longer is not a scraper."""

HTTP_TIMEOUT_S = 10.0


REQUEST_NAMES: dict[int, str] = {
    int(key): "".join(word.capitalize() for word in key.name.split("_")) for key in ApiKey
}
"""Kafka's request names (LEADER_AND_ISR -> LeaderAndIsr) for the ``request`` label."""

_FETCH = int(ApiKey.FETCH)  # a plain int: comparing with an IntEnum member costs more
_FETCH_CONSUMER = -1  # keys of the two kinds of Fetch, which Kafka reports apart
_FETCH_FOLLOWER = -2
REQUEST_NAMES |= {_FETCH_CONSUMER: "FetchConsumer", _FETCH_FOLLOWER: "FetchFollower"}

_BUCKETS = len(REQUEST_TIME_BUCKETS_MS) + 1  # the last one is +Inf
_TOTAL = _BUCKETS  # a timings list holds the bucket counts, then the sum of times
_MESSAGES_IN, _BYTES_IN, _BYTES_OUT = 0, 1, 2  # a topic's counters list
_now = time.perf_counter  # module-level names: no attribute lookups per request
_bucket = bisect.bisect_left


class BrokerMetrics:
    """Counters as plain lists of numbers on the hot path, turned into Prometheus metric
    families only when scraped (a prometheus_client Counter costs a lock per bump, a
    visible share of a small produce: docs/performance.md, "Figures behind the code").
    Only the Trio thread writes them.

    Per request: one dict lookup and two list increments; per append: one dict lookup
    and two increments. A request's count is the sum of its buckets, worked out at
    scrape time.
    """

    def __init__(self, *, request_counters: bool = True) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.topics: dict[str, list[int]] = {}  # topic -> [messages in, bytes in, bytes out]
        self.requests: dict[int, list[float]] = {}  # request key -> buckets..., total ms
        self.errors: dict[tuple[int, int], int] = {}  # (api key, error code) -> answered
        self.registry.register(_CounterCollector(self))
        if not request_counters:
            for hook in ("record_append", "record_fetch", "record_request", "record_errors"):
                setattr(self, hook, _ignore)  # the instance attribute shadows the method

    def record_append(self, topic: str, messages: int, size: int) -> None:
        counters = self.topics.get(topic)
        if counters is None:
            counters = self.topics[topic] = [0, 0, 0]
        counters[_MESSAGES_IN] += messages
        counters[_BYTES_IN] += size

    def record_fetch(self, topic: str, size: int) -> None:
        if size:
            counters = self.topics.get(topic)
            if counters is None:
                counters = self.topics[topic] = [0, 0, 0]
            counters[_BYTES_OUT] += size

    def record_request(self, api_key: int, body: Mapping[str, Any], started: float) -> None:
        """One request of ``api_key`` answered; ``started`` is its time.perf_counter()."""
        elapsed_ms = (_now() - started) * 1000.0
        if api_key == _FETCH:
            api_key = _FETCH_FOLLOWER if body.get("replica_id", -1) >= 0 else _FETCH_CONSUMER
        timings = self.requests.get(api_key)
        if timings is None:
            timings = self.requests[api_key] = [0.0] * (_BUCKETS + 1)
        timings[_bucket(REQUEST_TIME_BUCKETS_MS, elapsed_ms)] += 1
        timings[_TOTAL] += elapsed_ms

    def record_errors(self, api_key: int, counts: Mapping[int, int]) -> None:
        """The error codes one answer to ``api_key`` carried, NONE included, each with
        how often (broker/requests/request_errors.py finds them)."""
        errors = self.errors
        for code, count in counts.items():
            key = (api_key, code)
            errors[key] = errors.get(key, 0) + count

    def render(self) -> bytes:
        return generate_latest(self.registry)


def _ignore(*args: object) -> None:
    """What the request-path hooks become without ``request_counters``."""


class _CounterCollector(Collector):
    def __init__(self, metrics: BrokerMetrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        m = self.metrics
        prefix = "kafka_server_brokertopicmetrics_"
        topics = sorted(m.topics.items())
        for name, doc, index in (
            ("messagesin", "Records appended as leader, by topic.", _MESSAGES_IN),
            ("bytesin", "Record bytes appended as leader, by topic.", _BYTES_IN),
            ("bytesout", "Record bytes sent to consumers, by topic.", _BYTES_OUT),
        ):
            family = CounterMetricFamily(prefix + name, doc, labels=["topic"])
            for topic, counters in topics:
                family.add_metric([topic], counters[index])
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
        bounds = [str(b) for b in REQUEST_TIME_BUCKETS_MS] + ["+Inf"]
        named = sorted((REQUEST_NAMES.get(k, str(k)), t) for k, t in list(m.requests.items()))
        for request, timings in named:
            cumulative = list(itertools.accumulate(int(n) for n in timings[:_BUCKETS]))
            requests.add_metric([request], cumulative[-1])
            times.add_metric([request], list(zip(bounds, cumulative, strict=True)), timings[_TOTAL])
        yield requests
        yield times
        errors = CounterMetricFamily(
            "kafka_network_requestmetrics_errors",
            "Error codes answered (NONE included), by request type and error (Kafka's "
            "RequestMetrics ErrorsPerSec).",
            labels=["request", "error"],
        )
        for (api_key, code), count in sorted(m.errors.items()):
            errors.add_metric([REQUEST_NAMES.get(api_key, str(api_key)), _error_name(code)], count)
        yield errors


def _error_name(code: int) -> str:
    """Kafka's name of an error code (``NONE``, ``INVALID_REQUEST``, ...)."""
    if code == NONE:
        return "NONE"
    error = error_for_code(code)
    return error.name if error.code == code else str(code)


LOG_CORRUPTION = "kafka_log_logcorruption_"


class CorruptionCollector(Collector):
    """Corruption found in this broker's logs (storage/corruption.py CorruptionStats):

    kafka_log_logcorruption_corruptbatches_total   {source=recovery|read|scrub}
    kafka_log_logcorruption_truncatedbytes_total   bytes cut by recovery and repairs
    kafka_log_logcorruption_repairs_total          corrupt replicas cut for re-fetching
    """

    def __init__(self, stats: CorruptionStats) -> None:
        self.stats = stats

    def collect(self) -> Iterator[Metric]:
        stats = self.stats
        found = CounterMetricFamily(
            LOG_CORRUPTION + "corruptbatches",
            "Corrupt batches (or torn tails) found in log segments, by what found them.",
            labels=["source"],
        )
        for source, count in stats.corrupt.items():
            found.add_metric([source], count)
        yield found
        yield CounterMetricFamily(
            LOG_CORRUPTION + "truncatedbytes",
            "Bytes cut from logs by recovery and corruption repairs.",
            stats.truncated_bytes,
        )
        yield CounterMetricFamily(
            LOG_CORRUPTION + "repairs",
            "Corrupt replicas cut back to re-fetch from the leader.",
            stats.repairs,
        )


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

"""Scrape-time figures of the socket server's limits (broker/network/server.py, queued_bytes.py).

    kafka_network_socketserver_memorypoolused          gauge   queued request and response
                                                               bytes (queued.max.request.bytes)
    kafka_network_socketserver_memorypoolavailable     gauge   what is left of that bound
                                                               (+Inf when unbounded)
    minibroker_network_connections_closed_total        counter {listener, reason}: closed by
                                                               the broker; reason is one of
                                                               server.CLOSE_REASONS
    minibroker_network_paused_reads_total              counter times a connection's reading
                                                               paused on the full budget
    kafka_server_socket_server_metrics_failed_authentication_total
                                                       counter {listener, mechanism}: SASL
                                                               logins refused
    kafka_server_socket_server_metrics_successful_authentication_total
                                                       counter {listener, mechanism}
    kafka_server_socket_server_metrics_successful_reauthentication_total
                                                       counter {listener, mechanism}: SASL
                                                               re-authentications (KIP-368)
    kafka_server_socket_server_metrics_failed_reauthentication_total
                                                       counter {listener, mechanism}
    kafka_server_socket_server_metrics_successful_authentication_no_reauth_total
                                                       counter {listener, mechanism}: logins
                                                               by clients that cannot
                                                               re-authenticate
    kafka_server_socket_server_metrics_expired_connections_killed_count
                                                       gauge   {listener}: connections closed
                                                               for a request after their
                                                               session (connections.max.
                                                               reauth.ms) ended
    kafka_network_socketserver_expiredconnectionskilledcount
                                                       gauge   the same, over all listeners
    kafka_server_socket_server_metrics_connection_creation_total
                                                       counter {listener}: accepted
    kafka_server_socket_server_metrics_connection_accept_throttle_time
                                                       counter {listener}: ms new connections
                                                               waited for
                                                               max.connection.creation.rate
    minibroker_authentication_failures_delayed_total   counter failed logins answered after
                                                               the failure delay
    minibroker_authentication_throttled_total          counter logins that waited because
                                                               their address failed too often

The kafka_network_socketserver gauges keep the JMX exporter's names of Kafka's
SocketServer MemoryPoolUsed / MemoryPoolAvailable (Kafka's pool holds requests only; this
one holds responses too) and ExpiredConnectionsKilledCount; Kafka's
expired-connections-killed-count is a running sum it exports as a gauge, kept so here.
The counters have no Kafka twin (Kafka's connection-close-total counts every close,
not the broker's refusals), hence their own prefix.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import Final

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from minibroker.broker.network.queued_bytes import QueuedBytes
from minibroker.broker.network.server import CLOSE_REASONS, BrokerServer
from minibroker.broker.security.auth_failures import AuthFailureLimiter

_LOGIN_COUNTERS: Final = {
    "failed": ("failed_authentication", "SASL logins refused, by listener and mechanism."),
    "succeeded": ("successful_authentication", "SASL logins accepted, by listener and mechanism."),
    "reauthenticated": (
        "successful_reauthentication",
        "SASL re-authentications accepted, by listener and mechanism.",
    ),
    "failed_reauthentication": (
        "failed_reauthentication",
        "SASL re-authentications refused, by listener and mechanism.",
    ),
    "no_reauthentication": (
        "successful_authentication_no_reauth",
        "SASL logins by clients that cannot re-authenticate (SaslAuthenticate v0).",
    ),
}
"""The listener's login counters by mechanism (broker/security/sasl_gate.py's
SaslListener attributes) -> Kafka's socket-server metric name and its help."""


class ServerLimitsCollector(Collector):
    """Reads the budget and the listeners (``servers()``: name -> server) at each scrape."""

    def __init__(
        self,
        queued_bytes: QueuedBytes,
        servers: Callable[[], Iterable[tuple[str, BrokerServer]]],
        auth_failures: AuthFailureLimiter | None = None,
    ) -> None:
        self.queued_bytes = queued_bytes
        self.servers = servers
        self.auth_failures = auth_failures

    def collect(self) -> Iterator[Metric]:
        budget = self.queued_bytes
        yield GaugeMetricFamily(
            "kafka_network_socketserver_memorypoolused",
            "Queued request and response bytes, over all connections.",
            budget.used,
        )
        yield GaugeMetricFamily(
            "kafka_network_socketserver_memorypoolavailable",
            "Bytes left before queued.max.request.bytes pauses the connections filling it.",
            max(budget.limit - budget.used, 0),
        )
        yield CounterMetricFamily(
            "minibroker_network_paused_reads",
            "Times a connection stopped being read because the queued bytes were full.",
            budget.paused_reads,
        )
        closed = CounterMetricFamily(
            "minibroker_network_connections_closed",
            "Connections the broker closed, by reason.",
            labels=["listener", "reason"],
        )
        by_mechanism = {
            counter: CounterMetricFamily(
                f"kafka_server_socket_server_metrics_{name}", what, labels=["listener", "mechanism"]
            )
            for counter, (name, what) in _LOGIN_COUNTERS.items()
        }
        expired = GaugeMetricFamily(
            "kafka_server_socket_server_metrics_expired_connections_killed_count",
            "Connections closed for a request after their SASL session ended, by listener.",
            labels=["listener"],
        )
        expired_total = 0
        created = CounterMetricFamily(
            "kafka_server_socket_server_metrics_connection_creation",
            "Connections accepted, by listener.",
            labels=["listener"],
        )
        throttled = CounterMetricFamily(
            "kafka_server_socket_server_metrics_connection_accept_throttle_time",
            "Milliseconds new connections waited for max.connection.creation.rate.",
            labels=["listener"],
        )
        for listener, server in self.servers():
            for reason in CLOSE_REASONS:
                closed.add_metric([listener, reason], server.closed[reason])
            created.add_metric([listener], server.creation_rate.created)
            throttled.add_metric([listener], 1000 * server.creation_rate.throttle_time_s)
            logins = server.sasl
            if logins is None:
                continue
            for counter, family in by_mechanism.items():
                counts: Counter[str] = getattr(logins, counter)
                for mechanism in logins.mechanisms:
                    family.add_metric([listener, mechanism], counts[mechanism])
            expired.add_metric([listener], logins.expired_killed)
            expired_total += logins.expired_killed
        yield closed
        yield from by_mechanism.values()
        yield expired
        yield GaugeMetricFamily(
            "kafka_network_socketserver_expiredconnectionskilledcount",
            "Connections closed for a request after their SASL session ended.",
            expired_total,
        )
        yield created
        yield throttled
        if self.auth_failures is not None:
            yield CounterMetricFamily(
                "minibroker_authentication_failures_delayed",
                "Failed logins answered after connection.failed.authentication.delay.ms.",
                self.auth_failures.delayed,
            )
            yield CounterMetricFamily(
                "minibroker_authentication_throttled",
                "Logins that waited because their address failed too often.",
                self.auth_failures.throttled,
            )

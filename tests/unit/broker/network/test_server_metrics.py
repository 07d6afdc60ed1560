"""ServerLimitsCollector: the queued-bytes budget and the broker's closes, as scraped."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from minibroker.broker.network.queued_bytes import QueuedBytes
from minibroker.broker.network.server import BrokerServer
from minibroker.broker.network.server_metrics import ServerLimitsCollector
from minibroker.broker.requests.request_handler import Reply
from minibroker.broker.security.sasl_gate import SaslListener
from minibroker.protocol.session import Session


class Silent:
    listener = "PLAINTEXT"

    def handle(self, frame: bytes, session: Session) -> Reply:
        return None


def scrape(collector: ServerLimitsCollector) -> dict[tuple[str, tuple[str, ...]], float]:
    registry = CollectorRegistry()
    registry.register(collector)
    text = generate_latest(registry).decode()
    return {
        (sample.name, tuple(sorted(sample.labels.values()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_budget_use_and_closes_by_reason_are_exported() -> None:
    budget = QueuedBytes(limit=1000)
    budget.add(300)
    budget.paused_reads = 2
    server = BrokerServer(Silent(), queued_bytes=budget)
    server.closed["incomplete_request"] = 3
    samples = scrape(ServerLimitsCollector(budget, lambda: [("PLAINTEXT", server)]))
    assert samples["kafka_network_socketserver_memorypoolused", ()] == 300
    assert samples["kafka_network_socketserver_memorypoolavailable", ()] == 700
    assert samples["minibroker_network_paused_reads_total", ()] == 2
    closed = "minibroker_network_connections_closed_total"
    assert samples[closed, ("PLAINTEXT", "incomplete_request")] == 3
    assert samples[closed, ("PLAINTEXT", "bad_frame")] == 0


def test_an_unbounded_budget_has_infinite_room() -> None:
    samples = scrape(ServerLimitsCollector(QueuedBytes(limit=float("inf")), lambda: []))
    assert samples["kafka_network_socketserver_memorypoolavailable", ()] == float("inf")


def test_logins_and_re_authentications_are_exported_by_listener_and_mechanism() -> None:
    logins = SaslListener("KAFKA", ["SCRAM-SHA-512"], lambda mechanism, user: None)
    logins.succeeded["SCRAM-SHA-512"] = 3
    logins.reauthenticated["SCRAM-SHA-512"] = 5
    logins.failed_reauthentication["SCRAM-SHA-512"] = 1
    logins.no_reauthentication["SCRAM-SHA-512"] = 2
    logins.expired_killed = 4
    server = BrokerServer(Silent(), queued_bytes=QueuedBytes(limit=1000), sasl=logins)
    samples = scrape(ServerLimitsCollector(QueuedBytes(limit=1000), lambda: [("KAFKA", server)]))
    by_mechanism = ("KAFKA", "SCRAM-SHA-512")
    prefix = "kafka_server_socket_server_metrics_"
    assert samples[prefix + "successful_authentication_total", by_mechanism] == 3
    assert samples[prefix + "successful_reauthentication_total", by_mechanism] == 5
    assert samples[prefix + "failed_reauthentication_total", by_mechanism] == 1
    assert samples[prefix + "successful_authentication_no_reauth_total", by_mechanism] == 2
    assert samples[prefix + "expired_connections_killed_count", ("KAFKA",)] == 4
    assert samples["kafka_network_socketserver_expiredconnectionskilledcount", ()] == 4

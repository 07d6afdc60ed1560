"""Every error a broker answers is counted as Kafka's ErrorsPerSec, and what it refuses
to serve is logged, rate-limited, naming the API, its version and the client id
(broker/requests/request_errors.py, through the dispatcher and the Kafka codec)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import pytest

from minibroker.broker.metrics import BrokerMetrics
from minibroker.broker.network.kafka_codec import KafkaCodec
from minibroker.broker.requests.dispatcher import RequestDispatcher
from minibroker.broker.requests.request_errors import error_codes
from minibroker.broker.requests.request_handler import Buffer, CloseConnection
from minibroker.protocol.api import ApiKey, Body, RequestHeader
from minibroker.protocol.errors import InvalidRequestError, KafkaError
from minibroker.protocol.messages import bodies

COORDINATORS = RequestHeader(ApiKey.FIND_COORDINATOR, 4, 9, "rdkafka")


class BareCodec:
    listener = "PLAINTEXT"

    def encode_response(self, header: RequestHeader, body: Body) -> Sequence[Buffer]:
        return [b"ok"]

    def encode_error(self, header: RequestHeader, error: KafkaError) -> Sequence[Buffer]:
        return [b"error"]


def errors_metric(metrics: BrokerMetrics) -> dict[tuple[str, str], float]:
    """kafka_network_requestmetrics_errors_total by (request, error), as scraped."""
    found = {}
    for line in metrics.render().decode().splitlines():
        if line.startswith("kafka_network_requestmetrics_errors_total{"):
            labels, value = line.split("} ")
            pairs = dict(p.split("=") for p in labels.split("{", 1)[1].split(","))
            found[(pairs["request"].strip('"'), pairs["error"].strip('"'))] = float(value)
    return found


def find_coordinator(header: RequestHeader, body: Body) -> Body:
    """Groups are served, transactions (key type 1) are not: one answer per key."""
    refused = {"error_code": InvalidRequestError.code, "error_message": "key type 1: only groups"}
    served = {"error_code": 0, "error_message": None}
    answer = refused if body["key_type"] else served
    return {
        "error_code": 0,
        "coordinators": [{"key": k, **answer} for k in body["coordinator_keys"]],
    }


def test_error_codes_are_every_error_code_of_a_response_nested_or_not() -> None:
    produce = {
        "responses": [
            {"name": "a", "partition_responses": [{"error_code": 0}, {"error_code": 6}]},
            {"name": "b", "partition_responses": [{"error_code": 0, "record_errors": []}]},
        ],
        "throttle_time_ms": 0,
    }
    metadata = {"brokers": [{"node_id": 1}], "topics": [
        {"error_code": 0, "partitions": [{"error_code": 0, "replica_nodes": [1, 2]}]}]}  # fmt: skip

    assert error_codes(produce) == {0: 2, 6: 1}
    assert error_codes(metadata) == {0: 2}
    assert error_codes({"error_code": 42}) == {42: 1}


def test_a_refusal_inside_an_answer_is_counted_and_logged_naming_api_version_and_client(
    caplog: pytest.LogCaptureFixture,
) -> None:
    metrics = BrokerMetrics()
    dispatcher = RequestDispatcher(metrics)
    dispatcher.register(bodies.FIND_COORDINATOR, find_coordinator)  # type: ignore[arg-type]
    caplog.set_level(logging.INFO, "minibroker.broker.requests.request_errors")

    body = {"key_type": 1, "coordinator_keys": ["tx-1", "tx-2"]}
    dispatcher.dispatch(COORDINATORS, body, BareCodec())
    group = {"key_type": 0, "coordinator_keys": ["g"]}
    dispatcher.dispatch(COORDINATORS, group, BareCodec())

    assert errors_metric(metrics) == {
        ("FindCoordinator", "INVALID_REQUEST"): 2.0,
        ("FindCoordinator", "NONE"): 3.0,  # the top level twice, the group's key once
    }
    (line,) = [r.getMessage() for r in caplog.records]
    assert line == (
        "refused FIND_COORDINATOR v4 #9 from client 'rdkafka': "
        "INVALID_REQUEST (key type 1: only groups)"
    )


def test_an_api_nobody_serves_is_counted_and_logged_and_refusals_are_rate_limited(
    caplog: pytest.LogCaptureFixture,
) -> None:
    metrics = BrokerMetrics()
    dispatcher = RequestDispatcher(metrics)
    caplog.set_level(logging.INFO, "minibroker.broker.requests.request_errors")
    heartbeat = RequestHeader(ApiKey.HEARTBEAT, 4, 1, "app-7")

    for _ in range(100):
        assert dispatcher.dispatch(heartbeat, {}, BareCodec()) == [b"error"]

    assert errors_metric(metrics) == {("Heartbeat", "UNSUPPORTED_VERSION"): 100.0}
    lines = [r.getMessage() for r in caplog.records]
    assert 1 <= len(lines) <= 10  # the limiter's burst, not one line per request
    assert lines[0].startswith("refused HEARTBEAT v4 #1 from client 'app-7': UNSUPPORTED_VERSION")


def test_the_kafka_codec_counts_what_it_refuses_itself_and_names_an_unknown_api() -> None:
    metrics = BrokerMetrics()
    codec = KafkaCodec(RequestDispatcher(metrics))
    dispatcher = codec.dispatcher
    dispatcher.register(bodies.PRODUCE, lambda header, body: {"responses": []})
    client = b"\x00\x05kcat1"
    # Produce v2 (advertised so librdkafka compresses, refused), acks=1, no topics.
    produce_v2 = b"\x00\x00\x00\x02\x00\x00\x00\x03" + client + b"\x00\x01\x00\x00\x03\xe8"
    produce_v2 += b"\x00\x00\x00\x00"
    # ConsumerGroupHeartbeat (api key 68, KIP-848), which this broker does not know.
    heartbeat = b"\x00\x44\x00\x00\x00\x00\x00\x04" + client + b"\x00"

    codec.handle(produce_v2)
    with pytest.raises(CloseConnection) as closed:
        codec.handle(heartbeat)

    assert errors_metric(metrics) == {("Produce", "UNSUPPORTED_VERSION"): 1.0}
    assert str(closed.value).startswith("api key 68 v0 #4 from client 'kcat1': ")

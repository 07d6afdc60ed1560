"""KafkaCodec: Kafka's binary frames <-> the dispatcher's header and body.

The Kafka listener's first and last steps of the request path (the middle step,
broker/requests/dispatcher.py, and every handler are the msgpack listener's). ``handle(frame)``
is what the server calls for every frame (broker/network/server_connection.py cuts the same
int32-sized frames for both protocols):

- a header or body that does not parse -> ``CloseConnection`` (that connection only,
  as Kafka does);
- ApiVersions is answered here: the versions are this codec's, not the msgpack ones,
  for the APIs some handler serves (the controller's arrive once the broker joins);
  an ApiVersions version it does not know gets a v0 body listing the supported ranges
  (KIP-511), any other unknown API or version closes the connection;
- Produce v0-2 (advertised so that librdkafka keeps compressing) is refused with
  UNSUPPORTED_VERSION on every partition;
- everything else goes to the dispatcher in the newest version's shape (protocol/kafka/
  reshape.py: handlers read one shape per API, answers go back in the asked version's),
  with an encoder that knows the request, so a request refused as a whole gets the
  API's full error response (protocol/kafka/answers.py).

Metadata answers advertise each broker's Kafka listener (``kafka_host`` /
``kafka_port`` in the cache's body) instead of its msgpack one; a broker without a
Kafka listener is left out, as Kafka leaves out brokers lacking the asked listener.
FindCoordinator answers the coordinator's Kafka listener the same way (a coordinator
without one: COORDINATOR_NOT_AVAILABLE).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from minibroker.broker.requests.dispatcher import RequestDispatcher
from minibroker.broker.requests.request_errors import RequestErrors, describe
from minibroker.broker.requests.request_handler import Buffer, CloseConnection, Reply
from minibroker.broker.security.sasl_gate import SaslExchange
from minibroker.protocol.answer_memo import LastEncoded
from minibroker.protocol.api import ApiKey, Body, RequestHeader
from minibroker.protocol.errors import (
    NONE,
    CoordinatorNotAvailableError,
    KafkaError,
    UnsupportedVersionError,
)
from minibroker.protocol.kafka.answers import error_response, normalize_request
from minibroker.protocol.kafka.codec import (
    ADVERTISED_VERSIONS,
    MalformedKafkaRequest,
    UnsupportedKafkaVersion,
    api_versions_body,
    decode_request,
    encode_memoised_response,
    encode_response,
    produce_version_unsupported,
    unsupported_api_versions,
)
from minibroker.protocol.kafka.reshape import request_to_newest, response_from_newest
from minibroker.protocol.session import UNKNOWN_SESSION, Session
from minibroker.zk.values import KAFKA_LISTENER

_SASL_HANDSHAKE: Final = int(ApiKey.SASL_HANDSHAKE)
"""A plain int: a logged-in connection's every request is compared with it (an enum
member's lookup costs four times the comparison)."""


class KafkaCodec:
    """Serves one listener's Kafka frames through ``dispatcher``."""

    def __init__(self, dispatcher: RequestDispatcher, *, listener: str = KAFKA_LISTENER) -> None:
        self.dispatcher = dispatcher
        self.listener = listener
        self._metadata = LastEncoded()  # the metadata cache's answers are memoised

    def handle(
        self, frame: bytes, session: Session = UNKNOWN_SESSION, auth: SaslExchange | None = None
    ) -> Reply:
        """``auth``: the connection's login on a SASL listener (broker/security/sasl_gate.py);
        until it is done (and again once its session expired), requests other than
        ApiVersions go to it, and so does a later SaslHandshake (re-authentication)."""
        if auth is not None and auth.raw_tokens:
            return auth.raw_token(frame)  # after SaslHandshake v0: no request header
        try:
            header, body = decode_request(frame, session)
        except MalformedKafkaRequest as exc:
            raise CloseConnection(str(exc)) from exc
        except UnsupportedKafkaVersion as exc:
            if exc.header.api_key == ApiKey.API_VERSIONS:
                return unsupported_api_versions(exc.header, self._served())
            raise CloseConnection(f"{describe(exc.header)}: {exc}") from exc
        if header.api_key == ApiKey.API_VERSIONS:
            return encode_response(header, api_versions_body(self._served()))
        body = request_to_newest(header.api_key, header.api_version, body)
        exchange = _Exchange(self.listener, body, self.dispatcher.errors, self._metadata)
        if auth is not None and (not auth.done or header.api_key == _SASL_HANDSHAKE):
            return auth.handle(header, body, exchange)  # a login, or a re-authentication
        if produce_version_unsupported(header):
            if body["acks"] == 0:
                raise CloseConnection(f"Produce v{header.api_version} (acks=0) is not supported")
            error = UnsupportedVersionError(f"Produce v{header.api_version} is not supported")
            exchange.errors.refused(header, error)
            return exchange.encode_error(header, error)
        try:
            body = normalize_request(header.api_key, header.api_version, body)
        except KafkaError as exc:
            exchange.errors.refused(header, exc)
            return exchange.encode_error(header, exc)
        return self.dispatcher.dispatch(header, body, exchange)

    def _served(self) -> set[int]:
        """The API keys to advertise: declared here and served by some handler."""
        served = {key for key in ADVERTISED_VERSIONS if self.dispatcher.serves(key)}
        return served | {ApiKey.API_VERSIONS}


class _Exchange:
    """The encoder of one request's answer: it keeps the request for error responses."""

    __slots__ = ("errors", "listener", "metadata", "request")

    def __init__(
        self, listener: str, request: Body, errors: RequestErrors, metadata: LastEncoded
    ) -> None:
        self.listener = listener
        self.request = request
        self.errors = errors  # refusals made here, before the dispatcher, count too
        self.metadata = metadata

    def encode_response(self, header: RequestHeader, body: Body) -> Sequence[Buffer]:
        if header.api_key == ApiKey.METADATA:  # Metadata has no older shapes to reshape to
            return encode_memoised_response(header, body, self.metadata, _advertise_kafka)
        if header.api_key == ApiKey.DESCRIBE_CLUSTER:
            body = advertise_kafka_listeners(body, "broker_id")
        elif header.api_key == ApiKey.FIND_COORDINATOR:
            body = advertise_kafka_coordinators(body)
        body = response_from_newest(header.api_key, header.api_version, self.request, body)
        return encode_response(header, body)

    def encode_error(self, header: RequestHeader, error: KafkaError) -> Sequence[Buffer]:
        body = error_response(header.api_key, self.request, error)
        body = response_from_newest(header.api_key, header.api_version, self.request, body)
        return encode_response(header, body)


def _advertise_kafka(body: Body) -> Body:
    return advertise_kafka_listeners(body, "node_id")


def advertise_kafka_listeners(body: Body, id_key: str) -> Body:
    """A Metadata or DescribeCluster answer naming each broker's Kafka listener."""
    brokers = [
        {
            id_key: b[id_key],
            "host": b["kafka_host"],
            "port": b["kafka_port"],
            "rack": b.get("rack"),
        }
        for b in body["brokers"]
        if b.get("kafka_host") is not None
    ]
    return {**body, "brokers": brokers}


def advertise_kafka_coordinators(body: Body) -> Body:
    """A FindCoordinator answer naming each coordinator's Kafka listener."""
    coordinators = []
    for c in body["coordinators"]:
        if c["error_code"] != NONE:
            coordinators.append(c)
        elif c.get("kafka_host") is None:
            coordinators.append(
                {
                    **c,
                    "node_id": -1,
                    "host": "",
                    "port": -1,
                    "error_code": CoordinatorNotAvailableError.code,
                    "error_message": f"broker {c['node_id']} has no Kafka listener",
                }
            )
        else:
            coordinators.append({**c, "host": c["kafka_host"], "port": c["kafka_port"]})
    if not coordinators:
        return body
    first = coordinators[0]
    top = {k: first[k] for k in ("error_code", "error_message", "node_id", "host", "port")}
    return {**body, **top, "coordinators": coordinators}

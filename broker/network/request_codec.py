"""MsgpackCodec: minibroker's msgpack frames <-> the dispatcher's header and body.

The first and last steps of the request path (docs/architecture.md, "The request
path"; the middle step is broker/requests/dispatcher.py). ``handle(frame)`` is what the server
calls for every frame (broker/network/server_connection.py):

- the envelope's header does not parse -> ``CloseConnection`` (nobody to answer);
- unknown API key, unsupported version, body of the wrong shape -> an error body with
  UNSUPPORTED_VERSION / INVALID_REQUEST and the request's correlation id;
- otherwise the header and the validated body go to the dispatcher, which answers
  through ``encode_response`` / ``encode_error``.

Envelopes are declared in protocol/api.py, bodies in protocol/messages/. Fetch
responses are *spliced*: record data is sent from segment memory without a copy (see
protocol/schemas/packing.py); every other response is packed in one msgpack call, which
is cheaper for the small bodies they carry.
"""

from __future__ import annotations

from collections.abc import Sequence

from minibroker.broker.requests.dispatcher import RequestDispatcher
from minibroker.broker.requests.request_handler import Buffer, CloseConnection, Reply
from minibroker.broker.security.sasl_gate import SaslExchange
from minibroker.protocol.answer_memo import LastEncoded
from minibroker.protocol.api import (
    ApiKey,
    Body,
    MalformedRequest,
    RejectedRequest,
    RequestHeader,
    decode_request,
    encode_memoised_response,
    encode_packed_response,
    encode_response,
    error_body,
)
from minibroker.protocol.errors import KafkaError
from minibroker.protocol.session import UNKNOWN_SESSION, Session

SPLICED_RESPONSES = frozenset({ApiKey.FETCH})
"""Responses that carry record data, sent without copying it."""


class MsgpackCodec:
    """Serves one listener's msgpack frames through ``dispatcher``."""

    def __init__(self, dispatcher: RequestDispatcher, *, listener: str = "PLAINTEXT") -> None:
        self.dispatcher = dispatcher
        self.listener = listener
        self._metadata = LastEncoded()  # the metadata cache's answers are memoised

    def handle(
        self, frame: bytes, session: Session = UNKNOWN_SESSION, auth: SaslExchange | None = None
    ) -> Reply:
        """``auth``: the connection's login on a SASL listener (broker/security/sasl_gate.py);
        until it is done, requests other than ApiVersions go to it."""
        try:
            header, body = decode_request(frame, session)
        except MalformedRequest as exc:
            raise CloseConnection(str(exc)) from exc
        except RejectedRequest as exc:
            self.dispatcher.errors.refused(exc.header, exc)
            if auth is not None and not auth.done:
                raise CloseConnection(str(exc), reply=self.encode_error(exc.header, exc)) from exc
            return self.encode_error(exc.header, exc)
        if auth is not None and not auth.done and header.api_key != ApiKey.API_VERSIONS:
            return auth.handle(header, body, self)
        return self.dispatcher.dispatch(header, body, self)

    def encode_response(self, header: RequestHeader, body: Body) -> Sequence[Buffer]:
        if header.api_key == ApiKey.METADATA:
            return encode_memoised_response(header.correlation_id, body, self._metadata)
        if header.api_key in SPLICED_RESPONSES:
            return encode_response(header.correlation_id, body, splice=True)
        return encode_packed_response(header.correlation_id, body)

    def encode_error(self, header: RequestHeader, error: KafkaError) -> Sequence[Buffer]:
        return encode_response(header.correlation_id, error_body(error), splice=False)

"""RequestDispatcher: a decoded request -> the handler for its API key -> a reply.

The request path has three steps (docs/architecture.md, "The request path"):

1. a *codec* turns a frame's bytes into a ``RequestHeader`` and a body (broker/
   request_codec.py: today's msgpack envelopes), or refuses the frame;
2. this *dispatcher* finds the handler for the header's API key, calls it, maps what
   it raises to a Kafka error, runs a ``Deferred`` answer in its own task and records
   the request's time in the metrics;
3. the codec encodes the handler's response body (or the error) into buffers.

The dispatcher knows nothing of any wire format: it only sees ``RequestHeader`` (API
key, version, correlation id, client id) and a ``Body`` (the request's fields by their
body keys, as protocol/messages/ declares them), and hands the answer back
through the ``ResponseEncoder`` it was called with. A second codec (Kafka's binary
protocol on its own listener) plugs in by decoding its frames into the same header and
body, implementing ``ResponseEncoder`` for its bytes, and calling ``dispatch``: the
dispatcher and every handler are reused unchanged.

Handlers are synchronous and return a body (or None: no response, as Produce with
acks=0), or a ``Deferred`` when they must wait (a Fetch long poll, acks=all, a
controller request that touches the disk). A ``KafkaError`` escaping a handler becomes
that error's answer; any other exception is logged with its traceback and answered
UNKNOWN_SERVER_ERROR, so a request can never take the broker down. ``CloseConnection``
passes through to the server. A known API key nobody registered is answered
UNSUPPORTED_VERSION.

Listeners: each codec serves one named listener. A key registered with ``listener=``
(the controller's requests, on ``inter.broker.listener.name``) is answered
CLUSTER_AUTHORIZATION_FAILED on every other listener, before its handler runs.

Size: every API that names topics, partitions, groups or resources is capped at
``request.max.partitions`` items (broker/requests/request_caps.py, checked before authorization
and the handler: no per-item work for a request that is refused). A request of that
table naming more than ``ITEMS_PER_TURN`` items is handled in turns, the event loop
serving other connections between them: its decoding, its handler, the count of its
answer's error codes and the answer's encoding each take a turn of their own (for
3,000 partitions each is a few milliseconds; together they held every client for
10-20). Its connection reads no further request until the handler has run (``Pending.
ordered``), so later requests still follow its effects. Produce, Fetch and ListOffsets
work in turns in their handlers (broker/apis.py).

Authorization: with an authorizer configured, ``authorization`` is set and every handler
runs through it (broker/security/authorization.py: the table of which operation each API
needs); it may refuse the request as a whole by raising, or narrow the request and
complete the answer. Without one, handlers are called directly.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, Protocol, TypeAlias, TypeVar, cast

import trio

from minibroker.broker.metrics import BrokerMetrics
from minibroker.broker.quotas.client_quotas import ClientQuotas, enforce
from minibroker.broker.requests.request_caps import RequestCaps
from minibroker.broker.requests.request_errors import RequestErrors, describe
from minibroker.broker.requests.request_handler import Buffer, CloseConnection, Pending, Reply
from minibroker.protocol.api import Body, RequestHeader
from minibroker.protocol.errors import (
    ClusterAuthorizationFailedError,
    KafkaError,
    UnsupportedVersionError,
)
from minibroker.protocol.messages.bodies import Route

log = logging.getLogger(__name__)


RequestT = TypeVar("RequestT")
ResponseT = TypeVar("ResponseT")


ITEMS_PER_TURN = 250
"""A request of ``RequestCaps``' table naming more items is handled in turns."""


class Deferred(Generic[ResponseT]):
    """A handler's answer that needs awaiting: ``wait()`` returns the body (or None).
    ``ordered``: set once the effects later requests of the connection must follow
    are done (``Pending.ordered``)."""

    __slots__ = ("ordered", "wait")

    def __init__(
        self,
        wait: Callable[[], Awaitable[ResponseT | None]],
        ordered: trio.Event | None = None,
    ) -> None:
        self.wait = wait
        self.ordered = ordered


Answer: TypeAlias = ResponseT | Deferred[ResponseT] | None
"""What a handler returns: its response body, a Deferred one, or None (no response)."""

HandlerResult: TypeAlias = Body | Deferred[Any] | None
Handler: TypeAlias = Callable[[RequestHeader, Body], HandlerResult]
"""A handler as the dispatcher stores it: bodies are dicts at run time."""


class ResponseEncoder(Protocol):
    """What a codec offers the dispatcher: its way of writing answers, and the listener
    the request came in on."""

    listener: str
    """The name of the listener the codec serves (``PLAINTEXT``, ...)."""

    def encode_response(self, header: RequestHeader, body: Body) -> Sequence[Buffer]:
        """The response to ``header`` carrying ``body``, as buffers to send in order."""
        ...

    def encode_error(self, header: RequestHeader, error: KafkaError) -> Sequence[Buffer]:
        """The response refusing the request of ``header`` as a whole with ``error``."""
        ...


class Authorization(Protocol):
    """What the dispatcher runs handlers through when ACLs are on."""

    def run(self, header: RequestHeader, body: Body, handler: Handler) -> HandlerResult:
        """``handler``'s answer to the request as the sender may have it (or raises
        the KafkaError refusing it)."""
        ...


class RequestDispatcher:
    """The API key -> handler table every codec of this broker dispatches through."""

    def __init__(self, metrics: BrokerMetrics, caps: RequestCaps | None = None) -> None:
        """``caps``: how many items each request may name (broker/requests/request_caps.py),
        checked before authorization and the handler; None checks nothing."""
        self.metrics = metrics
        self.caps = caps
        self.errors = RequestErrors(metrics)  # counted and refusals logged, codecs' too
        self.authorization: Authorization | None = None
        self.quotas: ClientQuotas | None = None  # client quotas (broker/quotas/client_quotas.py)
        self._handlers: dict[int, Handler] = {}
        self._listener_of: dict[int, str] = {}

    def register(
        self,
        api: Route[RequestT, ResponseT],
        handler: Callable[[RequestHeader, RequestT], Answer[ResponseT]],
        *,
        listener: str | None = None,
    ) -> None:
        """Serve ``api`` (a Route of protocol/messages/bodies.py, which types the
        handler's request and response) with ``handler``, replacing any handler it had;
        with ``listener``, only on the listener of that name."""
        api_key = api.api_key
        # Bodies are dicts at run time; the Route's types are for the handler's author.
        self._handlers[api_key] = cast(Handler, handler)
        if listener is None:
            self._listener_of.pop(api_key, None)
        else:
            self._listener_of[api_key] = listener

    def serves(self, api_key: int) -> bool:
        return api_key in self._handlers

    def dispatch(self, header: RequestHeader, body: Body, encoder: ResponseEncoder) -> Reply:
        """Run the handler of ``header.api_key`` and encode its answer with ``encoder``."""
        items = 0
        if self.caps is not None:  # its size first: the cheapest refusal
            try:
                items = self.caps.check(header.api_key, body)
            except KafkaError as exc:
                return self._refuse(header, exc, encoder)
        handler = self._handlers.get(header.api_key)
        if handler is None:
            error = UnsupportedVersionError(f"api key {header.api_key} is not served here")
            return self._refuse(header, error, encoder)
        if header.api_key in self._listener_of and encoder.listener != (
            only := self._listener_of[header.api_key]
        ):
            refused = ClusterAuthorizationFailedError(
                f"{describe(header)} is served on listener {only}, not {encoder.listener}"
            )
            return self._refuse(header, refused, encoder)
        if items > ITEMS_PER_TURN:
            return self._in_turns(header, body, handler, encoder)
        started = time.perf_counter()
        try:
            result = self._run(header, body, handler, started)
        except CloseConnection:
            raise
        except Exception as exc:
            reply: Reply = self._refuse(header, _as_kafka_error(header, exc), encoder)
        else:
            if isinstance(result, Deferred):
                finish = self._finish_deferred(header, body, result, started, encoder)
                return Pending(finish, result.ordered)
            reply = None
            if result is not None:
                self.errors.answered(header, result)
                reply = encoder.encode_response(header, result)
        self.metrics.record_request(header.api_key, body, started)
        return reply

    def _run(
        self, header: RequestHeader, body: Body, handler: Handler, started: float
    ) -> HandlerResult:
        """The handler's answer, through authorization and client quotas."""
        guard = self.authorization
        result = handler(header, body) if guard is None else guard.run(header, body, handler)
        quotas = self.quotas
        if quotas is not None and quotas.active:
            handling_s = time.perf_counter() - started
            if isinstance(result, Deferred):
                result = _throttled(result, quotas, header, body, handling_s)
            else:
                enforce(quotas, header, body, result, handling_s)
        return result

    def _in_turns(
        self, header: RequestHeader, body: Body, handler: Handler, encoder: ResponseEncoder
    ) -> Pending:
        """A large request's handling, each step in a turn of its own (``ITEMS_PER_TURN``);
        the connection's next request waits for the handler's effects (``ordered``)."""
        ordered = trio.Event()

        async def in_turns() -> Sequence[Buffer] | None:
            started = time.perf_counter()
            try:
                await trio.lowlevel.checkpoint()  # after the decoding's turn
                result = self._run(header, body, handler, started)
                if not isinstance(result, Deferred) or result.ordered is None:
                    ordered.set()  # its effects are made: the connection reads on
                if isinstance(result, Deferred):
                    try:
                        result = await result.wait()
                    finally:
                        ordered.set()  # a handler's own ordering: kept, to its end
                if result is None:
                    return None
                await trio.lowlevel.checkpoint()
                self.errors.answered(header, result)
                await trio.lowlevel.checkpoint()
                return encoder.encode_response(header, result)
            except CloseConnection:
                raise
            except Exception as exc:
                return self._refuse(header, _as_kafka_error(header, exc), encoder)
            finally:
                ordered.set()
                self.metrics.record_request(header.api_key, body, started)

        return Pending(in_turns, ordered)

    def _refuse(
        self, header: RequestHeader, error: KafkaError, encoder: ResponseEncoder
    ) -> Sequence[Buffer]:
        self.errors.refused(header, error)
        return encoder.encode_error(header, error)

    def _finish_deferred(
        self,
        header: RequestHeader,
        request: Body,
        deferred: Deferred[Any],
        started: float,
        encoder: ResponseEncoder,
    ) -> Callable[[], Awaitable[Sequence[Buffer] | None]]:
        async def finish() -> Sequence[Buffer] | None:
            try:
                body = await deferred.wait()
            except Exception as exc:
                return self._refuse(header, _as_kafka_error(header, exc), encoder)
            finally:
                self.metrics.record_request(header.api_key, request, started)
            if body is None:
                return None
            self.errors.answered(header, body)
            return encoder.encode_response(header, body)

        return finish


def _throttled(
    deferred: Deferred[Any],
    quotas: ClientQuotas,
    header: RequestHeader,
    request: Body,
    handling_s: float,
) -> Deferred[Any]:
    """``deferred`` whose answer is counted against the client's quotas when it comes
    (the handling time counted is the synchronous part: waiting is no work)."""

    async def wait() -> Any:
        body = await deferred.wait()
        enforce(quotas, header, request, body, handling_s)
        return body

    return Deferred(wait, deferred.ordered)


def _as_kafka_error(header: RequestHeader, exc: Exception) -> KafkaError:
    """What a failed handler answers: its KafkaError, or (a bug) UNKNOWN_SERVER_ERROR."""
    if isinstance(exc, KafkaError):
        return exc
    log.error("request %s failed", describe(header), exc_info=exc)
    return KafkaError(f"internal error: {type(exc).__name__}")

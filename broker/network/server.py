"""The broker's Trio TCP listener: binds, accepts, and serves each connection.

How this works. ``BrokerServer`` binds its listening sockets (``listen``: an address
that cannot be bound is one readable ``ListenError``) and serves every accepted
connection in a task of its own (``trio.serve_listeners``). For each it runs the TLS
handshake if the listener has one, names the connection's ``Session`` (certificate
principal or ANONYMOUS, peer host, listener), counts it among the connections that
share the broker-wide ``QueuedBytes`` (broker/network/queued_bytes.py), and hands it to a
``ServerConnection`` (broker/network/server_connection.py: frames in, replies out, in request order,
within the per-connection limits and deadlines). However the connection ends, its
queued bytes go back to the budget and its socket is closed; a peer that vanished is
logged at debug level, anything else is a bug and logged with its traceback.

The server only cuts frames: what a frame means is the handler's business
(broker/requests/request_handler.py), so any codec whose frames are length-prefixed can be
served.

Security (docs/architecture.md, "Authentication"): with ``ssl_context`` each accepted
connection's TLS handshake runs first, in that connection's task and within
``ssl_handshake_timeout_s``; with ``sasl`` each connection gets its login state
(``sasl.exchange``), passed to the handler as ``auth`` with every frame, and the
handler's ``CloseConnection(reply=...)`` sends a refusal before closing. A plaintext
listener's connections take neither path.

Limits (broker/network/connection_limits.py): a connection past ``max.connections`` or its
address's ``max.connections.per.ip`` is closed before anything is read from it; one
past the listener's ``max.connection.creation.rate`` waits its turn first.

``closed`` counts the connections the broker closed, by reason (``CLOSE_REASONS``), a
metric (broker/network/server_metrics.py). The log lines a client can cause by being refused
are rate limited (broker/requests/log_limiter.py).
"""

from __future__ import annotations

import errno
import logging
import math
import ssl

import trio

from minibroker.broker.network.connection_limits import ConnectionLimits, CreationRate
from minibroker.broker.network.queued_bytes import QueuedBytes
from minibroker.broker.network.server_connection import MAX_UNSENT_BYTES, ServerConnection
from minibroker.broker.network.server_replies import refusal_log
from minibroker.broker.requests.request_handler import Authenticator, RequestHandler
from minibroker.net.tls import TlsStream
from minibroker.protocol.errors import MinibrokerError
from minibroker.protocol.session import ANONYMOUS, ConnectionMute, PeerBroker, Session

log = logging.getLogger(__name__)

ACCEPT_BACKLOG = 1024
"""listen() backlog: a burst of thousands of connects should queue, not be refused."""

DEFAULT_SSL_HANDSHAKE_TIMEOUT_S = 10.0
"""How long a TLS handshake may take (ssl.handshake.timeout.ms): a peer that opens a
TLS port and says nothing holds a task and a socket, never the accept loop."""

DEFAULT_REQUEST_RECEIVE_TIMEOUT_S = 30.0
"""How long a started request frame may take to arrive whole (Kafka's request.timeout.ms
default: a client waits that long for an answer anyway)."""


class ListenError(MinibrokerError):
    """The listener cannot be bound (address in use, bad host, no permission)."""


class BrokerServer:
    """Accepts connections on ``host:port`` and serves them with ``handler``.

    ``port`` is the bound port once ``run`` has started (useful with port 0).
    """

    def __init__(
        self,
        handler: RequestHandler,
        *,
        host: str = "",
        port: int = 0,
        max_frame_bytes: int = 104_857_600,
        idle_timeout_s: float = 600.0,
        request_receive_timeout_s: float = DEFAULT_REQUEST_RECEIVE_TIMEOUT_S,
        max_unsent_bytes: int = MAX_UNSENT_BYTES,
        queued_bytes: QueuedBytes | None = None,
        ssl_context: ssl.SSLContext | None = None,
        ssl_handshake_timeout_s: float = DEFAULT_SSL_HANDSHAKE_TIMEOUT_S,
        sasl: Authenticator | None = None,
        limits: ConnectionLimits | None = None,
        creation_rate: CreationRate | None = None,
    ) -> None:
        """``ssl_context``: serve TLS (each handshake in its connection's own task, within
        ``ssl_handshake_timeout_s``); ``sasl``: require a SASL login first (the handler
        gets each connection's login state as ``auth``); ``limits``: the broker's
        connection counts (shared by its listeners), ``creation_rate`` this listener's
        (broker/network/connection_limits.py)."""
        self.handler = handler
        self.limits = limits
        self.creation_rate = creation_rate if creation_rate is not None else CreationRate()
        self.ssl_context = ssl_context
        self.ssl_handshake_timeout_s = ssl_handshake_timeout_s
        self.sasl = sasl
        self.host = host
        self.port = port
        self.max_frame_bytes = max_frame_bytes
        self.idle_timeout_s = idle_timeout_s
        self.request_receive_timeout_s = request_receive_timeout_s
        self.max_unsent_bytes = max_unsent_bytes
        self.queued_bytes = queued_bytes if queued_bytes is not None else QueuedBytes()
        self._listeners: list[trio.SocketListener] = []
        self.connections = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.closed: dict[str, int] = dict.fromkeys(CLOSE_REASONS, 0)
        """Connections the broker closed, by reason (a metric)."""

    async def listen(self) -> None:
        """Bind the listening sockets (``run`` does it if not done); ``port`` is then set.

        Raises ListenError (one readable line) if the address cannot be bound.
        """
        try:
            self._listeners = await trio.open_tcp_listeners(
                self.port, host=self.host or None, backlog=ACCEPT_BACKLOG
            )
        except OSError as exc:
            where = f"{self.host or '*'}:{self.port}"
            raise ListenError(f"cannot listen on {where}: {exc.strerror or exc}") from exc
        self.port = self._listeners[0].socket.getsockname()[1]
        log.info("listening on %s:%d", self.host or "*", self.port)

    async def run(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled; reports the bound port to ``nursery.start``."""
        if not self._listeners:
            await self.listen()
        listeners, self._listeners = self._listeners, []
        async with trio.open_nursery() as nursery:
            await nursery.start(trio.serve_listeners, self._serve_connection, listeners)
            task_status.started(self.port)

    async def _serve_connection(self, stream: trio.abc.Stream) -> None:
        """Serve one accepted connection (any byte stream: tests use memory streams)."""
        host = _peer_host(stream)
        limits = self.limits
        if limits is not None:
            refused = limits.admit(host)
            if refused is not None:
                self.closed[refused] += 1
                refusal_log.info("refused a connection from %s: %s", host or "?", refused)
                await trio.aclose_forcefully(stream)
                return
        try:
            wait = self.creation_rate.creation_wait_s()
            if wait > 0:
                await trio.sleep(wait)
            await self._serve_admitted(stream, host)
        finally:
            if limits is not None:
                limits.release(host)

    async def _serve_admitted(self, stream: trio.abc.Stream, host: str) -> None:
        peer, principal = _peer_name(stream), ANONYMOUS
        if self.ssl_context is not None:
            tls = await self._tls_handshake(stream, peer)
            if tls is None:
                return
            stream, principal = tls, _certificate_principal(tls)
        self.connections += 1
        self.queued_bytes.opened()
        session = Session(principal, host, self.handler.listener, PeerBroker(), ConnectionMute())
        connection = ServerConnection(self, stream, peer, session)
        try:
            await connection.serve()
        except* Exception as group:
            _log_connection_failure(connection.peer, group)
        finally:
            self.connections -= 1
            connection.release_queued_bytes()
            self.queued_bytes.closed()
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(stream)

    async def _tls_handshake(self, stream: trio.abc.Stream, peer: str) -> TlsStream | None:
        """The TLS stream once its handshake is done; None (the stream closed) if it
        fails or takes longer than the handshake timeout."""
        assert self.ssl_context is not None
        tls = TlsStream(stream, self.ssl_context, server_side=True)
        why = f"no TLS handshake within {self.ssl_handshake_timeout_s:g} s"
        try:
            with trio.move_on_after(self.ssl_handshake_timeout_s):
                try:
                    await tls.do_handshake()
                    return tls
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                    why = f"TLS handshake failed: {_tls_failure(exc)}"
        except BaseException:  # cancelled (the server stops): the socket still closes
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(stream)
            raise
        self.closed["tls_handshake"] += 1
        refusal_log.warning("closing connection from %s: %s", peer, why)
        with trio.CancelScope(shield=True):
            await trio.aclose_forcefully(stream)
        return None


CLOSE_REASONS = (
    "bad_frame",
    "incomplete_request",
    "stalled_response",
    "idle",
    "tls_handshake",
    "authentication",
    "max_connections",
    "max_connections_per_ip",
)
"""Why the broker closes a connection, as the ``closed`` counters name it."""


_PEER_GONE = (trio.BrokenResourceError, trio.ClosedResourceError)
_PEER_GONE_ERRNOS = frozenset({errno.ECONNRESET, errno.EPIPE, errno.ETIMEDOUT})


def _log_connection_failure(peer: str, group: BaseExceptionGroup[Exception]) -> None:
    """A vanished peer is routine (debug); anything else is a bug worth a traceback."""
    for exc in _leaves(group):
        if isinstance(exc, _PEER_GONE) or (
            isinstance(exc, OSError) and exc.errno in _PEER_GONE_ERRNOS
        ):
            log.debug("connection from %s dropped: %r", peer, exc)
        else:
            log.error("connection from %s failed", peer, exc_info=exc)


def _leaves(group: BaseExceptionGroup[Exception]) -> list[Exception]:
    leaves: list[Exception] = []
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            leaves.extend(_leaves(exc))
        else:
            leaves.append(exc)
    return leaves


def _peer_name(stream: trio.abc.Stream) -> str:
    sock = getattr(stream, "socket", None)
    if sock is None:
        return "?"
    try:
        host, port = sock.getpeername()[:2]
    except OSError:
        return "?"
    return f"{host}:{port}"


def _peer_host(stream: trio.abc.Stream) -> str:
    sock = getattr(stream, "socket", None)
    if sock is None:
        return ""
    try:
        return str(sock.getpeername()[0])
    except OSError:
        return ""


def _certificate_principal(tls: TlsStream) -> str:
    """``User:<subject>`` of the client's certificate as Kafka writes it (RFC 2253
    order: CN first), or User:ANONYMOUS without one."""
    der = tls.getpeercert(binary_form=True)
    if not der:
        return ANONYMOUS
    from cryptography import x509  # only TLS listeners with client certificates need it

    return "User:" + x509.load_der_x509_certificate(der).subject.rfc4514_string()


def _tls_failure(exc: BaseException) -> str:
    """The SSL library's reason for a failed handshake (its cause), for the log."""
    cause = exc.__cause__ or exc
    return getattr(cause, "reason", None) or type(cause).__name__


def idle_timeout_seconds(ms: int) -> float:
    """connections.max.idle.ms as seconds for trio (negative = never)."""
    return math.inf if ms < 0 else ms / 1000.0

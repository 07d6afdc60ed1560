"""One TCP connection to a broker, shared by clients, replica fetchers and the controller.

How this works: frames and bodies are encoded and decoded by the sans-IO ``protocol``
package; this module only moves bytes. Any number of tasks may call ``request`` at once
(pipelining). Each caller waits for its turn to write (first come, first served),
appends its entry to the pending FIFO and writes its frame, so the FIFO order is the
order requests hit the wire; the broker answers in that order (docs/architecture.md,
"Wire formats") and each response's correlation id is checked against the oldest entry,
a mismatch meaning the stream can no longer be trusted.

``call`` hands out a request as a :class:`Call` instead, for callers that may pass the
wait on to another task (a producer whose caller was cancelled) or that enforce its
deadline themselves (``response(bounded=False)`` and ``time_out``).

There is no background reader task (so no nursery to own and no task outliving its
caller): the waiting callers take turns reading. When nobody is reading, the first
caller to wait becomes the reader; it reads frames and hands each to its entry (waking
that caller) until its own response is in, then passes the reader role to the oldest
caller still waiting. A lone sequential caller thus reads its own response with no task
switch; a cancelled or timed-out reader passes the role on in a ``finally``. Trio's
``receive_some`` loses no data when cancelled and the frame decoder keeps partial
frames, so a change of reader mid-frame is harmless.

Failure model (the one boundary where OS and Trio errors become ours, ``NetworkBoundary``):

- connect failure, reset, EOF, an unparseable or unexpected response: the connection is
  *broken*; every pending request and every later one raises ``NetworkError`` (code 13,
  retriable) chained ``from`` the original exception. Callers open a new Connection.
- a request that runs past its timeout raises ``RequestTimedOutError`` (retriable) and
  is abandoned: its response, when it comes, is read and dropped and the connection
  stays usable. The same holds for a caller cancelled while waiting for its response.
- a caller cancelled (or timed out) halfway through writing its frame leaves a torn
  frame on the wire, so that breaks the connection.

States (``ConnectionState``, legal moves in ``TRANSITIONS``; anything else raises)::

    NEW --connect--> OPEN --failure--> BROKEN --aclose--> CLOSED
     |  |               '------------------aclose-----------^  ^
     |  '--connect fails--> BROKEN                             |
     '------------------------aclose---------------------------'

A response body is returned as decoded (defaults filled); a top-level ``error_code``
is left for the caller to interpret (``client.errors.raise_if_error``).

Usage::

    async with Connection("127.0.0.1", 9092) as conn:
        body = await conn.request(ApiKey.METADATA, {"topics": None}, timeout=5)
"""

from __future__ import annotations

import enum
import itertools
from collections import deque
from collections.abc import Iterator
from types import TracebackType
from typing import Any, Final

import trio

from minibroker.net import socket_io
from minibroker.net.calls import BOUNDARY_ERRORS, Call, CallReader, NetworkBoundary
from minibroker.net.security import BrokerProver, ClientSecurity
from minibroker.net.tls import TlsStream
from minibroker.protocol import broker_proof
from minibroker.protocol.api import (
    ApiKey,
    PackedBody,
    encode_request_buffers,
    latest_version,
    packed_request_frame,
)
from minibroker.protocol.errors import (
    KafkaError,
    NetworkError,
    RequestTimedOutError,
    SaslAuthenticationFailedError,
    error_for_code,
)
from minibroker.protocol.frames import (
    DEFAULT_MAX_FRAME_BYTES,
    FrameDecoder,
)
from minibroker.protocol.sasl import SaslClient
from minibroker.protocol.schemas.packing import Buffer

CONNECT_TIMEOUT_S: Final = 10.0
"""Kafka's socket.connection.setup.timeout.max.ms is 30 s; a local cluster answers in ms."""

REQUEST_TIMEOUT_S: Final = 30.0
"""Kafka's request.timeout.ms default; long polls pass their own, larger timeout."""

COALESCE_MAX_BYTES: Final = 64 * 1024
"""Adjacent buffers up to this size are joined into one send (fewer syscalls)."""

DEFAULT_CLIENT_ID: Final = "minibroker"


class ConnectionState(enum.Enum):
    NEW = "new"
    OPEN = "open"
    BROKEN = "broken"
    CLOSED = "closed"


TRANSITIONS: Final[dict[ConnectionState, frozenset[ConnectionState]]] = {
    ConnectionState.NEW: frozenset(
        {ConnectionState.OPEN, ConnectionState.BROKEN, ConnectionState.CLOSED}
    ),
    ConnectionState.OPEN: frozenset({ConnectionState.BROKEN, ConnectionState.CLOSED}),
    ConnectionState.BROKEN: frozenset({ConnectionState.CLOSED}),
    ConnectionState.CLOSED: frozenset(),
}
"""Every legal state change of a Connection."""


class IllegalConnectionTransition(RuntimeError):
    """A Connection was used out of order (connect twice, connect after close)."""


class Connection:
    """A pipelined request/response connection; see the module docstring. Its reading
    half is a ``CallReader`` (net/calls.py) it owns."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str | None = DEFAULT_CLIENT_ID,
        connect_timeout: float = CONNECT_TIMEOUT_S,
        request_timeout: float = REQUEST_TIMEOUT_S,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        security: ClientSecurity | None = None,
    ) -> None:
        """``security``: TLS and a SASL login done by ``connect`` (net/security.py);
        None is plaintext."""
        self.host = host
        self.port = port
        self.client_id = client_id
        self.connect_timeout = connect_timeout
        self.request_timeout = request_timeout
        self.security = security
        self._stream: trio.abc.Stream | None = None
        # Whose turn it is to write: a frame is written by one caller at a time, in FIFO
        # order (trio.Lock's rules, without its bookkeeping for the uncontended case).
        self._writing = False
        self._write_turns = trio.lowlevel.ParkingLot()  # callers waiting for their turn
        self._pending: deque[Call] = deque()
        self._call_reader = CallReader(
            host, port, FrameDecoder(max_frame_bytes), self._pending, self._break
        )
        self._wait = self._call_reader.wait  # bound once: awaited on every request
        self._correlation_ids = itertools.count()
        self._error: NetworkError | None = None  # why it is BROKEN or CLOSED
        # The boundary every write passes (stateless: made once, not per request)
        self._send_errors = NetworkBoundary("send to", host, port)
        self.state = ConnectionState.NEW

    def __repr__(self) -> str:
        return (
            f"<Connection {self.host}:{self.port} {self.state.value} "
            f"in_flight={len(self._pending)}>"
        )

    def _move(self, to: ConnectionState) -> None:
        if to not in TRANSITIONS[self.state]:
            raise IllegalConnectionTransition(
                f"connection to {self.host}:{self.port}: {self.state.value} -> {to.value}"
            )
        self.state = to

    @property
    def is_usable(self) -> bool:
        """Open and not (known to be) broken or closed."""
        return self.state is ConnectionState.OPEN

    @property
    def in_flight(self) -> int:
        """Requests written (or being written) whose response has not been read."""
        return len(self._pending)

    # -- lifecycle -------------------------------------------------------------------

    async def connect(self) -> None:
        """Open the TCP connection within ``connect_timeout``; NetworkError if not."""
        if self.state is not ConnectionState.NEW:
            self._move(ConnectionState.OPEN)  # raises: a Connection connects once
        try:
            stream = await self._open_stream()
        except NetworkError as exc:
            if self.state is ConnectionState.NEW:
                self._error = exc
                self._move(ConnectionState.BROKEN)
            raise
        if self.state is not ConnectionState.NEW:  # closed while connecting
            await trio.aclose_forcefully(stream)
            self._raise_if_unusable()
        self._stream = stream
        self._call_reader.attach(stream)
        self._move(ConnectionState.OPEN)
        security = self.security
        if security is not None and (security.mechanism or security.identity) is not None:
            try:
                if security.mechanism is not None:
                    await self._authenticate(security)
                if security.identity is not None:
                    await self._prove_identity(security.identity)
            except BaseException:
                with trio.CancelScope(shield=True):
                    await self.aclose()
                raise

    async def _open_stream(self) -> trio.abc.Stream:
        boundary = NetworkBoundary("connect to", self.host, self.port)
        context = None if self.security is None else self.security.ssl_context
        try:
            with boundary, trio.fail_after(self.connect_timeout):
                tcp = await trio.open_tcp_stream(self.host, self.port)
                if context is None:
                    return tcp
                tls = TlsStream(tcp, context, server_hostname=self.host)
                try:
                    await tls.do_handshake()
                except BaseException:
                    await trio.aclose_forcefully(tcp)
                    raise
                return tls
        except trio.TooSlowError as exc:
            where = f"connect to {self.host}:{self.port}"
            raise NetworkError(f"{where}: nothing within {self.connect_timeout}s") from exc

    async def _authenticate(self, security: ClientSecurity) -> None:
        """SaslHandshake, then SaslAuthenticate rounds until the mechanism is done.
        SaslAuthenticationFailedError (not retriable) if the broker refuses the login."""
        assert security.mechanism is not None
        timeout = self.connect_timeout
        handshake = await self.request(
            ApiKey.SASL_HANDSHAKE, {"mechanism": security.mechanism}, timeout=timeout
        )
        _raise_sasl_error(handshake)
        client = SaslClient(security.mechanism, security.username, security.password)
        token: bytes | None = client.first()
        while token is not None:
            answer = await self.request(
                ApiKey.SASL_AUTHENTICATE, {"auth_bytes": token}, timeout=timeout
            )
            _raise_sasl_error(answer)
            token = client.step(answer["auth_bytes"])

    async def _prove_identity(self, identity: BrokerProver) -> None:
        """BrokerChallenge, then BrokerProof signed with ``identity``'s key
        (protocol/broker_proof.py); the broker's refusal is raised (not retriable)."""
        timeout = self.connect_timeout
        challenge = await self.request(ApiKey.BROKER_CHALLENGE, {}, timeout=timeout)
        _raise_error(challenge)
        payload = broker_proof.payload(
            challenge["nonce"], identity.broker_id, challenge["broker_id"]
        )
        proof = {"broker_id": identity.broker_id, "signature": identity.sign(payload)}
        _raise_error(await self.request(ApiKey.BROKER_PROOF, proof, timeout=timeout))

    async def __aenter__(self) -> Connection:
        await self.connect()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the socket; pending requests fail with NetworkError. Idempotent."""
        if self.state is ConnectionState.CLOSED:
            return
        await self._break(NetworkError(f"connection to {self.host}:{self.port} closed"))
        self._closed()

    def _closed(self) -> None:
        if self.state is not ConnectionState.CLOSED:  # a concurrent aclose may have won
            self._move(ConnectionState.CLOSED)

    async def _break(self, error: NetworkError) -> None:
        """Fail every pending request with ``error`` (the first one sticks) and close."""
        if self.state is ConnectionState.OPEN:
            self._move(ConnectionState.BROKEN)
        if self._error is None:
            self._error = error
        while self._pending:
            pending = self._pending.popleft()
            pending.error = self._error
            pending.finish()
        if self._stream is not None:
            await trio.aclose_forcefully(self._stream)

    # -- requests --------------------------------------------------------------------

    async def request(
        self,
        api_key: int,
        body: Any,
        *,
        version: int | None = None,
        timeout: float | None = None,
    ) -> Any:
        """Send one request and return its response body (a dict, defaults filled).

        ``version`` defaults to the newest this code speaks; ``timeout`` (seconds,
        default ``request_timeout``) covers waiting to send, sending and the response.
        Raises NetworkError (the connection is unusable) or RequestTimedOutError.
        """
        call = self.call(api_key, body, version=version, timeout=timeout)
        try:
            return await self._response(call)
        finally:
            call.abandon()  # cancelled: nobody will wait for the answer

    def call(
        self,
        api_key: int,
        body: Any,
        *,
        version: int | None = None,
        timeout: float | None = None,
    ) -> Call:
        """A request not sent yet: ``await call.response()`` sends it and waits for its
        answer (``version`` and ``timeout`` as in ``request``); see :class:`Call`."""
        if api_key == ApiKey.PRODUCE and type(body) is dict and body.get("acks") == 0:
            # No response will come; waiting for one would misalign every later answer.
            raise ValueError("Produce with acks=0 gets no response: use Connection.send")
        version = latest_version(api_key) if version is None else version
        timeout = self.request_timeout if timeout is None else timeout
        return Call(self, api_key, version, self._next_correlation_id(), body, timeout)

    async def _send_call(self, call: Call) -> None:
        """``call.send()``: its frame on the wire, its answer awaited later."""
        await self._send(call, call.request_body, expect_response=True)

    async def _response(self, call: Call, *, bounded: bool = True) -> Any:
        # Sending and waiting are spelled out in both branches rather than put in a
        # helper coroutine: every level of awaits is walked again on each resume.
        try:
            if bounded:
                with trio.move_on_at(call.deadline):
                    if not call.queued:
                        await self._send(call, call.request_body, expect_response=True)
                    await self._wait(call)
            else:
                if not call.queued:
                    await self._send(call, call.request_body, expect_response=True)
                await self._wait(call)
        except NetworkError:
            if call.error is None:
                raise  # broken before its frame was queued
        if call.error is not None:
            raise NetworkError(call.error.message) from call.error
        if not call.finished:
            call.abandon()
            raise RequestTimedOutError(
                f"api {call.api_key} v{call.version} to {self.host}:{self.port}: "
                f"no response within {call.timeout}s"
            )
        return call.body

    async def time_out(self, call: Call) -> None:
        """``call``'s deadline passed: unless it was answered meanwhile, break the
        connection (as Kafka's clients do on a request timeout), which fails it and
        every other call on it with NetworkError. For calls awaited ``bounded=False``."""
        if call.finished or self.state is not ConnectionState.OPEN:
            return
        where = f"api {call.api_key} v{call.version} to {self.host}:{self.port}"
        await self._break(NetworkError(f"{where}: no response within {call.timeout}s"))

    async def send(self, api_key: int, body: Any, *, version: int | None = None) -> None:
        """Send a request that gets no response (Produce with acks=0)."""
        version = latest_version(api_key) if version is None else version
        pending = Call(self, api_key, version, self._next_correlation_id())
        await self._send(pending, body, expect_response=False)

    def _next_correlation_id(self) -> int:
        return next(self._correlation_ids) & 0x7FFF_FFFF

    def _raise_if_unusable(self) -> None:
        if self.state is ConnectionState.OPEN:
            return
        if self._error is not None:
            raise NetworkError(self._error.message) from self._error
        raise NetworkError(f"connection to {self.host}:{self.port} not open")

    async def _send(self, pending: Call, body: Any, *, expect_response: bool) -> None:
        if self.state is not ConnectionState.OPEN:
            self._raise_if_unusable()
        if type(body) is PackedBody:
            buffers = packed_request_frame(
                pending.api_key, pending.version, pending.correlation_id, self.client_id, body
            )
        else:
            buffers = encode_request_buffers(
                pending.api_key, pending.version, pending.correlation_id, self.client_id, body
            )
        if self._writing:  # another caller writes: wait until it hands us the turn
            await self._write_turns.park()
        else:  # uncontended: no schedule point (send_all has its own)
            self._writing = True
        try:
            # A cancel that is already due must land here, where no byte has been written;
            # send_all's own first check comes right after, with no schedule point between.
            await trio.lowlevel.checkpoint_if_cancelled()
            if self.state is not ConnectionState.OPEN:
                self._raise_if_unusable()
            stream = self._stream
            assert stream is not None
            if expect_response:
                self._pending.append(pending)
                pending.queued = True
                pending.request_body = None
            try:
                try:
                    if len(buffers) == 1:  # a request without large record data
                        await socket_io.send_all(stream, buffers[0])
                    else:
                        for chunk in _coalesce(buffers):
                            await socket_io.send_all(stream, chunk)
                except BOUNDARY_ERRORS as exc:
                    raise self._send_errors.translate(exc) from exc
            except NetworkError as exc:
                with trio.CancelScope(shield=True):
                    await self._break(exc)
                raise
            except trio.Cancelled:
                # Part of the frame may be on the wire: nothing after it can be parsed.
                with trio.CancelScope(shield=True):
                    await self._break(NetworkError(f"send to {self.host}:{self.port} cut short"))
                raise
        finally:
            if self._write_turns:  # the oldest waiter's turn (``_writing`` stays set)
                self._write_turns.unpark()
            else:
                self._writing = False


def _raise_error(body: Any) -> None:
    code = body.get("error_code", 0)
    if code:
        error = error_for_code(code)
        raise error(body.get("error_message") or error.name)


def _raise_sasl_error(body: Any) -> None:
    code = body.get("error_code", 0)
    if code:
        error: type[KafkaError] = error_for_code(code)
        if error is KafkaError:
            error = SaslAuthenticationFailedError
        raise error(body.get("error_message") or error.name)


def _coalesce(buffers: list[Buffer]) -> Iterator[Buffer]:
    """Join runs of small buffers; yield large ones untouched (no copy of record data)."""
    run: list[Buffer] = []
    for buf in buffers:
        if (buf.nbytes if isinstance(buf, memoryview) else len(buf)) > COALESCE_MAX_BYTES:
            if run:
                yield run[0] if len(run) == 1 else b"".join(run)
                run = []
            yield buf
        else:
            run.append(buf)
    if run:
        yield run[0] if len(run) == 1 else b"".join(run)

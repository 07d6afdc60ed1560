"""A connection's requests in flight: the ``Call`` each one is, and the reading side,
where the callers waiting for answers take turns reading (``CallReader``).

``net/connection.py``'s module docstring says how the two fit: a lone sequential caller
reads its own response with no task switch; whoever reads hands each frame to the
oldest call (answers come in request order) and passes the role on when its own answer
is in, or when it leaves early.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Final, Protocol

import trio

from minibroker.net import socket_io
from minibroker.net.tls import TlsStream
from minibroker.protocol.api import MalformedResponse, decode_response
from minibroker.protocol.errors import NetworkError
from minibroker.protocol.frames import NEED_DATA, FrameDecoder, FrameError

RECEIVE_SIZE: Final = 256 * 1024
"""Bytes asked of each receive: large enough that a 1 MiB fetch is a handful of reads."""

MAX_RECEIVE_SIZE: Final = 4 * 1024 * 1024
"""Upper bound of one receive while the decoder knows a large frame is in progress (on
TLS: a plain socket receives such a frame into the frame's own buffer)."""


BOUNDARY_ERRORS: Final = (OSError, trio.BrokenResourceError, trio.ClosedResourceError, FrameError)
"""What a socket, a Trio stream or the frame decoder raise: each becomes NetworkError
(``NetworkBoundary``, the one boundary)."""


class NetworkBoundary:
    """The boundary: OS, Trio stream and framing errors become NetworkError, once.

    A class rather than a @contextmanager generator: it sits on every request's path.
    """

    __slots__ = ("host", "port", "verb")

    def __init__(self, verb: str, host: str, port: int) -> None:
        self.verb = verb  # the message is only built on failure: this is the hot path
        self.host = host
        self.port = port

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        if isinstance(exc, BOUNDARY_ERRORS):
            raise self.translate(exc) from exc

    def translate(self, exc: BaseException) -> NetworkError:
        """The NetworkError standing for one of ``BOUNDARY_ERRORS``, for a caller that
        catches them itself (``except BOUNDARY_ERRORS``: free when nothing is raised,
        where entering and leaving ``with`` costs two calls per request)."""
        what = f"{self.verb} {self.host}:{self.port}"
        if isinstance(exc, FrameError):  # includes MalformedResponse
            return NetworkError(f"{what}: protocol violation: {exc}")
        return NetworkError(f"{what}: {exc or type(exc).__name__}")


class Answering(Protocol):
    """A call's connection, as its users see it (net/connection.py's ``Connection``)."""

    host: str
    port: int

    async def _response(self, call: Call, *, bounded: bool = True) -> Any: ...

    async def _send_call(self, call: Call) -> None: ...

    async def time_out(self, call: Call) -> None: ...


class Call:
    """One request and, once read, its response (or the error that stands for it).

    ``Connection.request`` makes one per request. ``Connection.call`` hands one out, so
    that a caller can send it and wait for it in a way another task may carry on:
    ``await call.response()`` sends the request (unless it is already on the wire) and
    waits for the answer until the call's deadline. A task cancelled inside leaves the
    call alive (nothing is abandoned): another task may await ``response()`` again, or
    ``abandon()`` it.
    """

    __slots__ = (
        "abandoned",
        "api_key",
        "body",
        "connection",
        "correlation_id",
        "deadline",
        "error",
        "finished",
        "queued",
        "request_body",
        "timeout",
        "version",
        "wake",
    )

    def __init__(
        self,
        connection: Answering,
        api_key: int,
        version: int,
        correlation_id: int,
        request_body: Any = None,
        timeout: float = math.inf,
    ) -> None:
        self.connection = connection
        self.api_key = api_key
        self.version = version
        self.correlation_id = correlation_id
        self.request_body = request_body  # dropped once the frame is written
        self.timeout = timeout
        # Trio clock: the end of sending and waiting (inf: none, for ``send``'s calls)
        self.deadline = trio.current_time() + timeout if timeout != math.inf else math.inf
        self.body: Any = None
        self.error: NetworkError | None = None
        self.queued = False  # in the connection's FIFO: its frame is (being) written
        self.finished = False  # body or error is set
        self.abandoned = False  # its caller gave up: drop the response
        self.wake: trio.Event | None = None  # set when finished or handed the reader role

    def finish(self) -> None:
        self.finished = True
        if self.wake is not None:
            self.wake.set()

    async def send(self) -> None:
        """Put the request on the wire now, without waiting for its answer: several
        calls sent one after the other are answered in that order (pipelining), each by
        its ``response()``. Raises NetworkError when the connection cannot be used."""
        if not self.queued:
            await self.connection._send_call(self)

    async def response(self, *, bounded: bool = True) -> Any:
        """Send the request if it is not on the wire yet, then wait for its answer.

        Raises NetworkError (the connection is unusable) or RequestTimedOutError (the
        deadline passed: the call is abandoned). ``bounded=False`` waits without a
        cancel scope for the deadline (on a small request's round trip, entering and
        leaving one costs more CPU than the rest of the client's work): the caller then
        enforces the deadline itself with ``Connection.time_out``."""
        return await self.connection._response(self, bounded=bounded)

    def abandon(self) -> None:
        """Give the call up: its response, when it comes, is read and dropped."""
        if not self.finished:
            self.abandoned = True


class CallReader:
    """The reading half of a ``Connection``, which owns one: callers take turns reading
    (see the module docstring); a reader that fails breaks the connection
    (``on_broken``), which fails every call.

    ``pending`` is the connection's FIFO of calls on the wire (it appends, this reads
    their answers off the front); ``attach`` gives the stream once it is open."""

    __slots__ = (
        "_break",
        "_decoder",
        "_pending",
        "_reader",
        "_receive_errors",
        "_socket",
        "_stream",
        "_tls",
        "host",
        "port",
    )

    def __init__(
        self,
        host: str,
        port: int,
        decoder: FrameDecoder,
        pending: deque[Call],
        on_broken: Callable[[NetworkError], Awaitable[None]],
    ) -> None:
        self.host = host
        self.port = port
        self._decoder = decoder
        self._pending = pending
        self._break = on_broken
        self._stream: trio.abc.Stream | None = None
        self._socket: trio.SocketStream | None = None  # _stream, when a plain socket
        self._tls: TlsStream | None = None  # _stream, when TLS
        self._reader: Call | None = None  # the call whose caller reads now
        # The boundary every read passes (stateless: made once, not per request)
        self._receive_errors = NetworkBoundary("receive from", host, port)

    def attach(self, stream: trio.abc.Stream) -> None:
        """Read from ``stream`` (the connection just opened it). A plain socket is read
        directly (net/socket_io.py), a TLS stream through its own methods: told apart
        once here, not on every read."""
        self._stream = stream
        self._socket = stream if isinstance(stream, trio.SocketStream) else None
        self._tls = stream if isinstance(stream, TlsStream) else None

    async def wait(self, pending: Call) -> None:
        """Until ``pending`` is finished: read while nobody else does, else wait to be
        handed its answer or the reader role."""
        try:
            while not pending.finished:
                if self._reader is None:
                    self._reader = pending
                    try:
                        await self._read_until(pending)
                    finally:
                        self._reader = None
                else:
                    pending.wake = trio.Event()
                    await pending.wake.wait()
        finally:
            # Leaving (done, cancelled or timed out) while nobody reads: a caller that
            # was handed the role, or the reader itself, passes it on.
            if self._reader is None:
                self._hand_over_reading(leaving=pending)

    def _hand_over_reading(self, leaving: Call) -> None:
        """Wake the oldest other caller still waiting, so that someone keeps reading."""
        for waiting in self._pending:
            if waiting is not leaving and not waiting.abandoned and waiting.wake is not None:
                waiting.wake.set()
                return

    async def _read_until(self, pending: Call) -> None:
        stream = self._stream
        assert stream is not None
        decoder = self._decoder
        # A plain socket is read here, not through socket_io.receive_some: one level of
        # awaits less to walk on each resume of a lone caller's round trip.
        socket = self._socket
        tls = self._tls
        # The first read waits before trying: the answer to a request just sent is not
        # there yet (a try would cost a system call and an exception per round trip).
        wait_first = True
        try:
            try:
                while not pending.finished:
                    frame = decoder.next_frame()
                    if frame is not NEED_DATA:
                        assert isinstance(frame, (bytes, bytearray))
                        self._deliver(frame)
                        continue
                    length = decoder.frame_length
                    if socket is not None and length is not None and length > RECEIVE_SIZE:
                        # The rest of a large frame (a Fetch answer) goes straight into
                        # its own buffer: no chunk per read and no join of them after.
                        view = decoder.frame_buffer()
                        assert view is not None
                        n = None if wait_first else socket_io.receive_into_now(socket, view)
                        while n is None:
                            await trio.lowlevel.wait_readable(socket.socket)
                            n = socket_io.receive_into_now(socket, view)
                        wait_first = False
                        if not n:
                            raise NetworkError(f"connection closed by {self.host}:{self.port}")
                        decoder.received(n)
                        continue
                    size = decoder.bytes_needed  # more than RECEIVE_SIZE: a large frame
                    if size <= RECEIVE_SIZE:
                        size = RECEIVE_SIZE
                    elif size > MAX_RECEIVE_SIZE:
                        size = MAX_RECEIVE_SIZE
                    data: bytes | bytearray | None
                    if socket is not None:
                        data = None if wait_first else socket_io.receive_now(socket, size)
                        while data is None:
                            await trio.lowlevel.wait_readable(socket.socket)
                            data = socket_io.receive_now(socket, size)
                    elif tls is not None:
                        data = await tls.receive_some(size, wait_first=wait_first)
                    else:
                        data = await stream.receive_some(size)
                    wait_first = False
                    if not data:
                        raise NetworkError(f"connection closed by {self.host}:{self.port}")
                    # The usual read is exactly one answer: no copy into the decoder.
                    whole = decoder.whole_frame(data) if type(data) is bytes else None
                    if whole is None:
                        decoder.feed(data)
                    else:
                        self._deliver(whole)
            except BOUNDARY_ERRORS as exc:  # the boundary (see net/connection.py)
                raise self._receive_errors.translate(exc) from exc
        except NetworkError as exc:
            with trio.CancelScope(shield=True):
                await self._break(exc)

    def _deliver(self, frame: bytes | bytearray) -> None:
        if not self._pending:
            raise MalformedResponse("a response to no request")
        pending = self._pending[0]  # popped only once valid: a failure fails it too
        correlation_id, body = decode_response(frame, pending.api_key, pending.version)
        if correlation_id != pending.correlation_id:
            raise MalformedResponse(
                f"correlation id {correlation_id}, expected {pending.correlation_id}"
            )
        self._pending.popleft()
        if not pending.abandoned:
            pending.body = body
            pending.finish()

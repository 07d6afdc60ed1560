"""The broker's Trio TCP server: frames in, replies out, in request order.

How this works. Each accepted connection runs two tasks:

- the *reader* receives bytes, cuts them into frames (``FrameDecoder``) and hands each
  frame to the request handler, which answers synchronously with a ``Reply``: the
  response buffers, ``None`` (no response: Produce with acks=0), or ``Pending`` when
  the answer has to wait (a long-polling Fetch, later acks=all). Only a ``Pending``
  reply costs a task; most requests are answered inline, which is what makes small
  pipelined requests cheap.
- the *writer* takes the replies' slots from the connection's queue in arrival order
  and writes each one when it is ready, so responses leave strictly in request order
  even when a later request finished first. Consecutive ready replies are sent together.
  When every reply of a read is ready and the writer is idle, the reader sends them
  itself: a round trip then costs no task switch.

The queue's bound (``MAX_IN_FLIGHT``) is the back-pressure: a client that pipelines
faster than it reads its responses stops being read, and only its own tasks block.
Fairness: the reader yields to other connections every ``FRAMES_PER_TURN`` frames, so
one client's burst of tiny requests cannot hold the event loop. A
frame that cannot be parsed (bad length, header not decodable) closes that connection
after the replies already queued are written, with one log line; the handler is
responsible for answering every request whose header parses.

A connection is idle when it has nothing in flight and has sent nothing for
``connections.max.idle.ms``; it is then closed.
"""

from __future__ import annotations

import errno
import logging
import math
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, TypeAlias

import trio

from minibroker.protocol.errors import MinibrokerError
from minibroker.protocol.frames import NEED_DATA, FrameDecoder, FrameError

log = logging.getLogger(__name__)

Buffer: TypeAlias = bytes | bytearray | memoryview

MAX_IN_FLIGHT = 256
"""Requests read but not yet answered, per connection: bounds memory per client."""


FRAMES_PER_TURN = 64
"""Frames a reader handles before letting other tasks run (a burst of ~40 us requests)."""

LAST_CHANCE_S = 0.001
"""After the idle timer fires, how long a final receive may take (data already queued)."""

RECEIVE_BYTES = 256 * 1024
"""Usual receive size: many small requests per call."""

MAX_RECEIVE = 4 * 1024 * 1024
"""While a large frame is arriving, receive up to what it still needs, up to this."""

COALESCE_BYTES = 64 * 1024
"""Ready responses smaller than this are joined into one send (fewer syscalls)."""

ACCEPT_BACKLOG = 1024
"""listen() backlog: a burst of thousands of connects should queue, not be refused."""


class Pending:
    """A reply that is not ready yet: ``wait()`` produces it (in its own task)."""

    __slots__ = ("wait",)

    def __init__(self, wait: Callable[[], Awaitable[Sequence[Buffer] | None]]) -> None:
        self.wait = wait


Reply: TypeAlias = Sequence[Buffer] | Pending | None
"""Response buffers (length prefix included), no response, or a pending response."""


class ListenError(MinibrokerError):
    """The listener cannot be bound (address in use, bad host, no permission)."""


class CloseConnection(Exception):
    """Raised by a handler for a frame it cannot answer (its header does not parse)."""


class RequestHandler(Protocol):
    def handle(self, frame: bytes) -> Reply:
        """Answer one request frame; raise CloseConnection if it is unparseable."""
        ...


class _Slot:
    """One request's place in its connection's response order."""

    __slots__ = ("buffers", "done", "event")

    def __init__(self) -> None:
        self.buffers: Sequence[Buffer] | None = None
        self.done = False
        self.event: trio.Event | None = None

    def finish(self, buffers: Sequence[Buffer] | None) -> None:
        self.buffers = buffers
        self.done = True
        if self.event is not None:
            self.event.set()

    async def wait(self) -> None:
        if not self.done:
            self.event = trio.Event()
            await self.event.wait()


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
    ) -> None:
        self.handler = handler
        self.host = host
        self.port = port
        self.max_frame_bytes = max_frame_bytes
        self.idle_timeout_s = idle_timeout_s
        self._listeners: list[trio.SocketListener] = []
        self.connections = 0
        self.bytes_in = 0
        self.bytes_out = 0

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

    async def _serve_connection(self, stream: trio.SocketStream) -> None:
        self.connections += 1
        connection = _Connection(self, stream)
        try:
            await connection.serve()
        except* Exception as group:
            _log_connection_failure(connection.peer, group)
        finally:
            self.connections -= 1
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(stream)


class _Connection:
    """One client connection: its reader, its writer and the replies queued between.

    The queue is a plain deque plus two events rather than a memory channel: queuing a
    reply that is already complete then costs no checkpoint, which matters for small
    pipelined requests.
    """

    def __init__(self, server: BrokerServer, stream: trio.SocketStream) -> None:
        self.server = server
        self.stream = stream
        self.peer = _peer_name(stream)
        self.queue: deque[_Slot] = deque()
        self.writing = 0  # replies taken off the queue and being written
        self.reading_done = False
        self.writer_wakeup: trio.Event | None = None
        self.queue_space: trio.Event | None = None

    @property
    def in_flight(self) -> int:
        """Requests read whose response is not fully written."""
        return len(self.queue) + self.writing

    async def serve(self) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._write_replies, nursery)
            try:
                await self._read_requests(nursery)
            finally:
                self.reading_done = True
                self._wake_writer()

    def _wake_writer(self) -> None:
        if self.writer_wakeup is not None:
            self.writer_wakeup.set()
            self.writer_wakeup = None

    async def _read_requests(self, nursery: trio.Nursery) -> None:
        server = self.server
        decoder = FrameDecoder(server.max_frame_bytes)
        handle = server.handler.handle
        queue = self.queue
        handled = 0
        while True:
            data = await self._receive(min(max(RECEIVE_BYTES, decoder.bytes_needed), MAX_RECEIVE))
            if not data:
                return  # EOF or idle: the replies already queued still go out
            server.bytes_in += len(data)
            decoder.feed(data)
            pending = False  # whether this read queued a reply that must still wait
            while True:
                try:
                    frame = decoder.next_frame()
                except FrameError as exc:
                    log.warning("closing connection from %s: %s", self.peer, exc)
                    return
                if frame is NEED_DATA:
                    break
                assert isinstance(frame, bytes)
                slot = _Slot()
                try:
                    reply = handle(frame)
                except CloseConnection as exc:
                    log.warning("closing connection from %s: %s", self.peer, exc)
                    return
                if isinstance(reply, Pending):
                    nursery.start_soon(_complete, slot, reply)
                    pending = True
                else:
                    slot.finish(reply)
                queue.append(slot)
                handled += 1
                if len(queue) >= MAX_IN_FLIGHT or handled % FRAMES_PER_TURN == 0:
                    self._wake_writer()
                    while len(queue) >= MAX_IN_FLIGHT:  # back-pressure: stop reading
                        self.queue_space = trio.Event()
                        await self.queue_space.wait()
                    await trio.lowlevel.checkpoint()  # fairness to other connections
            if not queue:
                continue
            if not pending and self.writer_wakeup is not None:
                # Every reply of this read is ready and the writer sits idle: send them
                # from here, sparing a task switch per round trip.
                batch = list(queue)
                queue.clear()
                self.writing = len(batch)
                await self._send(batch)
                self.writing = 0
            else:
                self._wake_writer()

    async def _receive(self, size: int) -> bytes:
        """Next received bytes; b"" at EOF or once idle for the idle timeout."""
        while True:
            with trio.move_on_after(self.server.idle_timeout_s):
                try:
                    return await self.stream.receive_some(size)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return b""
            if self.in_flight == 0:
                # Bytes that arrived just as the timer fired (a descheduled process
                # sees both at once) still count: one more, immediate attempt.
                with trio.move_on_after(LAST_CHANCE_S):
                    try:
                        return await self.stream.receive_some(size)
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        return b""
                log.info("closing idle connection from %s", self.peer)
                return b""

    async def _write_replies(self, nursery: trio.Nursery) -> None:
        queue = self.queue
        try:
            while True:
                if not queue:
                    if self.reading_done:
                        return
                    self.writer_wakeup = trio.Event()
                    await self.writer_wakeup.wait()
                    continue
                await queue[0].wait()
                batch: list[_Slot] = []
                while queue and queue[0].done:  # every ready reply shares the sends
                    batch.append(queue.popleft())
                self.writing = len(batch)
                if self.queue_space is not None:
                    self.queue_space.set()
                    self.queue_space = None
                await self._send(batch)
                self.writing = 0
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            log.debug("connection from %s broke while writing: %r", self.peer, exc)
            nursery.cancel_scope.cancel()

    async def _send(self, batch: list[_Slot]) -> None:
        send_all = self.stream.send_all
        small: list[Buffer] = []
        small_bytes = 0
        for slot in batch:
            for buf in slot.buffers or ():
                n = len(buf)
                self.server.bytes_out += n
                if n >= COALESCE_BYTES:
                    if small:
                        await send_all(b"".join(small))
                        small, small_bytes = [], 0
                    await send_all(buf)  # large record data: sent from its own memory
                    continue
                small.append(buf)
                small_bytes += n
                if small_bytes >= COALESCE_BYTES:
                    await send_all(b"".join(small))
                    small, small_bytes = [], 0
        if small:
            await send_all(b"".join(small))


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


async def _complete(slot: _Slot, reply: Pending) -> None:
    """Run a pending reply and put its result in the slot (even if it fails)."""
    buffers: Sequence[Buffer] | None = None
    try:
        buffers = await reply.wait()
    finally:
        slot.finish(buffers)


def _peer_name(stream: trio.SocketStream) -> str:
    try:
        host, port = stream.socket.getpeername()[:2]
    except OSError:
        return "?"
    return f"{host}:{port}"


def idle_timeout_seconds(ms: int) -> float:
    """connections.max.idle.ms as seconds for trio (negative = never)."""
    return math.inf if ms < 0 else ms / 1000.0

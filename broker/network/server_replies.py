"""The writing half of a server connection (broker/network/server_connection.py): reply slots
in request order, and the writer that sends them.

Each request read gets a ``ReplySlot`` in the connection's queue; the writer takes the
slots in order, waits for the first to be ready, and sends every ready reply together:
small buffers joined into one send, large record data (a Fetch answer's segment bytes)
from its own memory, with writev on a plain socket. A reader whose read's one reply is
ready while nothing is queued writes it itself (``write_now``): a round trip then
costs no task switch. A peer that accepts no byte of a response for the idle timeout is
refused (``stalled_response``) and the connection ends.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Sequence
from typing import Protocol

import trio

from minibroker.broker.network.queued_bytes import QueuedBytes
from minibroker.broker.requests.log_limiter import LogRateLimiter
from minibroker.broker.requests.request_handler import (
    Authenticator,
    Buffer,
    CloseConnection,
    Pending,
    RequestHandler,
)
from minibroker.net import socket_io
from minibroker.net.tls import TlsStream

# The server's logger: a connection's lines are the server's to its operators.
log = logging.getLogger("minibroker.broker.network.server")
refusal_log = LogRateLimiter(log)
"""Closes a client can trigger at will (shared with the server's TLS handshake refusals)."""


COALESCE_BYTES = 64 * 1024
"""Ready responses smaller than this are joined into one send (fewer syscalls)."""


class Server(Protocol):
    """What a connection uses of the server that accepted it (``BrokerServer``): its
    handler and limits, the broker-wide byte budget, and the counters it adds to."""

    handler: RequestHandler
    sasl: Authenticator | None
    max_frame_bytes: int
    idle_timeout_s: float
    request_receive_timeout_s: float
    max_unsent_bytes: int
    queued_bytes: QueuedBytes
    closed: dict[str, int]
    """Connections closed, by reason (broker/network/server.py's CLOSE_REASONS)."""
    bytes_in: int
    bytes_out: int


class ReplySlot:
    """One request's place in its connection's response order."""

    __slots__ = ("buffers", "closing", "done", "event", "nbytes")

    def __init__(self) -> None:
        self.buffers: Sequence[Buffer] | None = None
        self.nbytes = 0
        self.done = False
        self.event: trio.Event | None = None
        self.closing: CloseConnection | None = None
        """Set when the connection ends once this reply is sent (a failed login)."""

    def finish(self, buffers: Sequence[Buffer] | None) -> None:
        self.buffers = buffers
        if buffers:
            self.nbytes = sum(_nbytes(buf) for buf in buffers)
        self.done = True
        if self.event is not None:
            self.event.set()

    async def wait(self) -> None:
        if not self.done:
            self.event = trio.Event()
            await self.event.wait()


class ReplyWriter:
    """A connection's writing half (``ServerConnection`` owns one as ``replies``): the
    queue of reply slots, the bytes they hold, and the writer task that sends them.
    ``wake_reader`` is told whenever queue space or bytes are freed (the reader may be
    waiting for either)."""

    def __init__(
        self,
        server: Server,
        stream: trio.abc.Stream,
        fd: int,
        peer: str,
        wake_reader: Callable[[], None],
    ) -> None:
        self.server = server
        self.stream = stream
        self.fd = fd
        """A plain socket's descriptor (-1 for any other stream): it stays open while
        the connection is served (the server closes the stream after)."""
        self.peer = peer
        self._wake_reader = wake_reader
        self.queue: deque[ReplySlot] = deque()
        self.writing = 0  # replies taken off the queue and being written
        self.reading_done = False
        self.wakeup: trio.Event | None = None
        """Set while the writer task waits for work (it is idle)."""
        self.pending = 0  # replies still being worked out
        self.unsent_bytes = 0

    def wake(self) -> None:
        """Let the writer task look at the queue again."""
        if self.wakeup is not None:
            self.wakeup.set()
            self.wakeup = None

    def reading_ended(self) -> None:
        """The reader is done: the writer sends what is queued, then returns."""
        self.reading_done = True
        self.wake()

    def queued(self, slot: ReplySlot) -> None:
        """A reply became ready: its bytes are queued until written."""
        self.unsent_bytes += slot.nbytes
        self.server.queued_bytes.add(slot.nbytes)

    def sent(self, batch: list[ReplySlot]) -> None:
        sent = sum(slot.nbytes for slot in batch)
        self.unsent_bytes -= sent
        self.server.queued_bytes.add(-sent)
        self._wake_reader()

    def write_now(self, data: Buffer) -> memoryview | None:
        """Write what the socket takes of ``data`` now (encrypted first under TLS); the
        rest, or None. The rest is counted in ``bytes_out`` when it is sent."""
        if self.fd < 0:
            stream = self.stream
            assert isinstance(stream, TlsStream)
            rest = stream.send_now(data)
            self.server.bytes_out += _nbytes(data) - (0 if rest is None else rest.nbytes)
            return rest
        sent = socket_io.write_fd_now(self.fd, data)  # once per small request
        self.server.bytes_out += sent
        return None if sent == len(data) else memoryview(data)[sent:]

    def refuse(self, reason: str, why: str) -> None:
        self.server.closed[reason] += 1
        refusal_log.warning("closing connection from %s: %s", self.peer, why)

    async def complete(self, slot: ReplySlot, reply: Pending) -> None:
        """Run a pending reply and put its result in the slot (even if it fails). A
        reply that ends the connection (``CloseConnection``) is sent, then the
        connection ends."""
        buffers: Sequence[Buffer] | None = None
        try:
            buffers = await reply.wait()
        except CloseConnection as exc:
            buffers = exc.reply
            slot.closing = exc
        finally:
            slot.finish(buffers)
            self.queued(slot)
            self.pending -= 1
            self._wake_reader()

    async def run(self, nursery: trio.Nursery) -> None:
        queue = self.queue
        try:
            while True:
                if not queue:
                    if self.reading_done:
                        return
                    self.wakeup = trio.Event()
                    await self.wakeup.wait()
                    continue
                await queue[0].wait()
                batch: list[ReplySlot] = []
                while queue and queue[0].done:  # every ready reply shares the sends
                    batch.append(queue.popleft())
                    if batch[-1].closing is not None:
                        break  # the last reply of this connection
                self.writing = len(batch)
                self._wake_reader()  # queue space
                await self.send(batch)
                self.writing = 0
                self.sent(batch)
                closing = batch[-1].closing
                if closing is not None:
                    self.refuse(closing.reason, str(closing))
                    nursery.cancel_scope.cancel()
                    return
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            log.debug("connection from %s broke while writing: %r", self.peer, exc)
            nursery.cancel_scope.cancel()

    async def send(self, batch: list[ReplySlot]) -> None:
        chunks: list[Buffer] = []  # small buffers joined, large record data as it is
        small: list[Buffer] = []
        small_bytes = 0
        for slot in batch:
            for buf in slot.buffers or ():
                n = len(buf)
                self.server.bytes_out += n
                if n >= COALESCE_BYTES:
                    if small:
                        chunks.append(b"".join(small))
                        small, small_bytes = [], 0
                    chunks.append(buf)  # large record data: sent from its own memory
                    continue
                small.append(buf)
                small_bytes += n
                if small_bytes >= COALESCE_BYTES:
                    chunks.append(b"".join(small))
                    small, small_bytes = [], 0
        if small:
            chunks.append(b"".join(small))
        stream = self.stream
        if isinstance(stream, trio.SocketStream):
            await self._write_buffers(stream, chunks)
            return
        for chunk in chunks:
            await self._send_all(chunk)

    async def _write_buffers(self, stream: trio.SocketStream, chunks: list[Buffer]) -> None:
        """Write ``chunks`` with writev (net/socket_io.py): what follows a large record
        buffer (a Kafka Fetch answer's trailing tagged fields) leaves with its last
        bytes. A peer that accepts none of it for the idle timeout is gone."""
        chunks = socket_io.write_buffers_now(stream, chunks)
        stalled = self.server.idle_timeout_s
        while chunks:
            with trio.move_on_after(stalled) as scope:
                await trio.lowlevel.wait_writable(stream.socket)
            if scope.cancelled_caught:
                self.refuse("stalled_response", f"no response byte accepted for {stalled:g} s")
                raise trio.BrokenResourceError("peer stopped reading its responses")
            chunks = socket_io.write_buffers_now(stream, chunks)

    async def _send_all(self, data: Buffer) -> None:
        """Write ``data``; a peer that accepts none of it for the idle timeout is gone."""
        stream = self.stream
        if isinstance(stream, trio.SocketStream):
            # Most replies fit the socket buffer: written at once, no timer, no
            # scheduler pass (net/socket_io.py); the rest goes out below.
            sent = socket_io.write_now(stream, data)
            if sent == len(data):
                return
            data = memoryview(data)[sent:]
        elif isinstance(stream, TlsStream):
            rest = stream.send_now(data)  # the same under TLS
            if rest is None:
                return
            data = rest
        stalled = self.server.idle_timeout_s
        with trio.move_on_after(stalled) as scope:
            await stream.send_all(data)
        if scope.cancelled_caught:
            self.refuse("stalled_response", f"no response byte accepted for {stalled:g} s")
            raise trio.BrokenResourceError("peer stopped reading its responses")


def _nbytes(buf: Buffer) -> int:
    return buf.nbytes if isinstance(buf, memoryview) else len(buf)

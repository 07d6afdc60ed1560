"""One client connection of the broker's server: frames in, replies out, in request order.

How this works. Each accepted connection (broker/network/server.py) runs two tasks:

- the *reader* receives bytes, cuts them into frames (``FrameDecoder``) and hands each
  frame to the request handler, which answers synchronously with a ``Reply``: the
  response buffers, ``None`` (no response: Produce with acks=0), or ``Pending`` when
  the answer has to wait (a long-polling Fetch, later acks=all). Only a ``Pending``
  reply costs a task; most requests are answered inline, which is what makes small
  pipelined requests cheap.
- the *writer* (broker/network/server_replies.py's ``ReplyWriter``, which each
  ``ServerConnection`` owns as ``replies``) takes the replies' slots from its queue in
  arrival order and writes each one when it is ready, so responses leave strictly in request order
  even when a later request finished first. Consecutive ready replies are sent together.
  When every reply of a read is ready and the writer is idle, the reader sends them
  itself: a round trip then costs no task switch.

The connection only cuts frames: what a frame means is the handler's business
(broker/requests/request_handler.py), so any codec whose frames are length-prefixed can be
served by this loop. On a SASL listener the connection gets its login state from the
server's authenticator (``sasl.exchange``) and passes it to the handler as ``auth``
with every frame; a successful login replaces the connection's session.

Memory: what a client makes the broker hold is bounded, whatever the client does.

- Per connection, the reader stops handling requests while ``MAX_IN_FLIGHT`` replies
  are queued, ``MAX_PENDING`` of them are still being worked out (their size is known
  only when they finish), or the queued, unsent response bytes reach
  ``max_unsent_bytes``. A client that pipelines requests and never reads its
  responses (a 4 KiB receive buffer, Fetches of a large partition) is simply not read
  any more, holding at most ``max_unsent_bytes`` plus ``MAX_PENDING`` + 1 responses
  and one received chunk; other connections are not affected.
- Broker-wide, the connection counts the request bytes it holds and the response bytes
  it has queued in the server's ``QueuedBytes`` (``queued.max.request.bytes``,
  broker/network/queued_bytes.py), and reads no new request while that budget is full and it
  holds at least its share of it.
- A response the client stops accepting (no byte taken for ``connections.max.idle.ms``)
  closes the connection, so a stalled peer cannot hold its share forever.

Fairness: the reader yields to other connections every ``FRAMES_PER_TURN`` frames, so
one client's burst of tiny requests cannot hold the event loop; a large request whose
handler works in chunks (``Pending.ordered``) holds its own connection's next requests,
not the loop.

Reads: the reader tries the socket at once (what is there costs no scheduler pass), but
right after answering every request it has read, a client that sends one request and
waits has sent nothing yet: a try would only fail (a system call and an exception per
round trip). A connection whose tries there keep failing waits first instead, probing
now and then (``read_credit``), so a send-and-wait client costs one read per request
and a pipelining one still finds its next request read at once. A read that is exactly
one frame (such a client's request) is cut without passing through the decoder's
buffer, and a plain socket is read, waited on and written through its descriptor,
looked up once per connection.

Deadlines: a connection is idle when it has nothing in flight and has sent nothing for
``connections.max.idle.ms``; it is then closed. A request frame that has started
arriving must be complete within ``request_receive_timeout_s``
(``request.receive.timeout.ms``), or the connection is closed: a client trickling one
byte a second cannot keep a connection and its buffers forever. Between frames a plain
socket's reads arm no timer each (a cancel scope costs a small round trip a few
microseconds): one idle watch per connection (``ServerConnection._watch_idle``) wakes the
read still waiting at the idle deadline; frames in progress and TLS reads keep a
deadline per read.

A frame that cannot be parsed (bad length, header not decodable) closes that connection
after the replies already queued are written; the handler is responsible for answering
every request whose header parses. The log lines a client can cause this way are rate
limited (broker/requests/log_limiter.py).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import trio

from minibroker.broker.network.server_replies import ReplySlot, ReplyWriter, Server, log
from minibroker.broker.requests.request_handler import CloseConnection, Login, Pending, Reply
from minibroker.net import socket_io
from minibroker.net.socket_io import read_fd_now, readable_now
from minibroker.net.tls import DECRYPT_BYTES, TlsStream
from minibroker.protocol.frames import NEED_DATA, FrameDecoder, FrameError
from minibroker.protocol.session import ConnectionMute, Session

wait_readable = trio.lowlevel.wait_readable

MAX_IN_FLIGHT = 256
"""Requests read but not yet answered, per connection: bounds memory per client."""

MAX_PENDING = 8
"""Replies of one connection still being worked out (long polls, acks=all): their size
is unknown until they finish, so their number is what bounds them. Producers pipeline
5 by default; a consumer has one Fetch in flight."""


FRAMES_PER_TURN = 64
"""Frames a reader handles before letting other tasks run (a burst of ~40 us requests)."""

LAST_CHANCE_S = 0.001
"""After the idle timer fires, how long a final receive may take (data already queued)."""

RECEIVE_BYTES = 256 * 1024
"""Usual receive size: many small requests per call."""

MAX_RECEIVE = 4 * 1024 * 1024
"""While a large frame is arriving, receive up to what it still needs, up to this."""

ANSWERED_READ_PROBE = 16
"""A reader that keeps finding nothing when it reads at once after answering (its client
sends one request and waits for the answer) waits first instead; every this many
answers it tries at once again, to notice a client that has started pipelining."""

MAX_READ_CREDIT = 4
"""How many reads after an answer in a row may find nothing before a reader that
usually found the next request there already starts waiting first."""

MAX_UNSENT_BYTES = 1024 * 1024
"""Queued response bytes at which a connection stops being read: a client that reads
at all drains this within a round trip; one that does not is held to it (plus one
response, which may be up to fetch.max.bytes)."""


class ServerConnection:
    """One client connection: its reader, and the writer (``replies``) that owns the
    replies queued between.

    The queue is a plain deque plus two events rather than a memory channel: queuing a
    reply that is already complete then costs no checkpoint, which matters for small
    pipelined requests.

    Byte accounting: ``request_bytes`` is what this connection's decoder holds or has
    reserved (a frame whose prefix is in counts whole), ``replies.unsent_bytes`` the responses
    queued and not yet written; both are part of the server's ``QueuedBytes``.
    """

    def __init__(
        self, server: Server, stream: trio.abc.Stream, peer: str, session: Session
    ) -> None:
        self.server = server
        self.stream = stream
        self.fd = stream.socket.fileno() if isinstance(stream, trio.SocketStream) else -1
        self.peer = peer
        self.session = session
        """Who this connection speaks for; a SASL login replaces it."""
        self.handle: Callable[[bytes, Session], Reply] = server.handler.handle
        self.login: Login | None = None
        if server.sasl is not None:
            self.login = server.sasl.exchange(peer, self._authenticated)
            self.handle = functools.partial(server.handler.handle, auth=self.login)
        self.replies = ReplyWriter(server, stream, self.fd, peer, self._wake_reader)
        self.reader_wakeup: trio.Event | None = None
        self.request_bytes = 0
        # A plain socket's reads between frames have no timer of their own: the idle
        # watch (_watch_idle) ends the one still waiting at ``idle_at``.
        self.watched_reads = self.fd >= 0
        self._now = trio.lowlevel.current_clock().current_time
        self.idle_at = math.inf  # when the read waiting now makes the connection idle
        self.read_waiting = False
        # Reads right after answering everything read so far: ``read_credit`` > 0 tries
        # them at once (a pipelining client's next request is often there already),
        # 0 waits first (a send-and-wait client's never is: the try costs a system call
        # and an exception), probing again every ANSWERED_READ_PROBE answers.
        self.read_credit = 1
        self.answers_until_probe = ANSWERED_READ_PROBE

    def _authenticated(self, principal: str) -> None:
        session = self.session
        self.session = Session(
            principal, session.client_host, session.listener, session.peer, session.mute
        )

    @property
    def in_flight(self) -> int:
        """Requests read whose response is not fully written."""
        replies = self.replies
        return len(replies.queue) + replies.writing

    async def serve(self) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.replies.run, nursery)
            idle_watch = trio.CancelScope()
            if self.watched_reads and self.server.idle_timeout_s < math.inf:
                self.idle_at = trio.current_time() + self.server.idle_timeout_s
                nursery.start_soon(self._watch_idle, idle_watch)
            session_watch = trio.CancelScope()
            if self.login is not None and self.login.expires:
                nursery.start_soon(self._watch_session, session_watch)
            try:
                await self._read_requests(nursery)
            finally:
                idle_watch.cancel()
                session_watch.cancel()
                self.replies.reading_ended()

    async def _watch_idle(self, scope: trio.CancelScope) -> None:
        """The idle timer of a plain socket's reads between frames, one per connection
        instead of one per read: a cancel scope per wait costs a small request's round
        trip ~4 us. Each read sets ``idle_at`` (it only moves later); this task sleeps
        until the deadline it last saw, and when a read is still waiting past
        ``idle_at`` with nothing in flight and no byte arrived, it counts the close and
        wakes that read (``notify_closing``: the read returns b"", and the connection
        ends as on any idle timeout). The writer is idle then (nothing in flight), so
        only the read is woken."""
        server = self.server
        assert isinstance(self.stream, trio.SocketStream)
        sock = self.stream.socket
        with scope:
            while True:
                await trio.sleep_until(self.idle_at)
                now = trio.current_time()
                if now < self.idle_at:
                    continue  # reads came since: sleep until the later deadline
                if not self.read_waiting or self.in_flight:
                    # Busy, or answers still owed: idle only after another full period
                    # (as the per-read timer did).
                    self.idle_at = now + server.idle_timeout_s
                    continue
                if readable_now(sock.fileno()):
                    # Bytes that arrived just as the deadline passed (a descheduled
                    # process sees both at once) still count: the read wakes for them.
                    self.idle_at = now + server.idle_timeout_s
                    continue
                server.closed["idle"] += 1
                log.info("closing idle connection from %s", self.peer)
                trio.lowlevel.notify_closing(sock)
                return

    async def _watch_session(self, scope: trio.CancelScope) -> None:
        """A SASL login's session deadline (connections.max.reauth.ms: its watch, in
        broker/security/sasl_session.py, makes the login take the next request)."""
        assert self.login is not None
        with scope:
            await self.login.watch_session()

    def release_queued_bytes(self) -> None:
        """Give this connection's bytes back to the budget (it is closed)."""
        replies = self.replies
        self.server.queued_bytes.add(-(self.request_bytes + replies.unsent_bytes))
        self.request_bytes = replies.unsent_bytes = 0

    def _wake_reader(self) -> None:
        if self.reader_wakeup is not None:
            self.reader_wakeup.set()
            self.reader_wakeup = None

    def _held(self) -> int:
        return self.request_bytes + self.replies.unsent_bytes

    def _hold_request_bytes(self, decoder: FrameDecoder) -> None:
        """Count what the decoder holds, plus the rest of a frame whose length is known."""
        held = decoder.buffered
        if decoder.frame_length is not None:
            held += decoder.bytes_needed
        if held != self.request_bytes:
            self.server.queued_bytes.add(held - self.request_bytes)
            self.request_bytes = held

    def _backlogged(self) -> bool:
        """Whether this client must read its responses before more requests are handled."""
        replies = self.replies
        return (
            len(replies.queue) >= MAX_IN_FLIGHT
            or replies.pending >= MAX_PENDING
            or replies.unsent_bytes >= self.server.max_unsent_bytes
        )

    async def _wait_until_drained(self) -> bool:
        """Wait while backlogged (the writer drains as the client reads); True if waited."""
        if not self._backlogged():
            return False
        self.replies.wake()
        while self._backlogged():
            self.reader_wakeup = trio.Event()
            await self.reader_wakeup.wait()
        return True

    async def _read_requests(self, nursery: trio.Nursery) -> None:
        server = self.server
        decoder = FrameDecoder(server.max_frame_bytes)
        handle = self.handle
        replies = self.replies
        queue = replies.queue
        budget = server.queued_bytes
        handled = 0
        # A socket's one-buffer replies (plain or TLS) may be written by the reader at once.
        direct = isinstance(self.stream, (trio.SocketStream, TlsStream))
        frame_started = math.inf  # when the first bytes of the frame in progress came
        reserved = False  # whether the frame in progress is counted whole
        answered = False  # whether the last read's requests were all answered already
        buffered = 0  # bytes of the next frame(s) the decoder holds
        while True:
            if not reserved:
                # A new request (or one whose size just became known) is admitted only
                # while the broker-wide budget has room.
                # (``_backlogged()`` and ``budget.full`` written out: they are asked
                # once per request.)
                waited = (
                    len(queue) >= MAX_IN_FLIGHT
                    or replies.pending >= MAX_PENDING
                    or replies.unsent_bytes >= server.max_unsent_bytes
                ) and await self._wait_until_drained()
                if budget.used >= budget.limit:
                    replies.wake()  # our own queued replies may be what fills it
                    await server.queued_bytes.wait_for_room(self._held)
                    waited = True
                if waited and frame_started != math.inf:
                    frame_started = trio.current_time()  # paused by us, not the client
            # What the decoder holds was counted after the last read (only reads and
            # handled frames change it).
            if buffered:
                reserved = decoder.frame_length is not None
                size = min(max(RECEIVE_BYTES, decoder.bytes_needed), MAX_RECEIVE)
            else:
                reserved, size = False, RECEIVE_BYTES
            mute = self.session.mute
            if mute is not None and mute.until > 0.0:
                await self._wait_unmuted(mute)  # a client quota's throttle
                if frame_started != math.inf:
                    frame_started = trio.current_time()  # paused by us, not the client
            frame_deadline = frame_started + server.request_receive_timeout_s
            data = await self._receive(size, frame_deadline, answered)
            if not data:
                return  # EOF, idle or too slow: the replies already queued still go out
            server.bytes_in += len(data)
            # A read that is one whole request (send-and-wait) skips the decoder's buffer.
            frame: bytes | None = decoder.whole_frame(data) if type(data) is bytes else None
            whole = frame is not None  # then the decoder holds nothing, before and after
            if not whole:
                decoder.feed(data)
            pending = False  # whether this read queued a reply that must still wait
            answered = False
            while True:
                if frame is None:
                    if whole:
                        break  # the read's one frame is handled and the decoder is empty
                    try:
                        next_frame = decoder.next_frame()
                    except FrameError as exc:
                        replies.refuse("bad_frame", str(exc))
                        return
                    if next_frame is NEED_DATA:
                        break
                    assert isinstance(next_frame, bytes)
                    frame = next_frame
                reserved = False
                frame_started = math.inf  # the next frame's bytes, if any: timed below
                try:
                    reply = handle(frame, self.session)
                except CloseConnection as exc:
                    if exc.reply is not None:  # the refusal goes out before the close
                        slot = ReplySlot()
                        slot.finish(exc.reply)
                        replies.queued(slot)
                        queue.append(slot)
                    replies.refuse(exc.reason, str(exc))
                    return
                frame = None
                handled += 1
                if (
                    direct
                    and not queue
                    and (whole or not decoder.buffered)
                    and type(reply) is list
                    and len(reply) == 1
                    and replies.wakeup is not None
                ):
                    # The one reply of this read, nothing queued ahead of it and the writer
                    # idle: written now, with no slot, no copy and no scheduler pass when
                    # the socket takes it whole (the usual case); any rest is queued.
                    rest = replies.write_now(reply[0])
                    if rest is None:
                        answered = True
                        if handled % FRAMES_PER_TURN == 0:
                            await trio.lowlevel.checkpoint()  # fairness to other connections
                        continue
                    reply = [rest]
                answered = False
                slot = ReplySlot()
                if isinstance(reply, Pending):
                    replies.pending += 1
                    nursery.start_soon(replies.complete, slot, reply)
                    pending = True
                    queue.append(slot)
                    if reply.ordered is not None:
                        # Later requests follow this one's effects (a chunked Produce's
                        # appends): read on once they are done; others run meanwhile.
                        replies.wake()
                        await reply.ordered.wait()
                else:
                    slot.finish(reply)
                    replies.queued(slot)
                    queue.append(slot)
                if self._backlogged() or handled % FRAMES_PER_TURN == 0:
                    self._hold_request_bytes(decoder)
                    if await self._wait_until_drained() and decoder.buffered:
                        frame_started = trio.current_time()
                    await trio.lowlevel.checkpoint()  # fairness to other connections
            buffered = 0 if whole else decoder.buffered
            if buffered and frame_started == math.inf:
                frame_started = trio.current_time()  # a frame has started arriving
            if buffered or self.request_bytes:
                self._hold_request_bytes(decoder)  # the frames handled are no longer held
            if not queue:
                continue
            if not pending and replies.wakeup is not None:
                # Every reply of this read is ready and the writer sits idle: send them
                # from here, sparing a task switch per round trip.
                batch = list(queue)
                queue.clear()
                replies.writing = len(batch)
                await replies.send(batch)
                replies.writing = 0
                replies.sent(batch)
            else:
                replies.wake()

    async def _wait_unmuted(self, mute: ConnectionMute) -> None:
        """Read nothing until the throttle ends; the replies already queued go out."""
        if mute.until > trio.current_time():
            self.replies.wake()
            await trio.sleep_until(mute.until)
        mute.until = 0.0

    async def _receive(
        self, size: int, frame_deadline: float, answered: bool = False
    ) -> bytes | bytearray:
        """Next received bytes; b"" at EOF, once idle for the idle timeout, or when the
        frame in progress is still incomplete at ``frame_deadline``. ``answered``: every
        request read so far has been answered (the client may be waiting for that)."""
        server = self.server
        stream = self.stream
        fd = self.fd
        if answered and not self.read_credit:
            # A send-and-wait client's next request cannot be there yet: wait first,
            # but try at once every ANSWERED_READ_PROBE answers (see ``read_credit``).
            self.answers_until_probe -= 1
            if not self.answers_until_probe:
                self.answers_until_probe = ANSWERED_READ_PROBE
                answered_try = True
            else:
                answered_try = False
        else:
            answered_try = True
        if answered_try and (fd >= 0 or isinstance(stream, TlsStream)):
            # What is already there is read at once, with no timer and no scheduler
            # pass (net/socket_io.py, TlsStream.receive_now); a read that fills the
            # buffer, where more may be waiting, still yields once so that one busy
            # client cannot hog the loop.
            try:
                if fd < 0:
                    assert isinstance(stream, TlsStream)
                    data = stream.receive_now(size)
                    full = min(size, DECRYPT_BYTES)
                else:
                    data = read_fd_now(fd, size)
                    full = size
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return b""
            if answered:
                self._tried_after_answer(data is not None)
            if data is not None:
                if len(data) >= full:
                    await trio.lowlevel.checkpoint()
                return data
        if self.watched_reads and frame_deadline == math.inf:
            # Between frames on a plain socket: the idle watch is this wait's timer. The
            # wait and the read go to the descriptor itself (socket_io.receive_some's,
            # minus looking it up from the stream each time).
            self.idle_at = self._now() + server.idle_timeout_s
            self.read_waiting = True
            try:
                while True:
                    await wait_readable(fd)
                    data = read_fd_now(fd, size)
                    if data is not None:
                        return data
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return b""  # closed, or woken by the idle watch
            finally:
                self.read_waiting = False
        while True:
            idle_deadline = trio.current_time() + server.idle_timeout_s
            with trio.move_on_at(min(idle_deadline, frame_deadline)):
                try:
                    if isinstance(stream, trio.SocketStream):
                        # The read above found nothing (or was not worth trying): wait
                        # before trying again.
                        return await socket_io.receive_some(stream, size, wait_first=True)
                    if isinstance(stream, TlsStream):
                        return await stream.receive_some(size, wait_first=True)
                    return await stream.receive_some(size)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return b""
            if trio.current_time() >= frame_deadline:
                self.replies.refuse(
                    "incomplete_request",
                    f"a request frame still incomplete after {server.request_receive_timeout_s:g} s"
                    " (request.receive.timeout.ms)",
                )
                return b""
            if self.in_flight == 0:
                # Bytes that arrived just as the timer fired (a descheduled process
                # sees both at once) still count: one more, immediate attempt.
                with trio.move_on_after(LAST_CHANCE_S):
                    try:
                        return await self.stream.receive_some(size)
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        return b""
                server.closed["idle"] += 1
                log.info("closing idle connection from %s", self.peer)
                return b""

    def _tried_after_answer(self, found: bool) -> None:
        if found:
            self.read_credit = min(self.read_credit + 1, MAX_READ_CREDIT)
        elif self.read_credit:
            self.read_credit -= 1

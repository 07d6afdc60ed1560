"""A Trio face for kazoo: ZooKeeper calls, one-shot watches and session events.

How this works: kazoo is thread-based. Every blocking kazoo call runs in
``trio.to_thread.run_sync`` (abandoned on cancellation: the request then completes or
fails inside kazoo like any request cut off by a connection loss). kazoo delivers
watch firings and connection-state changes on its own threads; those callbacks only
re-enter Trio through ``trio.from_thread.run_sync`` with the ``TrioToken`` captured at
``start()`` and put an event on every subscriber's memory channel. Nothing else runs
on kazoo's threads.

Events (``subscribe()`` gives a channel that receives all of them, in order):

``WatchEvent(type, path)``  a one-shot watch fired (Kafka's NodeCreated, NodeDeleted,
                            NodeDataChanged, NodeChildrenChanged). Re-read with
                            ``watch=True`` to see the new value and re-arm it.
``StateChange(state, session_id, new_session)``
    SUSPENDED  the connection dropped; the session (and its ephemerals) may survive
               until the session timeout.
    EXPIRED    the session is gone: its ephemeral znodes and its watches are deleted
               by ZooKeeper. kazoo then opens a new session by itself; expiry is never
               an exception that ends the client.
    CONNECTED  a session is usable. ``new_session`` is True when it is a different
               session from the last one (first connect, or after EXPIRED): ephemerals
               must be re-created and every watch re-armed. On a reconnect to the same
               session (``new_session`` False) each watch that was armed when the
               connection dropped fires once, right after this event, since a change
               may have been missed meanwhile (kazoo itself forgets watches on a
               disconnect; ZooKeeper's Java client carries them over).

Errors: kazoo exceptions are converted here, once, into ``ZkError`` subclasses
(``raise ... from exc``), so callers never import kazoo.

Chroot: ``host:port[,host:port]/chroot`` is honoured; the chroot znode is created when
missing (like ``zookeeper.connect`` of a Kafka broker pointing at a fresh ensemble).
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, TypeVar

import trio
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, RolledBackError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import EventType, WatchedEvent, ZnodeStat
from kazoo.retry import KazooRetry

from minibroker.zk.multi_read import READS_PER_REQUEST, MultiReadRequest
from minibroker.zk.poll_handler import PollHandler
from minibroker.zk.types import (
    BadVersion,
    CheckOp,
    CreateOp,
    DeleteOp,
    NodeExists,
    NoNode,
    NotEmpty,
    SetOp,
    Stat,
    StateChange,
    TxnOp,
    WatchEvent,
    WatchType,
    ZkConnectionLoss,
    ZkError,
    ZkEvent,
    ZkSessionExpired,
    ZkState,
    ZkUnimplemented,
    split_connect_string,
    translate_error,
)

# The types live in zk.types; they are re-exported so callers need one import.
__all__ = [
    "DEFAULT_CONNECT_TIMEOUT_S",
    "DEFAULT_SESSION_TIMEOUT_S",
    "BadVersion",
    "CheckOp",
    "CreateOp",
    "DeleteOp",
    "NoNode",
    "NodeExists",
    "NotEmpty",
    "SetOp",
    "Stat",
    "StateChange",
    "TxnOp",
    "WatchEvent",
    "WatchType",
    "ZkClient",
    "ZkConnectionLoss",
    "ZkError",
    "ZkEvent",
    "ZkSessionExpired",
    "ZkState",
    "open_zk_client",
    "split_connect_string",
    "translate_error",
]

# Kafka's zookeeper.session.timeout.ms default is 18 s; tests and benchmarks pass less.
DEFAULT_SESSION_TIMEOUT_S = 18.0
DEFAULT_CONNECT_TIMEOUT_S = 15.0
# Upper bound on one request; kazoo fails requests on connection loss well before this.
REQUEST_TIMEOUT_S = 30.0
# Reconnect forever, at most a second apart: a broker must outlive a ZooKeeper restart.
RECONNECT_MAX_DELAY_S = 1.0
CLOSE_TIMEOUT_S = 5.0  # ending the session: ZooKeeper answers at once, if it answers at all

T = TypeVar("T")


_KAZOO_ERRORS = (KazooException, KazooTimeoutError)


def _transaction_outcome(results: Sequence[Any]) -> list[Any] | ZkError:
    """kazoo reports a failed multi as the failing op's exception and RolledBackError for
    every other op; a successful one as paths, ZnodeStats and True."""
    for index, result in enumerate(results):
        if isinstance(result, Exception) and not isinstance(result, RolledBackError):
            error = translate_error(result)
            error.failed_op = index
            return error
    return [Stat.from_kazoo(r) if isinstance(r, ZnodeStat) else r for r in results]


_WATCH_TYPES = {
    EventType.CREATED: WatchType.CREATED,
    EventType.DELETED: WatchType.DELETED,
    EventType.CHANGED: WatchType.CHANGED,
    EventType.CHILD: WatchType.CHILD,
}


# -- the client ---------------------------------------------------------------------


class ZkClient:
    """One ZooKeeper session (renewed after expiry) used from one Trio run.

    Open it with ``open_zk_client`` (or ``start``/``close``). Calls are safe from any
    number of Trio tasks at once: kazoo serialises requests on its connection.
    """

    def __init__(
        self,
        connect: str,
        *,
        session_timeout: float = DEFAULT_SESSION_TIMEOUT_S,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S,
        request_timeout: float = REQUEST_TIMEOUT_S,
    ) -> None:
        self.connect = connect
        self.hosts, self.chroot = split_connect_string(connect)
        self.session_timeout = session_timeout
        self.connect_timeout = connect_timeout
        self.request_timeout = request_timeout
        self._kazoo = KazooClient(
            hosts=self.hosts,
            timeout=session_timeout,
            handler=PollHandler(),
            connection_retry=KazooRetry(max_tries=-1, max_delay=RECONNECT_MAX_DELAY_S),
        )
        self._token: trio.lowlevel.TrioToken | None = None
        self._subscribers: list[trio.MemorySendChannel[ZkEvent]] = []
        self._session_id: int | None = None
        # The watches kazoo holds for us, each as the event a missed change is reported
        # as. Touched only on the Trio thread.
        self._armed: set[WatchEvent] = set()
        self._closing = False
        self._multi_read = True  # until the server says it has none

    @property
    def session_id(self) -> int | None:
        """The current session's id, None while no session is established."""
        client_id = self._kazoo.client_id
        return int(client_id[0]) if client_id else None

    @property
    def connected(self) -> bool:
        return bool(self._kazoo.connected)

    def session_credentials(self) -> tuple[int, bytes] | None:
        """(session id, password): lets tests take over and close this session."""
        client_id = self._kazoo.client_id
        return (int(client_id[0]), bytes(client_id[1])) if client_id else None

    def subscribe(self) -> trio.MemoryReceiveChannel[ZkEvent]:
        """A channel receiving every later event. Unbounded on purpose: kazoo's threads
        must never block on us, and watches are one-shot, so at most one event per
        armed watch (plus state changes) can be pending."""
        send, receive = trio.open_memory_channel[ZkEvent](math.inf)
        self._subscribers.append(send)
        return receive

    async def start(self) -> None:
        """Connect (raising ZkConnectionLoss after ``connect_timeout``) and create the
        chroot if missing."""
        self._token = trio.lowlevel.current_trio_token()
        self._kazoo.add_listener(self._on_state)
        try:
            # Abandoned on cancellation: a signalled broker must not wait out the timeout.
            await trio.to_thread.run_sync(
                self._kazoo.start, self.connect_timeout, abandon_on_cancel=True
            )
        except _KAZOO_ERRORS as exc:
            await self.close()
            raise ZkConnectionLoss(f"cannot connect to ZooKeeper at {self.hosts}") from exc
        except trio.Cancelled:
            await self.close()
            raise
        if self.chroot:
            # kazoo prefixes every path with its chroot but never creates it; set the
            # chroot only after creating it through the un-chrooted client.
            try:
                await self._call(self._kazoo.ensure_path, self.chroot)
            except BaseException:
                await self.close()
                raise
            self._kazoo.chroot = self.chroot

    async def close(self) -> None:
        """End the session (its ephemerals vanish at once) and close every channel."""
        self._closing = True
        # Shielded, but bounded: kazoo's stop can wait on a connection attempt to a
        # ZooKeeper that no longer answers, and a stopping process must not.
        with trio.move_on_after(CLOSE_TIMEOUT_S, shield=True):
            await trio.to_thread.run_sync(self._stop_kazoo, abandon_on_cancel=True)
        for channel in self._subscribers:
            channel.close()
        self._subscribers.clear()

    def _stop_kazoo(self) -> None:
        self._kazoo.stop()
        self._kazoo.close()

    # -- requests ---------------------------------------------------------------------

    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequence: bool = False,
        makepath: bool = False,
    ) -> str:
        """Create a znode; returns its path (with the sequence suffix if ``sequence``)."""
        created: str = await self._call(
            self._kazoo.create,
            path,
            data,
            ephemeral=ephemeral,
            sequence=sequence,
            makepath=makepath,
        )
        return created

    async def ensure_path(self, path: str) -> None:
        """Create ``path`` and its missing parents (empty data)."""
        await self._call(self._kazoo.ensure_path, path)

    async def get(self, path: str, *, watch: bool = False) -> tuple[bytes, Stat]:
        data, stat = await self._call(self._kazoo.get, path, self._watcher(watch))
        if watch:
            self._armed.add(WatchEvent(WatchType.CHANGED, path))
        return bytes(data or b""), Stat.from_kazoo(stat)

    async def exists(self, path: str, *, watch: bool = False) -> Stat | None:
        """The znode's stat or None; a watch fires on create, delete or data change."""
        stat = await self._call(self._kazoo.exists, path, self._watcher(watch))
        if watch:
            self._armed.add(WatchEvent(WatchType.CHANGED, path))
        return Stat.from_kazoo(stat) if stat is not None else None

    async def get_children(self, path: str, *, watch: bool = False) -> list[str]:
        """Child names, sorted; a watch fires when a child is added or removed (and when
        ``path`` is deleted)."""
        children = await self._call(self._kazoo.get_children, path, self._watcher(watch))
        if watch:
            self._armed.add(WatchEvent(WatchType.CHILD, path))
        return sorted(children)

    async def set(self, path: str, data: bytes, *, version: int = -1) -> Stat:
        """Replace the data; with ``version`` >= 0 only if the znode still has it."""
        stat = await self._call(self._kazoo.set, path, data, version)
        return Stat.from_kazoo(stat)

    async def delete(self, path: str, *, version: int = -1, recursive: bool = False) -> None:
        await self._call(self._kazoo.delete, path, version, recursive)

    async def get_many(
        self, paths: Sequence[str], *, watch: bool = False
    ) -> list[tuple[bytes, Stat] | ZkError]:
        """``get`` of many znodes in one round trip; each failure is returned, not raised.
        Without watches they go as multiReads (zk/multi_read.py) where the server has
        them."""
        watcher = self._watcher(watch)
        if not watch and self._multi_read and paths:
            results = await self._multi_read_pipeline(paths)
        else:
            results = await self._pipeline(
                [functools.partial(self._kazoo.get_async, path, watcher) for path in paths]
            )
        if watch:
            self._armed.update(
                WatchEvent(WatchType.CHANGED, path)
                for path, r in zip(paths, results, strict=True)
                if not isinstance(r, ZkError)
            )
        return [
            r if isinstance(r, ZkError) else (bytes(r[0] or b""), Stat.from_kazoo(r[1]))
            for r in results
        ]

    async def set_many(self, ops: Sequence[SetOp]) -> list[Stat | ZkError]:
        """Independent (not atomic) conditional sets in one round trip."""
        results = await self._pipeline(
            [functools.partial(self._kazoo.set_async, op.path, op.data, op.version) for op in ops]
        )
        return [r if isinstance(r, ZkError) else Stat.from_kazoo(r) for r in results]

    async def create_many(
        self, ops: Sequence[CreateOp], *, makepath: bool = False
    ) -> list[str | ZkError]:
        """Independent (not atomic) creates in one round trip."""
        results = await self._pipeline(
            [
                functools.partial(
                    self._kazoo.create_async,
                    op.path,
                    op.data,
                    ephemeral=op.ephemeral,
                    sequence=op.sequence,
                    makepath=makepath,
                )
                for op in ops
            ]
        )
        return [r if isinstance(r, ZkError) else str(r) for r in results]

    async def commit(self, ops: Sequence[TxnOp]) -> list[Any]:
        """Apply ``ops`` atomically (ZooKeeper multi). Returns one result per op (path,
        Stat, True). If any op fails nothing is applied and the failing op's error is
        raised, with ``failed_op`` set to its index (BadVersion for a failed CheckOp)."""
        outcome = (await self.commit_many([ops]))[0]
        if isinstance(outcome, ZkError):
            raise outcome
        return outcome

    async def commit_many(
        self, transactions: Sequence[Sequence[TxnOp]]
    ) -> list[list[Any] | ZkError]:
        """Independent transactions in one round trip; each one is atomic and yields its
        results or its error (as ``commit``), returned rather than raised."""
        outcomes = await self._pipeline(
            [self._transaction(ops).commit_async for ops in transactions]
        )
        return [o if isinstance(o, ZkError) else _transaction_outcome(o) for o in outcomes]

    def _transaction(self, ops: Sequence[TxnOp]) -> Any:
        txn = self._kazoo.transaction()
        for op in ops:
            if isinstance(op, CreateOp):
                txn.create(op.path, op.data, ephemeral=op.ephemeral, sequence=op.sequence)
            elif isinstance(op, SetOp):
                txn.set_data(op.path, op.data, op.version)
            elif isinstance(op, DeleteOp):
                txn.delete(op.path, op.version)
            else:
                txn.check(op.path, op.version)
        return txn

    # -- plumbing ---------------------------------------------------------------------

    async def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        def call() -> T:
            return fn(*args, **kwargs)

        try:
            return await trio.to_thread.run_sync(call, abandon_on_cancel=True)
        except _KAZOO_ERRORS as exc:
            raise translate_error(exc) from exc

    async def _pipeline(self, issue: Sequence[Callable[[], Any]]) -> list[Any]:
        """Send every request first, then collect the answers: one round trip overall."""

        def run() -> list[Any]:
            pending = [call() for call in issue]
            results: list[Any] = []
            for async_result in pending:
                try:
                    results.append(async_result.get(timeout=self.request_timeout))
                except _KAZOO_ERRORS as exc:
                    results.append(translate_error(exc))
            return results

        return await trio.to_thread.run_sync(run, abandon_on_cancel=True)

    async def _multi_read_pipeline(self, paths: Sequence[str]) -> list[Any]:
        """Every path's (data, stat) or error, through multiReads of READS_PER_REQUEST
        paths, all sent before any answer is awaited; pipelined getData requests if the
        server has no multiRead (ZooKeeper before 3.6)."""
        chroot = self._kazoo.chroot
        chunks = [paths[i : i + READS_PER_REQUEST] for i in range(0, len(paths), READS_PER_REQUEST)]

        def issue(chunk: Sequence[str]) -> Callable[[], Any]:
            def call() -> Any:
                result = self._kazoo.handler.async_result()
                self._kazoo._call(MultiReadRequest([chroot + p for p in chunk]), result)
                return result

            return call

        answers = await self._pipeline([issue(chunk) for chunk in chunks])
        if any(isinstance(a, ZkUnimplemented) for a in answers):
            self._multi_read = False
            return await self._pipeline(
                [functools.partial(self._kazoo.get_async, path) for path in paths]
            )
        results: list[Any] = []
        for chunk, answer in zip(chunks, answers, strict=True):
            if isinstance(answer, ZkError):
                results += [answer] * len(chunk)
            else:
                results += [r if isinstance(r, tuple) else translate_error(r) for r in answer]
        return results

    def _watcher(self, watch: bool) -> Callable[[WatchedEvent], None] | None:
        # Always the same bound method, so kazoo keeps one watcher per znode and a
        # repeated read with watch=True does not double the events.
        return self._on_watch if watch else None

    def _on_watch(self, event: WatchedEvent) -> None:
        """kazoo thread. Watches dropped on disconnect arrive as type NONE: the
        SUSPENDED/EXPIRED state change already says that, so they are ignored."""
        watch_type = _WATCH_TYPES.get(event.type)
        if watch_type is None or event.path is None:
            return
        self._publish_from_thread(WatchEvent(watch_type, event.path))

    def _on_state(self, state: str) -> None:
        """kazoo connection thread (must not block long: only hands over an event)."""
        if state == KazooState.CONNECTED:
            session_id = self.session_id
            new_session = session_id != self._session_id
            self._session_id = session_id
            self._publish_from_thread(StateChange(ZkState.CONNECTED, session_id, new_session))
        elif state == KazooState.SUSPENDED:
            self._publish_from_thread(StateChange(ZkState.SUSPENDED, self._session_id))
        elif state == KazooState.LOST and not self._closing:
            self._publish_from_thread(StateChange(ZkState.EXPIRED, self._session_id))

    def _publish_from_thread(self, event: ZkEvent) -> None:
        if self._token is None:
            return
        # RunFinishedError: the Trio run is over and nobody is left to tell.
        with contextlib.suppress(trio.RunFinishedError):
            trio.from_thread.run_sync(self._deliver, event, trio_token=self._token)

    def _deliver(self, event: ZkEvent) -> None:
        """Trio thread: keep the armed-watch book, then tell every subscriber.

        kazoo drops every watch when the connection drops, while ZooKeeper's own clients
        carry them over a reconnect. To give that behaviour, each watch armed when the
        connection dropped fires once right after a reconnect to the same session: a
        change may have been missed, and the subscriber re-reads as for any firing.
        """
        if isinstance(event, WatchEvent):
            self._armed.discard(event)
            if event.type is not WatchType.CHILD:
                self._armed.discard(WatchEvent(WatchType.CHANGED, event.path))
            if event.type is WatchType.DELETED:
                self._armed.discard(WatchEvent(WatchType.CHILD, event.path))
            self._publish(event)
            return
        self._publish(event)
        if event.state is ZkState.SUSPENDED:
            return
        missed = sorted(self._armed, key=lambda w: (w.path, w.type.value))
        self._armed.clear()
        if event.state is ZkState.CONNECTED and not event.new_session:
            for watch in missed:
                self._publish(watch)

    def _publish(self, event: ZkEvent) -> None:
        for channel in list(self._subscribers):
            try:
                channel.send_nowait(event)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self._subscribers.remove(channel)


@contextlib.asynccontextmanager
async def open_zk_client(
    connect: str,
    *,
    session_timeout: float = DEFAULT_SESSION_TIMEOUT_S,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S,
) -> AsyncIterator[ZkClient]:
    """``async with open_zk_client("127.0.0.1:2181/kafka") as zk: ...`` — a connected
    client; the session is closed on exit."""
    client = ZkClient(connect, session_timeout=session_timeout, connect_timeout=connect_timeout)
    await client.start()
    try:
        yield client
    finally:
        await client.close()

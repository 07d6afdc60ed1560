"""ControllerChannelManager: one queue and one sender task per live broker.

How this works: ``send`` (called by the request batch from the event loop) only puts the
request on the broker's queue and returns. The broker's sender task takes requests in
order over one connection: a broker must see LeaderAndIsr before the UpdateMetadata and
StopReplica that followed it. It sends up to PIPELINE_DEPTH of them before awaiting the
first answer (the broker handles a controller's requests in order and answers in
order): waiting for each answer before sending the next made an election's
UpdateMetadata wait until the controller's own event loop, busy with the rest of a
failover, got round to reading the LeaderAndIsr answer. When the network fails
(connection refused, reset, timeout) every unanswered request is sent again, in order,
on a fresh connection after RETRY_BACKOFF_S, for as long as the broker is registered
(a broker ignores a LeaderAndIsr it already applied): when the controller sees the
broker die it calls ``remove_broker``, which cancels the task and drops its queue (the
broker gets the full state again when it comes back, in onBrokerStartup).

An answer with a non-zero top-level ``error_code`` (e.g. STALE_CONTROLLER_EPOCH) is
logged, not retried: resending the same decision cannot change the answer.

Connections come from an injected ``Connector`` so unit tests need no sockets; the
broker passes one built on net/connection.py.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import trio

from minibroker.controller.context import BrokerAddress
from minibroker.controller.request_batch import ResponseCallback
from minibroker.net.connection import Connection
from minibroker.net.security import ClientSecurity
from minibroker.protocol.api import Body
from minibroker.protocol.errors import KafkaError, error_for_code

log = logging.getLogger("minibroker.controller.channel")

RETRY_BACKOFF_S = 0.1
"""Pause before resending to a broker that failed: short, because a controller request
that does not arrive delays failover, and the broker is alive (it is registered)."""

CONNECT_TIMEOUT_S = 5.0
"""A broker that does not accept a connection in this time is retried."""

REQUEST_TIMEOUT_S = 30.0
"""Kafka's controller.socket.timeout.ms: give up on one attempt after this long."""


PIPELINE_DEPTH = 8
"""Requests on the wire to one broker before the first is answered: a batch's
LeaderAndIsr, UpdateMetadata and StopReplica, and what the next batches queued."""


class BrokerCall(Protocol):
    """One request on a BrokerConnection (net/calls.py's ``Call``)."""

    async def send(self) -> None: ...

    async def response(self) -> Body: ...


class BrokerConnection(Protocol):
    def call(
        self, api_key: int, body: Mapping[str, Any], *, timeout: float | None = None
    ) -> BrokerCall: ...

    async def aclose(self) -> None: ...


Connector = Callable[[BrokerAddress], Awaitable[BrokerConnection]]
"""Opens a connection to a broker; raises OSError or a KafkaError when it cannot."""


@dataclass(frozen=True, slots=True)
class _Request:
    api_key: int
    body: Mapping[str, Any]
    on_response: ResponseCallback | None


@dataclass(slots=True)
class _BrokerQueue:
    broker: BrokerAddress
    send: trio.MemorySendChannel[_Request]
    scope: trio.CancelScope
    pending: int = 0
    """Requests queued or on the wire, not yet answered nor dropped."""


_NETWORK_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    trio.TooSlowError,
    trio.BrokenResourceError,
    trio.ClosedResourceError,
)

_CLOSE_ERRORS: tuple[type[BaseException], ...] = (*_NETWORK_ERRORS, KafkaError)


class ControllerChannelManager:
    def __init__(
        self,
        connector: Connector,
        *,
        retry_backoff_s: float = RETRY_BACKOFF_S,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        request_timeout_s: float = REQUEST_TIMEOUT_S,
    ) -> None:
        self._connector = connector
        self._retry_backoff_s = retry_backoff_s
        self._connect_timeout_s = connect_timeout_s
        self._request_timeout_s = request_timeout_s
        self._queues: dict[int, _BrokerQueue] = {}
        self._nursery: trio.Nursery | None = None
        self._stopped = False
        self._all_answered = trio.Event()
        self._all_answered.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            try:
                await trio.sleep_forever()
            finally:
                self._nursery = None
                self._stopped = True
                self.remove_all()

    @property
    def broker_ids(self) -> set[int]:
        return set(self._queues)

    def queue_size(self, broker_id: int) -> int:
        queue = self._queues.get(broker_id)
        return queue.send.statistics().current_buffer_used if queue is not None else 0

    def add_broker(self, broker: BrokerAddress) -> None:
        """Start a queue and sender for ``broker``; a broker re-registered at another
        address gets a fresh one."""
        if self._nursery is None:
            if self._stopped:
                return  # shutting down: a handler finishing its step may still call this
            raise RuntimeError("ControllerChannelManager.run() was never started")
        current = self._queues.get(broker.id)
        if current is not None:
            if (current.broker.host, current.broker.port) == (broker.host, broker.port):
                return
            self.remove_broker(broker.id)
        send, receive = trio.open_memory_channel[_Request](math.inf)
        scope = trio.CancelScope()
        queue = self._queues[broker.id] = _BrokerQueue(broker, send, scope)
        self._nursery.start_soon(self._sender, queue, receive)

    def remove_broker(self, broker_id: int) -> None:
        queue = self._queues.pop(broker_id, None)
        if queue is not None:
            queue.scope.cancel()
            queue.send.close()
            self._note_if_all_answered()  # its requests no longer count

    def remove_all(self) -> None:
        for broker_id in list(self._queues):
            self.remove_broker(broker_id)

    def send(
        self,
        broker_id: int,
        api_key: int,
        body: Mapping[str, Any],
        on_response: ResponseCallback | None,
    ) -> None:
        queue = self._queues.get(broker_id)
        if queue is None:
            log.warning("dropping api %d request to broker %d: not connected", api_key, broker_id)
            return
        queue.send.send_nowait(_Request(api_key, body, on_response))
        queue.pending += 1
        if self._all_answered.is_set():
            self._all_answered = trio.Event()

    async def all_answered(self) -> None:
        """Return once every request sent so far is answered (or dropped with its
        broker). The failover waits here, bounded, after its elections: the new
        leaders' LeaderAndIsr to the controller's own broker is handled on this event
        loop, and the rest of the failover's work held it up by seconds."""
        await self._all_answered.wait()

    def _settled(self, queue: _BrokerQueue) -> None:
        """One of ``queue``'s requests was answered or dropped."""
        queue.pending -= 1
        self._note_if_all_answered()

    def _note_if_all_answered(self) -> None:
        if not any(queue.pending for queue in self._queues.values()):
            self._all_answered.set()

    async def _sender(
        self, queue: _BrokerQueue, receive: trio.MemoryReceiveChannel[_Request]
    ) -> None:
        connection: BrokerConnection | None = None
        unanswered: deque[_Request] = deque()
        with queue.scope:
            try:
                while True:
                    if not unanswered:
                        try:
                            unanswered.append(await receive.receive())
                        except trio.EndOfChannel:
                            return
                    while len(unanswered) < PIPELINE_DEPTH:
                        try:
                            unanswered.append(receive.receive_nowait())
                        except (trio.WouldBlock, trio.EndOfChannel):
                            break
                    connection = await self._deliver(queue, unanswered, connection)
            finally:
                if connection is not None:
                    with trio.CancelScope(shield=True):
                        await _close_quietly(connection)

    async def _deliver(
        self,
        queue: _BrokerQueue,
        unanswered: deque[_Request],
        connection: BrokerConnection | None,
    ) -> BrokerConnection | None:
        """Get every request of ``unanswered`` answered (each sent before the first
        answer is awaited), taking each off as its answer comes; returns the connection
        to go on with."""
        broker = queue.broker
        while unanswered:
            try:
                if connection is None:
                    with trio.fail_after(self._connect_timeout_s):
                        connection = await self._connector(broker)
                calls = [
                    connection.call(r.api_key, r.body, timeout=self._request_timeout_s)
                    for r in unanswered
                ]
                for call in calls:
                    await call.send()
                for call in calls:
                    with trio.fail_after(self._request_timeout_s):
                        response: dict[str, Any] = await call.response()
                    self._answered(broker, unanswered.popleft(), response)
                    self._settled(queue)
                return connection
            except KafkaError as exc:
                if not exc.retriable:  # hopeless: drop it, the rest go on a new connection
                    request = unanswered.popleft()
                    self._settled(queue)
                    log.error(
                        "api %d request to broker %d failed: %s", request.api_key, broker.id, exc
                    )
                    if connection is not None:
                        await _close_quietly(connection)
                        connection = None
                    continue
                failure: BaseException = exc
            except _NETWORK_ERRORS as exc:
                failure = exc
            log.info(
                "resending %d requests (api %d first) to broker %d after %s",
                len(unanswered),
                unanswered[0].api_key,
                broker.id,
                failure,
            )
            if connection is not None:
                await _close_quietly(connection)
                connection = None
            await trio.sleep(self._retry_backoff_s)
        return connection

    @staticmethod
    def _answered(broker: BrokerAddress, request: _Request, response: Body) -> None:
        code = response.get("error_code", 0)
        if code:
            log.warning(
                "broker %d answered api %d with %s",
                broker.id,
                request.api_key,
                error_for_code(code).name,
            )
        if request.on_response is not None:
            request.on_response(broker.id, response)


async def _close_quietly(connection: BrokerConnection) -> None:
    try:
        await connection.aclose()
    except _CLOSE_ERRORS as exc:
        log.debug("closing a controller connection failed: %s", exc)


CONTROLLER_CLIENT_ID = "controller"


async def connect_to_broker(
    broker: BrokerAddress, *, security: ClientSecurity | None = None
) -> BrokerConnection:
    """The production Connector: one net/connection.py Connection per broker, secured as
    the inter-broker listener asks (``security``, given by node/)."""
    connection = Connection(
        broker.host,
        broker.port,
        client_id=CONTROLLER_CLIENT_ID,
        connect_timeout=CONNECT_TIMEOUT_S,
        request_timeout=REQUEST_TIMEOUT_S,
        security=security,
    )
    await connection.connect()
    return connection

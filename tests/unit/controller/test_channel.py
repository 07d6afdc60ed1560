"""The controller channel: per-broker order, retries while the broker is registered."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
import trio
import trio.testing

from minibroker.controller.channel import BrokerConnection, ControllerChannelManager
from minibroker.controller.context import BrokerAddress
from minibroker.protocol.errors import NetworkError
from tests.unit.controller.fakes import Broker


@dataclass
class FakeNetwork:
    """Brokers that answer every request with ``{"error_code": 0, "echo": body}``;
    ``failures[broker]`` requests fail with NetworkError first."""

    failures: dict[int, int] = field(default_factory=dict)
    delivered: list[tuple[int, int, dict[str, Any]]] = field(default_factory=list)
    connects: int = 0
    closes: int = 0
    arrived: trio.Event = field(default_factory=trio.Event)
    expected: int = 0

    third_connect: trio.Event = field(default_factory=trio.Event)
    answering: trio.Event = field(default_factory=trio.Event)
    """Answers wait for this (set from the start unless a test holds them back)."""
    lost_answers: int = 0
    """The next this many answers are lost with the connection."""

    def __post_init__(self) -> None:
        self.answering.set()

    async def connect(self, broker: BrokerAddress) -> BrokerConnection:
        self.connects += 1
        if self.connects == 3:
            self.third_connect.set()
        return _Conn(self, broker.id)


@dataclass
class _Conn:
    net: FakeNetwork
    broker_id: int

    def call(self, api_key: int, body: dict[str, Any], *, timeout: float | None = None) -> _Call:
        return _Call(self, api_key, body)

    async def aclose(self) -> None:
        self.net.closes += 1


@dataclass
class _Call:
    conn: _Conn
    api_key: int
    body: dict[str, Any]

    async def send(self) -> None:
        net, broker_id = self.conn.net, self.conn.broker_id
        if net.failures.get(broker_id, 0) > 0:
            net.failures[broker_id] -= 1
            raise NetworkError("connection reset")
        net.delivered.append((broker_id, self.api_key, self.body))
        if len(net.delivered) >= net.expected:
            net.arrived.set()

    async def response(self) -> dict[str, Any]:
        net = self.conn.net
        await net.answering.wait()
        if net.lost_answers > 0:
            net.lost_answers -= 1
            raise NetworkError("connection reset before the answer")
        return {"error_code": 0, "echo": self.body}


@pytest.mark.timeout(10)
async def test_requests_reach_each_broker_in_order_and_callbacks_see_answers() -> None:
    net = FakeNetwork(expected=6)
    answers: list[tuple[int, dict[str, Any]]] = []
    channel = ControllerChannelManager(net.connect, retry_backoff_s=0.001)
    async with trio.open_nursery() as nursery:
        await nursery.start(channel.run)
        channel.add_broker(Broker(1))
        channel.add_broker(Broker(2))
        for i in range(3):
            channel.send(1, 4, {"n": i}, lambda b, r: answers.append((b, r)))
            channel.send(2, 6, {"n": i}, None)
        await net.arrived.wait()
        await trio.testing.wait_all_tasks_blocked()  # the answers, read after the sends
        nursery.cancel_scope.cancel()
    assert [body["n"] for b, _, body in net.delivered if b == 1] == [0, 1, 2]
    assert [body["n"] for b, _, body in net.delivered if b == 2] == [0, 1, 2]
    assert [r["echo"]["n"] for _, r in answers] == [0, 1, 2]
    assert net.connects == 2


@pytest.mark.timeout(10)
async def test_network_failures_are_retried_on_a_new_connection() -> None:
    net = FakeNetwork(failures={1: 3}, expected=1)
    channel = ControllerChannelManager(net.connect, retry_backoff_s=0.001)
    async with trio.open_nursery() as nursery:
        await nursery.start(channel.run)
        channel.add_broker(Broker(1))
        channel.send(1, 5, {"x": 1}, None)
        await net.arrived.wait()
        nursery.cancel_scope.cancel()
    assert net.delivered == [(1, 5, {"x": 1})]
    assert net.connects == 4 and net.closes >= 3


@pytest.mark.timeout(10)
async def test_removing_a_broker_stops_its_retries_and_drops_its_queue() -> None:
    net = FakeNetwork(failures={1: 10**9})
    channel = ControllerChannelManager(net.connect, retry_backoff_s=0.001)
    async with trio.open_nursery() as nursery:
        await nursery.start(channel.run)
        channel.add_broker(Broker(1))
        channel.send(1, 5, {}, None)
        channel.send(1, 5, {}, None)
        await net.third_connect.wait()
        channel.remove_broker(1)
        connects = net.connects
        channel.send(1, 5, {}, None)  # dropped: broker gone
        await trio.testing.wait_all_tasks_blocked()
        assert net.connects == connects
        assert channel.broker_ids == set()
        nursery.cancel_scope.cancel()
    assert net.delivered == []


@pytest.mark.timeout(10)
async def test_a_batch_is_on_the_wire_before_its_first_answer() -> None:
    # An election's UpdateMetadata must not wait for the controller's busy event loop to
    # read the LeaderAndIsr answer first.
    net = FakeNetwork(expected=3)
    net.answering = trio.Event()  # no answers for now
    answers: list[int] = []
    channel = ControllerChannelManager(net.connect, retry_backoff_s=0.001)
    async with trio.open_nursery() as nursery:
        await nursery.start(channel.run)
        channel.add_broker(Broker(1))
        for api_key in (4, 6, 5):  # LeaderAndIsr, UpdateMetadata, StopReplica
            channel.send(1, api_key, {}, lambda b, r, k=api_key: answers.append(k))
        await net.arrived.wait()
        assert [k for _, k, _ in net.delivered] == [4, 6, 5] and answers == []
        net.answering.set()
        await trio.testing.wait_all_tasks_blocked()
        assert answers == [4, 6, 5]
        nursery.cancel_scope.cancel()


@pytest.mark.timeout(10)
async def test_every_unanswered_request_is_sent_again_in_order_after_a_failure() -> None:
    net = FakeNetwork(lost_answers=1, expected=6)
    answered: list[int] = []
    channel = ControllerChannelManager(net.connect, retry_backoff_s=0.001)
    async with trio.open_nursery() as nursery:
        await nursery.start(channel.run)
        channel.add_broker(Broker(1))
        for n in range(3):
            channel.send(1, 4, {"n": n}, lambda b, r: answered.append(r["echo"]["n"]))
        await net.arrived.wait()
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    # All three were on the wire when the first answer was lost: all three went again,
    # in order, on the next connection, and each was answered once.
    assert [body["n"] for _, _, body in net.delivered] == [0, 1, 2, 0, 1, 2]
    assert answered == [0, 1, 2]
    assert net.connects == 2


@pytest.mark.timeout(10)
async def test_all_answered_waits_for_every_queued_request_or_its_brokers_removal() -> None:
    net = FakeNetwork(expected=3)
    net.answering = trio.Event()  # no answers for now
    channel = ControllerChannelManager(net.connect, retry_backoff_s=0.001)
    waited = trio.Event()

    async def wait() -> None:
        await channel.all_answered()
        waited.set()

    async with trio.open_nursery() as nursery:
        await nursery.start(channel.run)
        await channel.all_answered()  # nothing sent yet
        channel.add_broker(Broker(1))
        channel.add_broker(Broker(2))
        channel.send(1, 4, {}, None)
        channel.send(1, 6, {}, None)
        channel.send(2, 4, {}, None)
        nursery.start_soon(wait)
        await net.arrived.wait()
        await trio.testing.wait_all_tasks_blocked()
        assert not waited.is_set()
        channel.remove_broker(2)  # its request no longer counts
        await trio.testing.wait_all_tasks_blocked()
        assert not waited.is_set()
        net.answering.set()
        await waited.wait()
        nursery.cancel_scope.cancel()

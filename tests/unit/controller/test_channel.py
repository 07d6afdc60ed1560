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

    async def connect(self, broker: BrokerAddress) -> BrokerConnection:
        self.connects += 1
        if self.connects == 3:
            self.third_connect.set()
        return _Conn(self, broker.id)


@dataclass
class _Conn:
    net: FakeNetwork
    broker_id: int

    async def request(self, api_key: int, body: dict[str, Any]) -> dict[str, Any]:
        if self.net.failures.get(self.broker_id, 0) > 0:
            self.net.failures[self.broker_id] -= 1
            raise NetworkError("connection reset")
        self.net.delivered.append((self.broker_id, api_key, body))
        if len(self.net.delivered) >= self.net.expected:
            self.net.arrived.set()
        return {"error_code": 0, "echo": body}

    async def aclose(self) -> None:
        self.net.closes += 1


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

"""ControllerFence: which controller requests a broker obeys
(broker/security/controller_fence.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from minibroker.broker.security.controller_fence import NOT_FROM_CONTROLLER, ControllerFence
from minibroker.protocol.errors import (
    ClusterAuthorizationFailedError,
    StaleBrokerEpochError,
    StaleControllerEpochError,
)
from minibroker.protocol.session import ANONYMOUS, PeerBroker, Session
from minibroker.zk.model import CONTROLLER_EPOCH_PATH, broker_path
from minibroker.zk.types import NoNode, Stat

ME = 1
SESSION = 0x77


def proven(broker_id: int | None) -> Session:
    """A connection's session that proved to be ``broker_id`` (None: proved nothing)."""
    peer = PeerBroker()
    if broker_id is not None:
        peer.broker_id, peer.broker_epoch = broker_id, 40
    return Session(ANONYMOUS, "127.0.0.1", "PLAINTEXT", peer)


def stat(*, czxid: int = 0, owner: int = 0) -> Stat:
    return Stat(0, 0, owner, 0, 0, 0, 0, czxid, czxid)


@dataclass
class FakeZk:
    """The few ZooKeeper reads the fence makes, over a dict of znodes."""

    nodes: dict[str, tuple[bytes, Stat]] = field(default_factory=dict)
    session_id: int = SESSION
    reads: int = 0

    async def get(self, path: str, *, watch: bool = False) -> tuple[bytes, Stat]:
        self.reads += 1
        if path not in self.nodes:
            raise NoNode(path)
        return self.nodes[path]

    async def exists(self, path: str, *, watch: bool = False) -> Stat | None:
        node = self.nodes.get(path)
        return None if node is None else node[1]


@dataclass
class FakeData:
    zk: FakeZk = field(default_factory=FakeZk)
    controller_id: int | None = None

    async def get_controller_id(self, *, watch: bool = False) -> int | None:
        return self.controller_id

    def elect(self, controller_id: int, epoch: int) -> None:
        self.controller_id = controller_id
        self.zk.nodes[CONTROLLER_EPOCH_PATH] = (str(epoch).encode(), stat())

    def register(self, czxid: int, owner: int = SESSION) -> None:
        self.zk.nodes[broker_path(ME)] = (b"{}", stat(czxid=czxid, owner=owner))


async def fence_with(data: FakeData, broker_epoch: int = 500) -> ControllerFence:
    fence = ControllerFence(data, ME)  # type: ignore[arg-type]
    data.register(broker_epoch)
    fence.broker_epoch = broker_epoch
    await fence.read_controller(watch=True)
    return fence


async def test_the_controller_zookeeper_names_is_obeyed() -> None:
    data = FakeData()
    data.elect(2, 7)
    fence = await fence_with(data)
    await fence.check(proven(2), 2, 7, 500)


async def test_a_newer_epoch_than_zookeepers_is_not_believed() -> None:
    data = FakeData()
    data.elect(2, 7)
    fence = await fence_with(data)
    with pytest.raises(StaleControllerEpochError):
        await fence.check(proven(2), 2, 2**31 - 1, 500)
    await fence.check(proven(2), 2, 7, 500)  # the real controller is still obeyed afterwards


async def test_a_newer_epoch_is_accepted_once_zookeeper_confirms_it() -> None:
    data = FakeData()
    data.elect(2, 7)
    fence = await fence_with(data)
    data.elect(3, 8)  # the new controller's request can arrive before the watch fires
    await fence.check(proven(3), 3, 8, 500)
    with pytest.raises(StaleControllerEpochError):
        await fence.check(proven(2), 2, 7, 500)  # the old controller is fenced from then on


async def test_another_proven_broker_claiming_the_current_epoch_is_refused() -> None:
    data = FakeData()
    data.elect(2, 7)
    fence = await fence_with(data)
    with pytest.raises(StaleControllerEpochError):
        await fence.check(proven(3), 3, 7, 500)


async def test_a_request_for_another_registration_of_this_broker_is_refused() -> None:
    data = FakeData()
    data.elect(2, 7)
    fence = await fence_with(data, broker_epoch=500)
    for wrong in (-1, 499, 501):
        with pytest.raises(StaleBrokerEpochError):
            await fence.check(proven(2), 2, 7, wrong)


async def test_a_newer_broker_epoch_is_accepted_when_it_is_our_own_znode() -> None:
    data = FakeData()
    data.elect(2, 7)
    fence = await fence_with(data, broker_epoch=500)
    data.register(900)  # registered again; the controller saw it first
    await fence.check(proven(2), 2, 7, 900)
    assert fence.broker_epoch == 900


async def test_every_right_value_on_an_unproven_connection_is_refused_saying_nothing() -> None:
    data = FakeData()
    data.elect(2, 7)
    fence = await fence_with(data)
    for session in (proven(None), proven(3), Session(ANONYMOUS, "h", "PLAINTEXT")):
        with pytest.raises(ClusterAuthorizationFailedError) as refused:
            await fence.check(session, 2, 7, 500)
        assert refused.value.message == NOT_FROM_CONTROLLER
    # A proven broker naming another broker as the controller is no better.
    with pytest.raises(ClusterAuthorizationFailedError):
        await fence.check(proven(3), 2, 7, 500)


async def test_a_replicas_requests_need_a_connection_proven_to_be_that_replica() -> None:
    data = FakeData()
    data.elect(2, 7)
    fence = await fence_with(data)
    assert fence.is_broker(proven(3), 3)
    assert not fence.is_broker(proven(3), 2)
    assert not fence.is_broker(proven(None), 3)
    assert not fence.is_broker(Session(ANONYMOUS, "h", "PLAINTEXT"), 3)
    assert not ControllerFence(None, ME).is_broker(proven(3), 3)
    assert ControllerFence(None, ME, accept_any=True).is_broker(proven(None), 3)


async def test_a_standalone_broker_obeys_no_one_unless_told_to() -> None:
    with pytest.raises(ClusterAuthorizationFailedError):
        await ControllerFence(None, ME).check(proven(3000), 3000, 1, -1)
    await ControllerFence(None, ME, accept_any=True).check(proven(3000), 3000, 1, -1)

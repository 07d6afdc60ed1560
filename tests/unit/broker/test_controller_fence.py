"""ControllerFence: which controller requests a broker obeys (broker/controller_fence.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from minibroker.broker.controller_fence import ControllerFence
from minibroker.protocol.errors import StaleBrokerEpochError, StaleControllerEpochError
from minibroker.zk.model import CONTROLLER_EPOCH_PATH, broker_path
from minibroker.zk.types import NoNode, Stat

ME = 1
SESSION = 0x77


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
    await fence.check(2, 7, 500)


async def test_a_newer_epoch_than_zookeepers_is_not_believed() -> None:
    data = FakeData()
    data.elect(2, 7)
    fence = await fence_with(data)
    with pytest.raises(StaleControllerEpochError):
        await fence.check(2, 2**31 - 1, 500)
    await fence.check(2, 7, 500)  # the real controller is still obeyed afterwards


async def test_a_newer_epoch_is_accepted_once_zookeeper_confirms_it() -> None:
    data = FakeData()
    data.elect(2, 7)
    fence = await fence_with(data)
    data.elect(3, 8)  # the new controller's request can arrive before the watch fires
    await fence.check(3, 8, 500)
    with pytest.raises(StaleControllerEpochError):
        await fence.check(2, 7, 500)  # the old controller is fenced from then on


async def test_another_broker_claiming_the_current_epoch_is_refused() -> None:
    data = FakeData()
    data.elect(2, 7)
    fence = await fence_with(data)
    with pytest.raises(StaleControllerEpochError):
        await fence.check(3, 7, 500)


async def test_a_request_for_another_registration_of_this_broker_is_refused() -> None:
    data = FakeData()
    data.elect(2, 7)
    fence = await fence_with(data, broker_epoch=500)
    for wrong in (-1, 499, 501):
        with pytest.raises(StaleBrokerEpochError):
            await fence.check(2, 7, wrong)


async def test_a_newer_broker_epoch_is_accepted_when_it_is_our_own_znode() -> None:
    data = FakeData()
    data.elect(2, 7)
    fence = await fence_with(data, broker_epoch=500)
    data.register(900)  # registered again; the controller saw it first
    await fence.check(2, 7, 900)
    assert fence.broker_epoch == 900


async def test_a_standalone_broker_obeys_no_one_unless_told_to() -> None:
    with pytest.raises(StaleControllerEpochError):
        await ControllerFence(None, ME).check(3000, 1, -1)
    await ControllerFence(None, ME, accept_any=True).check(3000, 1, -1)

"""ControllerFence: a broker obeys LeaderAndIsr, StopReplica and UpdateMetadata only from
the controller ZooKeeper names.

Those requests can erase a partition on every replica or move its leadership, and the
wire protocol has no authentication, so each one is checked against what ZooKeeper
says before anything changes (docs/architecture.md, "The controller"):

- its ``controller_id`` and ``controller_epoch`` must be /controller and
  /controller_epoch. The fence watches both znodes and keeps their values. A request
  naming a *newer* epoch than the fence knows is not believed on its word (a forged
  2147483647 would otherwise lock the real controller out): the fence reads both znodes
  again, and accepts only if ZooKeeper now agrees. An older epoch, or a different id,
  is STALE_CONTROLLER_EPOCH;
- its ``broker_epoch`` must be this broker's own registration: the czxid of the
  /brokers/ids/<id> znode it created (KIP-380), so a request meant for this broker's
  previous incarnation is refused. A higher one is checked against ZooKeeper the same
  way (the controller can see a re-registration before this broker's create returns).
  Otherwise STALE_BROKER_EPOCH.

A standalone broker (no ZooKeeper) has no controller and refuses all three, unless
``standalone.accept.controller.requests`` is set: tests and benches that play the
controller themselves set it on brokers nobody else can reach.

Which listener may carry controller requests is the dispatcher's check
(``inter.broker.listener.name``, broker/dispatcher.py).
"""

from __future__ import annotations

import logging

import trio

from minibroker.protocol.errors import (
    MinibrokerError,
    StaleBrokerEpochError,
    StaleControllerEpochError,
)
from minibroker.zk.data import KafkaZkClient
from minibroker.zk.model import (
    CONTROLLER_EPOCH_PATH,
    CONTROLLER_PATH,
    broker_path,
    decode_controller_epoch,
)
from minibroker.zk.types import NoNode, StateChange, WatchEvent, ZkEvent, ZkState

log = logging.getLogger(__name__)

UNKNOWN = -1
"""An id or epoch the fence has not read (yet)."""


class ControllerFence:
    def __init__(self, zk: KafkaZkClient | None, broker_id: int, *, accept_any: bool = False):
        self.zk = zk
        self.broker_id = broker_id
        self.accept_any = accept_any and zk is None
        self.controller_id = UNKNOWN
        self.controller_epoch = UNKNOWN
        self.broker_epoch = UNKNOWN
        """The czxid of this broker's current registration (set by the membership)."""

    async def check(self, controller_id: int, controller_epoch: int, broker_epoch: int) -> None:
        """Return if the request's sender is the controller and it addresses this
        incarnation of the broker; raise the Kafka error to answer otherwise."""
        if self.zk is None:
            if self.accept_any:
                return
            raise StaleControllerEpochError("a standalone broker obeys no controller")
        if (controller_id, controller_epoch) != (self.controller_id, self.controller_epoch):
            if controller_epoch < self.controller_epoch:
                raise StaleControllerEpochError(
                    f"controller epoch {controller_epoch} is older than {self.controller_epoch}"
                )
            await self.read_controller()
            if (controller_id, controller_epoch) != (self.controller_id, self.controller_epoch):
                log.warning(
                    "refused a controller request from broker %d epoch %d: ZooKeeper names"
                    " broker %d epoch %d",
                    controller_id,
                    controller_epoch,
                    self.controller_id,
                    self.controller_epoch,
                )
                raise StaleControllerEpochError(
                    f"controller {controller_id} epoch {controller_epoch} is not the"
                    f" controller (ZooKeeper: {self.controller_id} epoch {self.controller_epoch})"
                )
        if broker_epoch != self.broker_epoch:
            if broker_epoch > self.broker_epoch:
                await self._read_broker_epoch()
            if broker_epoch != self.broker_epoch:
                raise StaleBrokerEpochError(
                    f"broker epoch {broker_epoch} is not this broker's ({self.broker_epoch})"
                )

    async def read_controller(self, *, watch: bool = False) -> None:
        """Read /controller and /controller_epoch (arming watches on both with ``watch``)."""
        assert self.zk is not None
        controller_id = await self.zk.get_controller_id(watch=watch)
        try:
            data, _ = await self.zk.zk.get(CONTROLLER_EPOCH_PATH, watch=watch)
        except NoNode:
            epoch = UNKNOWN
            if watch:  # an exists watch fires when the first controller creates it
                await self.zk.zk.exists(CONTROLLER_EPOCH_PATH, watch=True)
        else:
            epoch = decode_controller_epoch(data)
        self.controller_id = UNKNOWN if controller_id is None else controller_id
        self.controller_epoch = max(epoch, self.controller_epoch)

    async def _read_broker_epoch(self) -> None:
        assert self.zk is not None
        stat = await self.zk.zk.exists(broker_path(self.broker_id))
        if stat is not None and stat.ephemeral_owner == self.zk.zk.session_id:
            self.broker_epoch = stat.czxid

    async def run(
        self,
        zk: KafkaZkClient,
        events: trio.MemoryReceiveChannel[ZkEvent],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Follow /controller and /controller_epoch while the broker is a member (a
        session service, broker/cluster_member.py)."""
        await self.read_controller(watch=True)
        task_status.started()
        async for event in events:
            if isinstance(event, WatchEvent):
                if event.path not in (CONTROLLER_PATH, CONTROLLER_EPOCH_PATH):
                    continue
            elif not (isinstance(event, StateChange) and event.state is ZkState.CONNECTED):
                continue
            try:
                await self.read_controller(watch=True)
            except MinibrokerError as exc:  # ZkError included: the reconnect reads again
                log.warning("cannot read the controller's znodes: %s", exc)

"""ControllerFence: a broker obeys LeaderAndIsr, StopReplica and UpdateMetadata only from
the controller ZooKeeper names, on a connection that proved to be that broker; and
takes a follower's requests only from that follower.

Those requests can erase a partition on every replica or move its leadership, and
anyone who can reach a broker port can send them and knows every value they carry
(ids and epochs are all readable in ZooKeeper, or guessed: they are small numbers).
So no value in a request is taken as proof of who sent it (docs/architecture.md, "Who
may command a broker"):

- the connection must have proven, with the broker's identity key, to be the broker
  /controller names (broker/security/peer_identity.py puts that proof in ``Session.peer``) -
  and the request must name that broker as ``controller_id``. Else
  CLUSTER_AUTHORIZATION_FAILED;
- its ``controller_epoch`` must be /controller_epoch. The fence watches both znodes
  and keeps their values. A request naming a *newer* epoch than the fence knows is
  checked against ZooKeeper again (the controller's request can arrive before the
  watch fires); an older one, or one ZooKeeper does not confirm, is
  STALE_CONTROLLER_EPOCH;
- its ``broker_epoch`` must be this broker's own registration: the czxid of the
  /brokers/ids/<id> znode it created (KIP-380), so a request meant for this broker's
  previous incarnation is refused. A higher one is checked against ZooKeeper the same
  way (the controller can see a re-registration before this broker's create returns).
  Otherwise STALE_BROKER_EPOCH.

Every refusal carries one fixed message per error: nothing in it depends on the
values checked, so a refusal teaches the sender nothing. Only the real controller can
ever get past the first check, so only it ever sees the two STALE_ errors.

``is_broker(session, replica_id)``: a replica's Fetch and OffsetForLeaderEpoch
(replica id >= 0) must come from a connection proven to be that replica: a
fake follower could otherwise move the high watermark or join the ISR.

A standalone broker (no ZooKeeper) has no controller and no replicas and refuses all
of these, unless ``standalone.accept.controller.requests`` is set: tests and benches
that play the controller themselves set it on brokers nobody else can reach.

Which listener may carry them is the dispatcher's check (``inter.broker.listener.name``,
broker/requests/dispatcher.py): the Kafka listener never does.
"""

from __future__ import annotations

import logging
from typing import Final

import trio

from minibroker.broker.requests.log_limiter import LogRateLimiter
from minibroker.protocol.errors import (
    ClusterAuthorizationFailedError,
    MinibrokerError,
    StaleBrokerEpochError,
    StaleControllerEpochError,
)
from minibroker.protocol.session import Session
from minibroker.zk.data import KafkaZkClient
from minibroker.zk.model import (
    CONTROLLER_EPOCH_PATH,
    CONTROLLER_PATH,
    broker_path,
    decode_controller_epoch,
)
from minibroker.zk.types import NoNode, StateChange, WatchEvent, ZkEvent, ZkState

log = logging.getLogger(__name__)
_refusals = LogRateLimiter(log)  # anyone may send them

NOT_FROM_CONTROLLER: Final = "accepted only from the controller's proven connection"
STALE_CONTROLLER: Final = "the request's controller epoch is not the current one"
STALE_BROKER: Final = "the request's broker epoch is not this broker's registration"

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

    async def check(
        self, session: Session, controller_id: int, controller_epoch: int, broker_epoch: int
    ) -> None:
        """Return if ``session``'s connection is the controller's and the request
        addresses this incarnation of the broker; raise the Kafka error to answer
        otherwise (the module docstring)."""
        if self.zk is None:
            if self.accept_any:
                return
            raise ClusterAuthorizationFailedError(NOT_FROM_CONTROLLER)
        peer = session.peer
        if peer is None or not peer.is_broker(controller_id):
            _refusals.warning(
                "refused a controller request from %s: not a proven connection of the"
                " broker it names",
                session.client_host or "?",
            )
            raise ClusterAuthorizationFailedError(NOT_FROM_CONTROLLER)
        if (controller_id, controller_epoch) != (self.controller_id, self.controller_epoch):
            if controller_epoch < self.controller_epoch:
                raise StaleControllerEpochError(STALE_CONTROLLER)
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
                raise StaleControllerEpochError(STALE_CONTROLLER)
        if broker_epoch != self.broker_epoch:
            if broker_epoch > self.broker_epoch:
                await self._read_broker_epoch()
            if broker_epoch != self.broker_epoch:
                raise StaleBrokerEpochError(STALE_BROKER)

    def is_broker(self, session: Session, broker_id: int) -> bool:
        """Whether ``session``'s connection may speak for replica ``broker_id``."""
        if self.zk is None:
            return self.accept_any
        peer = session.peer
        return peer is not None and peer.is_broker(broker_id)

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

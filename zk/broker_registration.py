"""Broker registration: the ephemeral ``/brokers/ids/N`` znodes.

A broker registers once per ZooKeeper session; the znode's czxid is its broker epoch
(KIP-380): a broker that registers again gets a new one, which is how the controller
tells a restarted broker from one it already knows. The children of /brokers/ids are
the live brokers; the controller watches them (BrokerChange).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging

import trio

from minibroker.protocol.errors import MinibrokerError
from minibroker.zk.client import (
    NodeExists,
    NoNode,
    WatchEvent,
    WatchType,
    ZkError,
    ZkEvent,
)
from minibroker.zk.model import BROKER_IDS_PATH, broker_path, decode_broker_info, encode_broker_info
from minibroker.zk.values import BrokerInfo
from minibroker.zk.znodes import ZnodeAccess

log = logging.getLogger("minibroker.zk")


class BrokerIdInUseError(MinibrokerError):
    """Another live session already registered this broker id."""


class BrokerZnodes(ZnodeAccess):
    async def register_broker(self, info: BrokerInfo, *, stale_wait: float = 0.0) -> int:
        """Create the ephemeral ``/brokers/ids/N``; returns the broker epoch (its czxid).

        Re-registering from the same session (after a reconnect) is not an error. A
        znode owned by another session is: at once with ``stale_wait`` 0 (Kafka's
        behaviour), else once it has not vanished within ``stale_wait`` seconds. A
        broker restarted right after a crash passes about the session timeout, which is
        how long its previous session's znode can outlive the old process.
        """
        info = dataclasses.replace(info, timestamp_ms=self.clock())
        path = broker_path(info.id)
        deadline = trio.current_time() + stale_wait
        with self.zk.subscribe() as events:
            while True:
                with contextlib.suppress(NodeExists):
                    await self.zk.create(
                        path, encode_broker_info(info), ephemeral=True, makepath=True
                    )
                stat = await self.zk.exists(path)
                if stat is not None and stat.ephemeral_owner == self.zk.session_id:
                    return stat.czxid
                if stat is None:
                    continue  # it vanished between our create and exists: try again
                if deadline > trio.current_time():
                    log.warning(
                        "broker id %d is held by session 0x%x; waiting up to %.1f s for it "
                        "to expire",
                        info.id,
                        stat.ephemeral_owner,
                        deadline - trio.current_time(),
                    )
                if not await self._wait_for_deletion(path, events, deadline):
                    raise BrokerIdInUseError(
                        f"broker id {info.id} is registered by another session "
                        f"(0x{stat.ephemeral_owner:x})"
                    )

    async def _wait_for_deletion(
        self, path: str, events: trio.MemoryReceiveChannel[ZkEvent], deadline: float
    ) -> bool:
        """True once ``path`` is gone, False if it still exists at ``deadline``."""
        gone = WatchEvent(WatchType.DELETED, path)
        with trio.move_on_at(deadline):
            if await self.zk.exists(path, watch=True) is None:
                return True
            async for event in events:
                if event == gone:
                    return True
        return False

    async def get_broker_ids(self, *, watch: bool = False) -> set[int]:
        return {int(child) for child in await self._children(BROKER_IDS_PATH, watch)}

    async def get_live_brokers(self, *, watch: bool = False) -> dict[int, BrokerInfo]:
        """Every registered broker with its epoch; ``watch`` arms the /brokers/ids child
        watch (Kafka's BrokerChange)."""
        ids = sorted(await self.get_broker_ids(watch=watch))
        results = await self.zk.get_many([broker_path(i) for i in ids])
        brokers = {}
        for broker_id, result in zip(ids, results, strict=True):
            if isinstance(result, NoNode):
                continue  # deregistered between the two reads
            if isinstance(result, ZkError):
                raise result
            data, stat = result
            brokers[broker_id] = decode_broker_info(broker_id, data, epoch=stat.czxid)
        return brokers

    async def get_broker(self, broker_id: int) -> BrokerInfo | None:
        """One broker's registration with its epoch; None if it is not registered."""
        try:
            data, stat = await self.zk.get(broker_path(broker_id))
        except NoNode:
            return None
        return decode_broker_info(broker_id, data, epoch=stat.czxid)

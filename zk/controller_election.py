"""Controller election: the ephemeral ``/controller`` and ``/controller_epoch``.

The first broker to create /controller is the controller. ``register_controller``
creates it and bumps /controller_epoch in one transaction, so every controller has an
epoch greater than all before it; the znode version of /controller_epoch it wrote is
what fences its later writes (``ZnodeAccess._write``).
"""

from __future__ import annotations

import contextlib

from minibroker.zk.client import (
    BadVersion,
    CreateOp,
    NodeExists,
    NoNode,
    SetOp,
)
from minibroker.zk.model import (
    CONTROLLER_EPOCH_PATH,
    CONTROLLER_PATH,
    decode_controller,
    decode_controller_epoch,
    encode_controller,
    encode_controller_epoch,
)
from minibroker.zk.values import INITIAL_CONTROLLER_EPOCH, ControllerMovedError
from minibroker.zk.znodes import ZnodeAccess


class ControllerElectionZnodes(ZnodeAccess):
    async def get_controller_id(self, *, watch: bool = False) -> int | None:
        """The active controller's broker id, or None. ``watch`` arms an exists watch on
        /controller, which fires on creation, deletion and change (ControllerChange)."""
        if await self.zk.exists(CONTROLLER_PATH, watch=watch) is None:
            return None
        try:
            data, _ = await self.zk.get(CONTROLLER_PATH)
        except NoNode:
            return None  # resigned just now; the exists watch reports it
        return decode_controller(data)

    async def try_create_controller(self, broker_id: int) -> bool:
        """Create the ephemeral /controller; False if another broker holds it."""
        try:
            await self.zk.create(
                CONTROLLER_PATH, encode_controller(broker_id, self.clock()), ephemeral=True
            )
        except NodeExists:
            return False
        return True

    async def get_controller_epoch(self) -> tuple[int, int] | None:
        """(epoch, znode version) of /controller_epoch, None before any controller."""
        try:
            data, stat = await self.zk.get(CONTROLLER_EPOCH_PATH)
        except NoNode:
            return None
        return decode_controller_epoch(data), stat.version

    async def _get_or_create_controller_epoch(self) -> tuple[int, int]:
        current = await self.get_controller_epoch()
        if current is not None:
            return current
        # NodeExists: another candidate created it first; read theirs.
        with contextlib.suppress(NodeExists):
            await self.zk.create(
                CONTROLLER_EPOCH_PATH, encode_controller_epoch(INITIAL_CONTROLLER_EPOCH)
            )
        current = await self.get_controller_epoch()
        assert current is not None, "/controller_epoch vanished right after creation"
        return current

    async def increment_controller_epoch(self) -> tuple[int, int]:
        """Epoch + 1 with a conditional set; returns (new epoch, new znode version).
        ControllerMovedError if another controller bumped it first."""
        epoch, version = await self._get_or_create_controller_epoch()
        try:
            stat = await self.zk.set(
                CONTROLLER_EPOCH_PATH, encode_controller_epoch(epoch + 1), version=version
            )
        except BadVersion as exc:
            raise ControllerMovedError(f"controller epoch moved past {epoch}") from exc
        return epoch + 1, stat.version

    async def register_controller(self, broker_id: int) -> tuple[int, int]:
        """Become controller: create /controller and bump /controller_epoch atomically.

        Returns (new epoch, its znode version) for fencing later writes. Raises
        ControllerMovedError if another broker is controller or won the race.
        """
        epoch, version = await self._get_or_create_controller_epoch()
        try:
            results = await self.zk.commit(
                [
                    CreateOp(
                        CONTROLLER_PATH, encode_controller(broker_id, self.clock()), ephemeral=True
                    ),
                    SetOp(CONTROLLER_EPOCH_PATH, encode_controller_epoch(epoch + 1), version),
                ]
            )
        except (NodeExists, BadVersion) as exc:
            raise ControllerMovedError(f"broker {broker_id} lost the controller election") from exc
        return epoch + 1, results[1].version

    async def resign_controller(self, broker_id: int) -> None:
        """Delete /controller if it is still ours (a newer controller's is left alone)."""
        try:
            data, stat = await self.zk.get(CONTROLLER_PATH)
            if decode_controller(data) == broker_id:
                await self.zk.delete(CONTROLLER_PATH, version=stat.version)
        except (NoNode, BadVersion):
            pass

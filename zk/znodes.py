"""The base of the ZooKeeper data layer: one ``ZkClient``, a clock, and the read and
write helpers every family of znodes uses.

Fencing. A controller's writes must not land after another controller took over. The
winner of the election learns the znode version of ``/controller_epoch`` it wrote;
passing it as ``controller_epoch_zk_version`` (``fence`` here) turns each write into a
ZooKeeper transaction [check /controller_epoch version, write] (as Kafka 2.x does),
and a failed check raises ``ControllerMovedError``. Brokers updating their own ISR pass
nothing: the partition state's zkVersion alone guards those.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from minibroker.zk.client import (
    BadVersion,
    CheckOp,
    NoNode,
    TxnOp,
    ZkClient,
    ZkError,
)
from minibroker.zk.model import CONTROLLER_EPOCH_PATH
from minibroker.zk.values import ControllerMovedError

Clock = Callable[[], int]
T = TypeVar("T")


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class ZnodeAccess:
    """Holds the session (``zk``) and the wall clock (``clock``, in ms, injectable)."""

    def __init__(self, zk: ZkClient, *, clock: Clock = wall_clock_ms) -> None:
        self.zk = zk
        self.clock = clock

    async def _write(self, ops: Sequence[TxnOp], fence: int | None) -> list[Any]:
        """One atomic write, fenced by the controller epoch version when given."""
        guard: list[TxnOp] = [] if fence is None else [CheckOp(CONTROLLER_EPOCH_PATH, fence)]
        try:
            return await self.zk.commit([*guard, *ops])
        except BadVersion as exc:
            if fence is not None and exc.failed_op == 0:
                raise ControllerMovedError("/controller_epoch changed: resign") from exc
            raise

    async def _write_each(self, ops: Sequence[TxnOp], fence: int | None) -> list[Any]:
        """Independent writes in one round trip; per op its result or its ZkError. Each
        is its own transaction, [check /controller_epoch, op] when fenced."""
        guard: list[TxnOp] = [] if fence is None else [CheckOp(CONTROLLER_EPOCH_PATH, fence)]
        results = await self.zk.commit_many([[*guard, op] for op in ops])
        outcomes: list[Any] = []
        for result in results:
            if isinstance(result, BadVersion) and guard and result.failed_op == 0:
                raise ControllerMovedError("/controller_epoch changed: resign") from result
            outcomes.append(result if isinstance(result, ZkError) else result[-1])
        return outcomes

    async def _read_optional(
        self, path: str, watch: bool, decode: Callable[[bytes], T], empty: Callable[[], T]
    ) -> T:
        """Decode ``path``, or ``empty()`` when it does not exist; ``watch`` arms an
        exists watch either way."""
        if await self.zk.exists(path, watch=watch) is None:
            return empty()
        try:
            data, _ = await self.zk.get(path)
        except NoNode:
            return empty()
        return decode(data)

    async def _children(self, path: str, watch: bool) -> list[str]:
        """Children of one of the PERSISTENT_PATHS, creating it if missing: a child watch
        needs the znode to exist, and an empty cluster simply has none yet."""
        try:
            return await self.zk.get_children(path, watch=watch)
        except NoNode:
            await self.zk.ensure_path(path)
            return await self.zk.get_children(path, watch=watch)

    async def _set_or_create(self, path: str, data: bytes) -> None:
        try:
            await self.zk.set(path, data)
        except NoNode:
            await self.zk.create(path, data, makepath=True)

    async def _delete_if_present(self, path: str, *, recursive: bool = False) -> None:
        with contextlib.suppress(NoNode):
            await self.zk.delete(path, recursive=recursive)

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
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from minibroker.zk.client import (
    BadVersion,
    CheckOp,
    DeleteOp,
    NoNode,
    Stat,
    TxnOp,
    ZkClient,
    ZkError,
)
from minibroker.zk.model import CONTROLLER_EPOCH_PATH
from minibroker.zk.values import ControllerMovedError

Clock = Callable[[], int]
T = TypeVar("T")
K = TypeVar("K")

OPS_PER_TRANSACTION = 200
"""Independent writes per ZooKeeper transaction: one request each made a failover's
10,000 state updates cost 10,000 requests through kazoo's pure-Python connection
thread (about a second of its time); 200 keep a request near 40 KB, far below
ZooKeeper's 1 MB jute.maxbuffer."""


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
        """Independent writes; per op its result or its ZkError, as if each were written
        alone. They travel as ZooKeeper transactions of up to ``OPS_PER_TRANSACTION``
        ops, [check /controller_epoch, op, op, ...] when fenced, all pipelined. A
        transaction fails whole when one op does (a conflict: BadVersion, NoNode,
        NodeExists); that op has its outcome, and the rest of its transaction is sent
        again once without it, then (if another conflicts) one op per transaction."""
        guard: list[TxnOp] = [] if fence is None else [CheckOp(CONTROLLER_EPOCH_PATH, fence)]
        chunks = [ops[i : i + OPS_PER_TRANSACTION] for i in range(0, len(ops), OPS_PER_TRANSACTION)]
        results = await self.zk.commit_many([[*guard, *chunk] for chunk in chunks])
        outcomes: list[Any] = []
        for chunk, result in zip(chunks, results, strict=True):
            outcomes += await self._outcomes(chunk, result, guard)
        return outcomes

    async def _outcomes(
        self, chunk: Sequence[TxnOp], result: list[Any] | ZkError, guard: Sequence[TxnOp]
    ) -> list[Any]:
        """Per op of ``chunk`` its outcome, given how its transaction went."""
        self._check_fence(result, guard)
        if not isinstance(result, ZkError):
            return result[len(guard) :]
        if result.failed_op is None or len(chunk) == 1:  # the request itself failed
            return [result] * len(chunk)
        failed = result.failed_op - len(guard)
        rest = [op for i, op in enumerate(chunk) if i != failed]
        (again,) = await self.zk.commit_many([[*guard, *rest]])
        self._check_fence(again, guard)
        if isinstance(again, ZkError) and again.failed_op is not None:
            alone = await self.zk.commit_many([[*guard, op] for op in rest])
            for one in alone:
                self._check_fence(one, guard)
            again = [one if isinstance(one, ZkError) else one[-1] for one in alone]
        elif isinstance(again, ZkError):
            again = [again] * len(rest)
        else:
            again = again[len(guard) :]
        return [*again[:failed], result, *again[failed:]]

    @staticmethod
    def _check_fence(result: object, guard: Sequence[TxnOp]) -> None:
        if isinstance(result, BadVersion) and guard and result.failed_op == 0:
            raise ControllerMovedError("/controller_epoch changed: resign") from result

    async def _read_present(
        self, keys: Sequence[K], path_of: Callable[[K], str], *, watch: bool = False
    ) -> dict[K, tuple[bytes, Stat]]:
        """The data and stat of each of ``keys``' znodes that exists, in one round trip
        (``watch`` arms each one's data watch); any error but a missing znode is raised."""
        results = await self.zk.get_many([path_of(key) for key in keys], watch=watch)
        found: dict[K, tuple[bytes, Stat]] = {}
        for key, result in zip(keys, results, strict=True):
            if isinstance(result, NoNode):
                continue
            if isinstance(result, ZkError):
                raise result
            found[key] = result
        return found

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

    async def _delete_all_present(self, paths: Iterable[str]) -> None:
        """Delete those of ``paths`` that exist (leaves), in one batch."""
        for result in await self._write_each([DeleteOp(path) for path in paths], None):
            if isinstance(result, ZkError) and not isinstance(result, NoNode):
                raise result

    async def _delete_if_present(self, path: str, *, recursive: bool = False) -> None:
        with contextlib.suppress(NoNode):
            await self.zk.delete(path, recursive=recursive)

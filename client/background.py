"""The nursery a Producer, Consumer or Admin keeps for its background tasks.

Clients are used as ``async with Producer(...) as p:``, so their nursery is entered in
``__aenter__`` and left in ``__aexit__`` of the same task, as Trio requires. Leaving
cancels the background tasks. The block's own exception is never wrapped in an
ExceptionGroup: the nursery is exited as if the block ended normally and the original
exception then propagates unchanged, so ``except NotLeaderOrFollowerError`` works
around ``async with``.
"""

from __future__ import annotations

import contextlib

import trio


class BackgroundTasks:
    def __init__(self) -> None:
        self._manager: contextlib.AbstractAsyncContextManager[trio.Nursery] | None = None
        self.nursery: trio.Nursery | None = None

    async def open(self) -> trio.Nursery:
        self._manager = trio.open_nursery()
        self.nursery = await self._manager.__aenter__()
        return self.nursery

    async def close(self) -> None:
        """Cancel every background task and wait for them to finish."""
        manager, nursery = self._manager, self.nursery
        if manager is None or nursery is None:
            return
        self._manager = self.nursery = None
        nursery.cancel_scope.cancel()
        await manager.__aexit__(None, None, None)

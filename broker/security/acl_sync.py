"""AclSync: keeps a broker's AclAuthorizer equal to the ACLs in ZooKeeper.

``load`` reads every ACL znode (zk/acls.py) into the authorizer and arms child watches
on both change-notification parents; it runs before the broker's listeners open, so no
request is ever decided on an empty index. ``run`` then follows the notifications:
each one names a resource pattern, whose znode is re-read and replaces that pattern's
entries. A new ZooKeeper session (after an expiry, notifications may have been missed
and purged) reloads everything, as Kafka's AclAuthorizer does.

Notifications older than ``CHANGE_EXPIRATION_MS`` are deleted by whichever broker sees
them, as Kafka's ZkNodeChangeNotificationListener purges its own.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Final

import trio

from minibroker.broker.security.authorizer import AclAuthorizer
from minibroker.protocol.errors import MinibrokerError
from minibroker.zk.acls import (
    CHANGE_PATHS,
    change_names,
    changed_patterns,
    read_acls,
    read_all_acls,
)
from minibroker.zk.client import ZkClient
from minibroker.zk.types import StateChange, WatchEvent, WatchType, ZkState

log = logging.getLogger(__name__)

CHANGE_EXPIRATION_MS: Final = 15 * 60 * 1000
"""Kafka's notification expiry: long enough for every broker to have read it."""


class AclSync:
    def __init__(
        self, authorizer: AclAuthorizer, zk: ZkClient, *, clock_ms: Callable[[], int]
    ) -> None:
        self.authorizer = authorizer
        self.zk = zk
        self.clock_ms = clock_ms
        self._seen: dict[str, str] = {}  # notification parent -> newest name applied
        self.events = zk.subscribe()  # before ``load`` arms any watch

    async def load(self) -> None:
        """Read every ACL and arm the notification watches."""
        for parent in CHANGE_PATHS:
            names = await change_names(self.zk, parent, watch=True)
            self._seen[parent] = max(names, default="")
        acls = await read_all_acls(self.zk)
        self.authorizer.replace_all(acls)
        log.info("loaded %d ACLs on %d resource patterns", self.authorizer.count(), len(acls))

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Apply changes until cancelled (after ``load``)."""
        task_status.started()
        async for event in self.events:
            try:
                if isinstance(event, WatchEvent):
                    if event.type is WatchType.CHILD and event.path in CHANGE_PATHS:
                        await self.apply_changes(event.path)
                elif isinstance(event, StateChange) and event.state is ZkState.CONNECTED:
                    if event.new_session:
                        await self.load()
                    else:
                        for parent in CHANGE_PATHS:
                            await self.apply_changes(parent)
            except MinibrokerError as exc:  # ZkError included; a reconnect retries
                log.warning("cannot apply ACL changes: %s", exc)

    async def apply_changes(self, parent: str) -> None:
        """Re-read the patterns named by the notifications under ``parent`` not yet
        applied (re-arming its watch)."""
        names = await change_names(self.zk, parent, watch=True)
        fresh = [n for n in names if n > self._seen.get(parent, "")]
        if fresh:
            patterns = await changed_patterns(self.zk, parent, fresh)
            for pattern in sorted(patterns, key=str):
                entries, _ = await read_acls(self.zk, pattern)
                self.authorizer.set_acls(pattern, entries)
                log.info("ACLs of %s: %d entries", pattern, len(entries))
            self._seen[parent] = fresh[-1]
        await self._purge_expired(parent, names)

    async def _purge_expired(self, parent: str, names: list[str]) -> None:
        """Delete the notifications older than CHANGE_EXPIRATION_MS: the oldest first,
        stopping at the first younger one (sequence order is creation order)."""
        expired_before = self.clock_ms() - CHANGE_EXPIRATION_MS
        for name in names:
            path = f"{parent}/{name}"
            stat = await self.zk.exists(path)
            if stat is None:
                continue  # purged by another broker
            if stat.ctime_ms >= expired_before:
                return
            with contextlib.suppress(MinibrokerError):  # another broker was first
                await self.zk.delete(path)

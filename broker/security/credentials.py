"""The SCRAM credentials a broker checks logins against, kept in step with ZooKeeper.

``CredentialCache.lookup`` is what a SASL exchange calls (synchronously, on the event
loop: a dict lookup). ``run`` is a session service (broker/cluster_member.py): on every
join it loads every user under /config/users (zk/scram_users.py), then follows the
/config/changes notifications naming ``users/<name>`` and re-reads just those users, so
``minibroker users add`` / ``delete`` take effect on every broker within a watch round
trip, without a restart. A new ZooKeeper session reloads everything (notifications
may have been missed meanwhile). A standalone broker has no users: its SASL listeners
accept nobody.
"""

from __future__ import annotations

import logging

import trio

from minibroker.protocol.errors import MinibrokerError
from minibroker.protocol.sasl import ScramCredential
from minibroker.zk.config_changes import config_change_names
from minibroker.zk.data import KafkaZkClient
from minibroker.zk.model import CONFIG_CHANGES_PATH
from minibroker.zk.scram_users import (
    UserCredentials,
    read_all_credentials,
    read_user_credentials,
    users_changed,
)
from minibroker.zk.types import StateChange, WatchEvent, WatchType, ZkEvent, ZkState

log = logging.getLogger(__name__)


class CredentialCache:
    """User name -> its SCRAM credentials by mechanism."""

    def __init__(self) -> None:
        self.users: dict[str, UserCredentials] = {}
        self.changed = trio.Event()
        """Set (and replaced) after each change is applied: tests wait on it."""

    def lookup(self, mechanism: str, user: str) -> ScramCredential | None:
        credentials = self.users.get(user)
        return None if credentials is None else credentials.get(mechanism)

    async def load(self, zk: KafkaZkClient) -> None:
        """Read every user now (before the listeners open: a login must not race the
        first read)."""
        self.users = await read_all_credentials(zk.zk)
        self._applied()

    def _applied(self) -> None:
        self.changed.set()
        self.changed = trio.Event()

    async def run(
        self,
        zk: KafkaZkClient,
        events: trio.MemoryReceiveChannel[ZkEvent],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        data = zk
        last = max(await config_change_names(data.zk, watch=True), default="")
        self.users = await read_all_credentials(data.zk)
        self._applied()
        task_status.started()
        async for event in events:
            if isinstance(event, WatchEvent):
                if event.path != CONFIG_CHANGES_PATH or event.type is not WatchType.CHILD:
                    continue
            elif not (isinstance(event, StateChange) and event.state is ZkState.CONNECTED):
                continue
            try:
                names = await config_change_names(data.zk, watch=True)
                if isinstance(event, StateChange) and event.new_session:
                    self.users = await read_all_credentials(data.zk)
                fresh = [n for n in names if n > last]
                for user in sorted(await users_changed(data.zk, fresh)):
                    await self._reload(data, user)
                if fresh:
                    last = fresh[-1]
                self._applied()
            except MinibrokerError as exc:  # ZkError included; the reconnect replays
                log.warning("cannot apply SCRAM credential changes: %s", exc)

    async def reload(self, data: KafkaZkClient, user: str) -> None:
        """Re-read one user now (the broker that changed it, before answering)."""
        await self._reload(data, user)
        self._applied()

    async def _reload(self, data: KafkaZkClient, user: str) -> None:
        credentials = await read_user_credentials(data.zk, user)
        if credentials:
            self.users[user] = credentials
            log.info("SCRAM credentials of %s updated (%s)", user, ", ".join(sorted(credentials)))
        elif self.users.pop(user, None) is not None:
            log.info("SCRAM user %s deleted", user)

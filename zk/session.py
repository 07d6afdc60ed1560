"""A ZooKeeper session's credentials kept on disk, and closing a session from outside.

A broker writes its session's (id, password) to a file in its log dir whenever it gets
a new session. After a kill -9 the old session lives on until ZooKeeper expires it
(``zookeeper.session.timeout.ms``, 18 s by default) and with it the old ephemeral
/brokers/ids/<id>. A restarted broker that finds that znode owned by the session in its
file can join that session with the saved password and close it: ZooKeeper then deletes
the session's ephemerals at once (broker/cluster_member.py says when that is safe).

The file holds a secret (whoever has it can end the session) and is written 0600.
"""

from __future__ import annotations

import json
from pathlib import Path

import trio
from kazoo.client import KazooClient

from minibroker.storage.checkpoint import write_atomically
from minibroker.zk.types import ZkConnectionLoss, split_connect_string

SESSION_FILE = ".zookeeper_session"
"""The file's name in the broker's first log dir."""

Credentials = tuple[int, bytes]
"""(session id, password), as kazoo's ``client_id``."""


def write_credentials(path: Path, credentials: Credentials) -> None:
    """Replace ``path`` atomically with ``credentials`` (blocking: run in a thread)."""
    session_id, password = credentials
    text = json.dumps({"session_id": session_id, "password": password.hex()})
    write_atomically(path, text.encode(), mode=0o600)


def read_credentials(path: Path) -> Credentials | None:
    """The saved credentials; None if the file is missing or unreadable."""
    try:
        value = json.loads(path.read_text())
        return int(value["session_id"]), bytes.fromhex(value["password"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


async def close_session(connect: str, credentials: Credentials, *, timeout: float) -> None:
    """Join the session ``credentials`` name and close it, so ZooKeeper deletes its
    ephemerals now. Raises ZkConnectionLoss if that is not done within ``timeout``
    (a session that already expired cannot be joined: that is a failure too, and
    harmless, as its ephemerals are gone)."""
    hosts, _ = split_connect_string(connect)

    def join_and_close() -> None:
        client = KazooClient(hosts=hosts, client_id=credentials, timeout=timeout)
        try:
            client.start(timeout=timeout)
        finally:
            client.stop()
            client.close()

    try:
        await trio.to_thread.run_sync(join_and_close, abandon_on_cancel=True)
    except Exception as exc:
        raise ZkConnectionLoss(f"cannot close session 0x{credentials[0]:x}: {exc!r}") from exc

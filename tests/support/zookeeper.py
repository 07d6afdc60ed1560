"""pytest fixtures: one real ZooKeeper per test session, a fresh chroot per test.

``zookeeper_server``  session scope, sync: a ``ZooKeeperServer`` (pyspark's jars) in a
                      tmp dir, fsync off. Plain sync on purpose: pytest-trio runs each
                      async test in its own ``trio.run``, which a session-scoped async
                      fixture could not outlive.
``zk_connect``        ``127.0.0.1:PORT/t-<hex>``: an empty chroot made for this test and
                      deleted with everything under it afterwards (kazoo's own test
                      harness does the same), so tests never see each other's znodes.
``zk_client``         a connected ``ZkClient`` in that chroot (async; closed afterwards).
``zk_session_killer`` a function expiring a ``ZkClient``'s session on demand.

Import these names into a conftest.py to use them.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import pytest
import trio
from kazoo.client import KazooClient

from minibroker.zk.client import ZkClient, open_zk_client
from minibroker.zk.server import ZooKeeperServer

# Short enough that a session a test abandons expires quickly; long enough for a loaded
# CI machine. ZooKeeper clamps it to 2..20 ticks of 500 ms anyway.
TEST_SESSION_TIMEOUT_S = 4.0
ADMIN_CONNECT_TIMEOUT_S = 15.0

ExpireSession = Callable[[ZkClient], Awaitable[None]]


@pytest.fixture(scope="session")
def zookeeper_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    with ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"), force_sync=False) as server:
        yield server


@pytest.fixture(scope="session")
def _zookeeper_admin(zookeeper_server: ZooKeeperServer) -> Iterator[KazooClient]:
    """A root (un-chrooted) kazoo session that makes and removes the test chroots."""
    admin = KazooClient(hosts=zookeeper_server.connect_string)
    admin.start(timeout=ADMIN_CONNECT_TIMEOUT_S)
    try:
        yield admin
    finally:
        admin.stop()
        admin.close()


@pytest.fixture
def zk_connect(zookeeper_server: ZooKeeperServer, _zookeeper_admin: KazooClient) -> Iterator[str]:
    chroot = f"/t-{uuid.uuid4().hex}"
    _zookeeper_admin.create(chroot)
    try:
        yield zookeeper_server.connect_string + chroot
    finally:
        _zookeeper_admin.delete(chroot, recursive=True)


@pytest.fixture
async def zk_client(zk_connect: str) -> AsyncIterator[ZkClient]:
    async with open_zk_client(zk_connect, session_timeout=TEST_SESSION_TIMEOUT_S) as client:
        yield client


@pytest.fixture
def zk_session_killer(zookeeper_server: ZooKeeperServer) -> ExpireSession:
    """``await zk_session_killer(client)`` ends ``client``'s session at the server.

    It joins the session with the same id and password from a second connection and
    closes it there: ZooKeeper then treats the session as closed, deletes its
    ephemerals, and the original client learns of the expiry when it reconnects.
    """

    async def expire(client: ZkClient) -> None:
        credentials = client.session_credentials()
        assert credentials is not None, "the client has no session to expire"

        def close_from_elsewhere() -> None:
            intruder = KazooClient(hosts=zookeeper_server.connect_string, client_id=credentials)
            intruder.start(timeout=ADMIN_CONNECT_TIMEOUT_S)
            intruder.stop()
            intruder.close()

        await trio.to_thread.run_sync(close_from_elsewhere)

    return expire

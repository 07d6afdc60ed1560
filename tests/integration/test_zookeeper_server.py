"""The ZooKeeper we start ourselves (pyspark's jars) and the per-test chroot fixture."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from minibroker.zk.client import (
    NoNode,
    StateChange,
    WatchEvent,
    WatchType,
    ZkClient,
    ZkState,
    open_zk_client,
)
from minibroker.zk.server import (
    ZooKeeperError,
    ZooKeeperServer,
    is_serving,
    open_zookeeper,
    ruok,
)

pytestmark = pytest.mark.timeout(60)

# The session must outlive a stop plus a cold JVM start on a loaded 2-CPU CI box.
RESTART_SESSION_TIMEOUT_S = 55.0


def test_session_server_is_serving_once_started(zookeeper_server: ZooKeeperServer) -> None:
    assert zookeeper_server.is_running()
    assert ruok(zookeeper_server.host, zookeeper_server.port)
    assert is_serving(zookeeper_server.host, zookeeper_server.port)


async def test_first_session_after_start_connects_without_a_retry(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Readiness means sessions are accepted, not merely that the port answers ruok."""
    async with open_zookeeper(tmp_path, force_sync=False) as server:
        caplog.clear()
        async with open_zk_client(server.connect_string, connect_timeout=30):
            pass
    dropped = [r for r in caplog.records if "Connection dropped" in r.getMessage()]
    assert dropped == []


def test_server_writes_its_log_to_the_data_dir_not_stdout(
    zookeeper_server: ZooKeeperServer,
) -> None:
    assert "binding to port" in zookeeper_server.log_path.read_text()
    assert (zookeeper_server.data_dir / "zookeeper.out").read_text() == ""


def test_a_port_already_in_use_is_refused_with_one_line(
    zookeeper_server: ZooKeeperServer, tmp_path: Path
) -> None:
    second = ZooKeeperServer(tmp_path, port=zookeeper_server.port)
    with pytest.raises(ZooKeeperError, match="Address already in use") as info:
        second.start()
    assert "\n" not in str(info.value)
    assert not second.is_running()


async def test_each_test_gets_its_own_empty_chroot(zk_client: ZkClient) -> None:
    assert await zk_client.get_children("/") == []
    await zk_client.create("/mine", b"x")
    assert await zk_client.get_children("/") == ["mine"]


async def test_chroots_do_not_see_each_other(zookeeper_server: ZooKeeperServer) -> None:
    base = zookeeper_server.connect_string
    async with (
        open_zk_client(f"{base}/iso-a/kafka") as a,
        open_zk_client(f"{base}/iso-b") as b,
    ):
        await a.create("/brokers", b"a")
        with pytest.raises(NoNode):
            await b.get("/brokers")
        async with open_zk_client(base) as root:
            data, _ = await root.get("/iso-a/kafka/brokers")
            assert data == b"a"
            await root.delete("/iso-a", recursive=True)
            await root.delete("/iso-b", recursive=True)


async def test_run_reports_started_and_stops_when_cancelled(tmp_path: Path) -> None:
    server = ZooKeeperServer(tmp_path, force_sync=False)
    async with trio.open_nursery() as nursery:
        started = await nursery.start(server.run)
        assert started is server
        assert await trio.to_thread.run_sync(ruok, server.host, server.port)
        nursery.cancel_scope.cancel()
    assert not server.is_running()


@pytest.mark.timeout(120)
async def test_a_zookeeper_restart_on_the_same_port_suspends_the_session_but_keeps_it(
    tmp_path: Path,
) -> None:
    async with (
        open_zookeeper(tmp_path, force_sync=False) as server,
        open_zk_client(server.connect_string, session_timeout=RESTART_SESSION_TIMEOUT_S) as client,
    ):
        events = client.subscribe()
        session = client.session_id
        await client.create("/ids", b"")
        await client.create("/ids/1", b"", ephemeral=True)
        await client.get_children("/ids", watch=True)
        await client.exists("/controller", watch=True)

        await server.stop_async()
        with trio.fail_after(30):
            assert await events.receive() == StateChange(ZkState.SUSPENDED, session)
        await server.start_async()  # same port, same data dir
        with trio.fail_after(60):
            assert await events.receive() == StateChange(ZkState.CONNECTED, session, False)
            # Watches armed before the drop fire once: a change may have been missed.
            missed = {await events.receive(), await events.receive()}
        assert missed == {
            WatchEvent(WatchType.CHILD, "/ids"),
            WatchEvent(WatchType.CHANGED, "/controller"),
        }
        assert await client.get_children("/ids") == ["1"]
    assert not server.is_running()
    assert not await trio.to_thread.run_sync(ruok, server.host, server.port)

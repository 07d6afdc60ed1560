"""The ZooKeeper we start ourselves (pyspark's jars) and the per-test chroot fixture."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from controller.zk_client import NoNode, ZkClient, open_zk_client
from controller.zookeeper_server import (
    ZooKeeperError,
    ZooKeeperServer,
    open_zookeeper,
    ruok,
)

pytestmark = pytest.mark.timeout(60)


def test_session_server_answers_ruok(zookeeper_server: ZooKeeperServer) -> None:
    assert zookeeper_server.is_running()
    assert ruok(zookeeper_server.host, zookeeper_server.port)


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


async def test_trio_api_starts_and_stops_a_second_server(tmp_path: Path) -> None:
    async with open_zookeeper(tmp_path, force_sync=False) as server:
        host, port = server.host, server.port
        assert await trio.to_thread.run_sync(ruok, host, port)
    assert not server.is_running()
    assert not await trio.to_thread.run_sync(ruok, host, port)


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

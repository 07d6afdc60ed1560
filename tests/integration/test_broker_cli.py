"""`minibroker broker` as a process: starts from a .properties file, SIGTERM stops it
cleanly (also while ZooKeeper does not answer), bad configuration is one line and exit
code 1."""

from __future__ import annotations

import signal
import socket
from pathlib import Path

import pytest
import trio

from minibroker.node.cli import CONTROLLED_SHUTDOWN_ATTEMPT_S
from minibroker.protocol.api import ApiKey
from minibroker.storage.log_manager import CLEAN_SHUTDOWN_FILE
from minibroker.zk.server import ZooKeeperServer
from tests.support.broker import WireClient
from tests.support.cli import open_cli, run_cli

pytestmark = pytest.mark.timeout(60)


async def test_sigterm_stops_the_broker_cleanly(tmp_path: Path) -> None:
    properties = tmp_path / "server.properties"
    properties.write_text(
        "# a broker for the test\nbroker.id=7\nlisteners=PLAINTEXT://127.0.0.1:9\n"
        f"log.dirs={tmp_path / 'logs'}\n"
    )
    proc = open_cli("broker", "--config", str(properties), "--listen", "127.0.0.1:0")
    try:
        assert proc.stdout is not None
        line = await trio.to_thread.run_sync(proc.stdout.readline)
        assert line.startswith("broker 7 listening on port"), line
        port = int(line.split()[-1])
        async with await WireClient.connect(port) as client:
            assert (await client.request(ApiKey.API_VERSIONS, {}))["error_code"] == 0
        proc.send_signal(signal.SIGTERM)
        code = await trio.to_thread.run_sync(proc.wait)
    finally:
        proc.kill()
        proc.wait()
    assert code == 0
    assert (tmp_path / "logs" / CLEAN_SHUTDOWN_FILE).exists()


@pytest.mark.parametrize(
    ("args", "key"),
    [
        (["--set", "no.such.key=1"], "no.such.key"),
        (["--set", "num.partitions=zero"], "num.partitions"),
        (["--listen", "nocolon"], "listeners"),
    ],
)
async def test_bad_configuration_is_one_line_and_exit_code_1(
    tmp_path: Path, args: list[str], key: str
) -> None:
    done = await run_cli("broker", "--log-dirs", str(tmp_path), *args)
    err = done.stderr
    assert done.returncode == 1
    assert key in err
    assert len(err.strip().splitlines()) == 1, err


async def test_a_port_in_use_is_one_line_and_exit_code_1(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = await run_cli("broker", "--log-dirs", str(tmp_path), "--listen", f"127.0.0.1:{port}")
    err = done.stderr
    assert done.returncode == 1
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and "cannot listen" in errors[0], err
    assert "Traceback" not in err


def _port_nobody_listens_on() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
async def test_a_signal_stops_a_broker_whose_zookeeper_never_answers(
    tmp_path: Path, signum: int
) -> None:
    proc = open_cli(
        "broker",
        *("--broker-id", "3", "--listen", "127.0.0.1:0", "--metrics-port", "0"),
        *("--log-dirs", str(tmp_path / "logs")),
        *("--zookeeper", f"127.0.0.1:{_port_nobody_listens_on()}"),
    )
    try:
        # The broker opens its ZooKeeper session before anything else, and stays mid-start
        # from its first connection attempt on (ZooKeeper never answers). Its log line,
        # not a connection of ours: connecting to a free local port can connect to itself.
        assert proc.stderr is not None
        with trio.fail_after(30):
            while "kazoo.client: Connecting to" not in (
                line := await trio.to_thread.run_sync(proc.stderr.readline)
            ):
                assert line, "the broker exited before listening"
        proc.send_signal(signum)
        with trio.fail_after(8):  # well inside the 15 s ZooKeeper connect timeout
            code = await trio.to_thread.run_sync(proc.wait)
    finally:
        proc.kill()
        proc.wait()
    assert code == 0


async def test_a_signal_stops_a_broker_whose_zookeeper_went_away(tmp_path: Path) -> None:
    with ZooKeeperServer(tmp_path / "zookeeper", force_sync=False) as zookeeper:
        proc = open_cli(
            "broker",
            *("--broker-id", "4", "--listen", "127.0.0.1:0", "--metrics-port", "0"),
            *("--log-dirs", str(tmp_path / "logs"), "--zookeeper", zookeeper.connect_string),
            # One controlled-shutdown attempt: the deadline is then CONTROLLED_SHUTDOWN_ATTEMPT_S.
            *("--set", "controlled.shutdown.max.retries=0"),
        )
        try:
            assert proc.stdout is not None
            line = await trio.to_thread.run_sync(proc.stdout.readline)
            assert line.startswith("broker 4 listening on port"), line
            zookeeper.stop()
            proc.send_signal(signal.SIGTERM)
            with trio.fail_after(CONTROLLED_SHUTDOWN_ATTEMPT_S + 10):
                code = await trio.to_thread.run_sync(proc.wait)
        finally:
            proc.kill()
            proc.wait()
    assert code == 0

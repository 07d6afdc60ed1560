"""``minibroker users add|list|delete`` against a running two-broker SASL cluster, through
the brokers' SCRAM APIs (logged in as the broker user): each change reaches every broker
through /config/changes, without a restart; ``--zookeeper`` still reads and writes
ZooKeeper directly (the first users)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

from minibroker.broker.broker import Broker
from minibroker.command.main import main
from minibroker.net.connection import Connection
from minibroker.net.security import ClientSecurity
from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import SaslAuthenticationFailedError
from minibroker.zk.client import ZkClient
from tests.support.security import (
    BROKER_PASSWORD,
    BROKER_USER,
    add_user,
    sasl_properties,
    secured_node,
)

pytestmark = pytest.mark.timeout(90)

BOB = ClientSecurity("SASL_PLAINTEXT", None, "SCRAM-SHA-256", "bob", "bob-pw")


async def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = await trio.to_thread.run_sync(main, list(argv))
    return code, capsys.readouterr().out


async def wait_for_user(broker: Broker, name: str, present: bool) -> None:
    with trio.fail_after(30):
        while (name in broker.credentials.users) != present:
            await broker.credentials.changed.wait()


async def bob_logs_in(broker: Broker) -> None:
    async with Connection("127.0.0.1", broker.port, security=BOB) as conn:
        assert (await conn.request(ApiKey.METADATA, {"topics": []}))["brokers"]


async def test_a_user_added_then_deleted_with_the_cli_takes_effect_on_every_broker(
    tmp_path: Path, zk_connect: str, zk_client: ZkClient, capsys: pytest.CaptureFixture[str]
) -> None:
    await add_user(zk_client, BROKER_USER, BROKER_PASSWORD)
    password_file = tmp_path / "bob.pw"
    password_file.write_text("bob-pw\n")
    props = sasl_properties()
    async with (
        secured_node(tmp_path / "b1", zk_connect, props, broker_id=1) as first,
        secured_node(tmp_path / "b2", zk_connect, props, broker_id=2) as second,
    ):
        for broker in (first, second):
            with pytest.raises(SaslAuthenticationFailedError):
                await bob_logs_in(broker)
        login = tmp_path / "broker.properties"
        login.write_text(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
            f"sasl.username={BROKER_USER}\nsasl.password={BROKER_PASSWORD}\n"
        )
        api = ("--bootstrap-server", f"127.0.0.1:{first.port}", "--command-config", str(login))
        code, out = await cli(
            capsys, "users", "add", "bob", "--mechanism", "SCRAM-SHA-256",
            "--password-file", str(password_file), *api,
        )  # fmt: skip
        assert code == 0 and "bob-pw" not in out
        for broker in (first, second):
            await wait_for_user(broker, "bob", present=True)
            await bob_logs_in(broker)
        code, out = await cli(capsys, "users", "list", "--format", "json", *api)
        assert {"name": "bob", "mechanisms": ["SCRAM-SHA-256"]} in json.loads(out)
        code, out = await cli(
            capsys, "users", "list", "--format", "json", "--zookeeper", zk_connect
        )
        assert {"name": "bob", "mechanisms": ["SCRAM-SHA-256"]} in json.loads(out)
        assert "bob-pw" not in (await zk_client.get("/config/users/bob"))[0].decode()
        code, _ = await cli(capsys, "users", "delete", "bob", *api)
        assert code == 0
        for broker in (first, second):
            await wait_for_user(broker, "bob", present=False)
            with pytest.raises(SaslAuthenticationFailedError):
                await bob_logs_in(broker)

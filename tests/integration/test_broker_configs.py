"""Dynamic broker configs over a real ZooKeeper and a real in-process broker: the
log-dir throttle set by AlterConfigs (BROKER resource) reaches the mover at once and
again after a restart, and `reassign --execute/--verify` sets and clears it."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from minibroker.broker.admin.broker_configs import LEADER_THROTTLE, LOG_DIRS_THROTTLE
from minibroker.broker.broker import Broker
from minibroker.client.admin import Admin
from minibroker.client.cli import reassign
from minibroker.client.reassignment import parse_reassignment
from tests.integration.test_log_dir_moves import one_broker, topic_of_400_kb, wait_until

STATIC_RATE = 30_000_000  # the broker's configured log-dir throttle in these tests
DYNAMIC = 2  # config_source of a dynamic broker override (Kafka's DYNAMIC_BROKER_CONFIG)


def mover_rate(broker: Broker) -> float:
    return broker.parts.log_dir_mover.bucket.rate


@pytest.mark.timeout(90)
async def test_a_dynamic_log_dir_throttle_reaches_the_mover_and_is_reread_at_start_up(
    tmp_path: Path, zk_connect: str
) -> None:
    props = {"replica_alter_log_dirs_io_max_bytes_per_second": STATIC_RATE}
    broker: Broker

    async def throttled() -> bool:
        return mover_rate(broker) == 4096

    async with (
        one_broker(tmp_path, zk_connect, **props) as (broker, _dirs),
        Admin(f"127.0.0.1:{broker.port}") as admin,
    ):
        await admin.alter_broker_config(1, {LOG_DIRS_THROTTLE: "4096"})
        await wait_until(throttled, "the mover to run at 4096 B/s")
        [entry] = [e for e in await admin.describe_broker_config(1) if e.name == LOG_DIRS_THROTTLE]
        assert (entry.value, entry.source) == ("4096", DYNAMIC)
    async with one_broker(tmp_path, zk_connect, **props) as (broker, _dirs):
        await wait_until(throttled, "the restarted mover to read /config/brokers/1")
        async with Admin(f"127.0.0.1:{broker.port}") as admin:
            await admin.alter_broker_config(1, {LOG_DIRS_THROTTLE: None})

            async def static() -> bool:
                return mover_rate(broker) == STATIC_RATE

            await wait_until(static, "the mover to fall back to its static rate")
            [entry] = [
                e for e in await admin.describe_broker_config(1) if e.name == LOG_DIRS_THROTTLE
            ]
            assert (entry.value, entry.source) == (str(STATIC_RATE), 4)


def cli_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    reassign.configure(parser)
    return parser.parse_args(argv)


@pytest.mark.timeout(90)
async def test_reassign_execute_sets_the_throttles_and_verify_clears_them_when_done(
    tmp_path: Path, zk_connect: str, capsys: pytest.CaptureFixture[str]
) -> None:
    props = {"replica_alter_log_dirs_io_max_bytes_per_second": STATIC_RATE}
    async with one_broker(tmp_path, zk_connect, **props) as (broker, dirs):
        bootstrap = f"127.0.0.1:{broker.port}"
        async with Admin(bootstrap) as admin:
            home = await topic_of_400_kb(admin, broker, "thr")
        other = next(d for d in dirs if d != home)
        plan = tmp_path / "plan.json"
        plan.write_text(
            json.dumps(
                {
                    "version": 1,
                    "partitions": [
                        {"topic": "thr", "partition": 0, "replicas": [1], "log_dirs": [str(other)]}
                    ],
                }
            )
        )
        moves = parse_reassignment(plan.read_text())
        common = ("--reassignment-json-file", str(plan), "--bootstrap-server", bootstrap)
        executed = cli_args(
            "--execute",
            *common,
            "--replica-alter-log-dirs-throttle",
            "2000000",
            "--throttle",
            "500",
        )
        assert await reassign._execute(executed, moves) == 0
        out, _err = capsys.readouterr()
        assert "The replica-alter-dir throttle limit was set to 2000000 B/s" in out
        assert "The inter-broker throttle limit was set to 500 B/s" in out

        async def throttled() -> bool:
            return mover_rate(broker) == 2_000_000

        await wait_until(throttled, "the mover to run at the --execute throttle")
        async with Admin(bootstrap) as admin:
            set_ = {
                e.name: e.value
                for e in await admin.describe_broker_config(1)
                if e.source == DYNAMIC
            }
        assert set_[LEADER_THROTTLE] == "500" and set_[LOG_DIRS_THROTTLE] == "2000000"

        verified = cli_args("--verify", *common, "--timeout", "60000")
        assert await reassign._verify(verified, moves) == 0
        out, _err = capsys.readouterr()
        assert "is complete" in out and "Clearing broker-level throttles on brokers 1" in out
        async with Admin(bootstrap) as admin:
            assert not [e for e in await admin.describe_broker_config(1) if e.source == DYNAMIC]

        async def static() -> bool:
            return mover_rate(broker) == STATIC_RATE

        await wait_until(static, "the mover to be unthrottled after --verify")

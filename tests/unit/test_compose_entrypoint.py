"""The container's entrypoint (environment -> broker flags) and healthcheck parsing.

Both scripts live in docker/ (not a package: they are copied into the image as
executables), so they are loaded from their paths.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from minibroker.broker.config.broker_config import BrokerConfig
from minibroker.node import cli as broker_cli

REPO = Path(__file__).resolve().parents[2]


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"docker_{name}", REPO / "docker" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses and typing look modules up by name
    spec.loader.exec_module(module)
    return module


entrypoint = _load("entrypoint")
healthcheck = _load("healthcheck")


def broker_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    broker_cli.configure(parser)
    return parser


def config_from_env(env: dict[str, str]) -> BrokerConfig:
    argv = entrypoint.broker_argv(env)
    assert argv[:2] == ["minibroker", "broker"]
    args = broker_parser().parse_args(argv[2:])
    return BrokerConfig.from_properties(args.config, broker_cli.overrides_from(args))


@pytest.mark.parametrize(
    ("suffix", "key"),
    [
        ("LOG_RETENTION_MS", "log.retention.ms"),
        ("MIN_INSYNC_REPLICAS", "min.insync.replicas"),
        ("SOME__UNDERSCORED_KEY", "some_underscored.key"),
        ("DASHED___KEY", "dashed-key"),
    ],
)
def test_variable_suffix_becomes_a_dotted_property_name(suffix: str, key: str) -> None:
    assert entrypoint.property_name(suffix) == key


@pytest.mark.parametrize("suffix", ["", "_LEADING", "TRAILING_", "FOUR____BARS"])
def test_a_suffix_that_names_no_property_is_refused(suffix: str) -> None:
    with pytest.raises(entrypoint.EntrypointError):
        entrypoint.property_name(suffix)


def test_documented_variables_configure_the_broker_through_its_own_cli() -> None:
    config = config_from_env(
        {
            "MINIBROKER_BROKER_ID": "7",
            "MINIBROKER_ZOOKEEPER_CONNECT": "zk:2181/mb",
            "MINIBROKER_LISTENERS": "PLAINTEXT://0.0.0.0:9092",
            "MINIBROKER_LOG_DIRS": "/data/a,/data/b",
            "MINIBROKER_METRICS_PORT": "9308",
            "MINIBROKER_ADVERTISED_LISTENERS": "127.0.0.1:19092",
            "MINIBROKER_LOG_RETENTION_MS": "60000",
            "HOME": "/var/lib/minibroker",
        }
    )
    assert config.broker_id == 7
    assert config.zookeeper_connect == "zk:2181/mb"
    assert config.listen_address == ("0.0.0.0", 9092)
    assert config.log_dirs == ["/data/a", "/data/b"]
    assert config.metrics_port == 9308
    assert config.advertised_address == ("127.0.0.1", 19092)
    assert config.log_retention_ms == 60000


def test_empty_variables_are_ignored_and_others_are_not_broker_properties() -> None:
    argv = entrypoint.broker_argv(
        {"MINIBROKER_BROKER_ID": "", "MINIBROKER_NUM_PARTITIONS": " ", "PATH": "/bin"}
    )
    assert argv == ["minibroker", "broker"]


def test_arguments_after_broker_come_last_so_they_win() -> None:
    argv = entrypoint.command_argv(
        ["broker", "--broker-id", "9"], {"MINIBROKER_BROKER_ID": "1", "MINIBROKER_X_Y": "z"}
    )
    assert argv == [
        "minibroker",
        "broker",
        "--broker-id",
        "1",
        "--set",
        "x.y=z",
        "--broker-id",
        "9",
    ]
    assert broker_parser().parse_args(argv[2:]).broker_id == 9


def test_other_commands_run_as_minibroker_subcommands_or_executables() -> None:
    assert entrypoint.command_argv(["zookeeper", "--port=2181"], {}) == [
        "minibroker",
        "zookeeper",
        "--port=2181",
    ]
    assert entrypoint.command_argv(["sh", "-c", "true"], {}) == ["sh", "-c", "true"]
    assert entrypoint.command_argv(["--set", "a.b=c"], {})[:2] == ["minibroker", "broker"]
    assert entrypoint.command_argv([], {}) == ["minibroker", "broker"]


def test_an_unusable_variable_is_one_error_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MINIBROKER__BAD", "1")
    assert entrypoint.main(["broker"]) == 2
    assert capsys.readouterr().err.strip().startswith("minibroker-entrypoint: error:")


def test_healthcheck_probes_the_broker_listener_on_loopback() -> None:
    argv = [
        "/opt/minibroker/bin/python3",
        "/opt/minibroker/bin/minibroker",
        "broker",
        "--listen",
        "0.0.0.0:9093",
        "--listen",
        "PLAINTEXT://10.0.0.5:9094",
    ]
    assert healthcheck.minibroker_command(argv) == "broker"
    assert healthcheck.broker_endpoint(argv) == ("10.0.0.5", 9094)
    assert healthcheck.broker_endpoint(argv[:5]) == ("127.0.0.1", 9093)
    assert healthcheck.broker_endpoint(argv[:3]) == ("127.0.0.1", 9092)


def test_healthcheck_probes_zookeeper_on_its_port() -> None:
    argv = ["python3", "/usr/bin/minibroker", "zookeeper", "--port=2182", "--host=0.0.0.0"]
    assert healthcheck.minibroker_command(argv) == "zookeeper"
    assert healthcheck.zookeeper_endpoint(argv) == ("127.0.0.1", 2182)


def test_a_process_that_serves_nothing_is_healthy_while_it_runs() -> None:
    assert healthcheck.check(["sleep", "infinity"]).startswith("no server to probe")

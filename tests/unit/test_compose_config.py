"""docker-compose.yml as Debian's ``docker-compose config`` resolves it (no engine needed).

``docker-compose config`` validates the file against the Compose schema, merges the
override and interpolates ``${VARS}``; these tests read its resolved output. The tool
is Debian's ``docker-compose`` package (``.ci/run`` installs it); its absence fails the
first test with that instruction, it is never skipped.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from minibroker.broker.config.broker_config import BrokerConfig
from minibroker.node.cli import overrides_from
from tests.unit.test_compose_entrypoint import broker_parser, entrypoint

REPO = Path(__file__).resolve().parents[2]
BROKERS = ("broker-1", "broker-2", "broker-3")
INSTALL_HINT = "docker-compose not found: install Debian's package (apt-get install docker-compose)"
# docker-compose v1 starts a Python interpreter per call: a second or two each.
CONFIG_TIMEOUT_S = 60


def compose_config(*files: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """The resolved configuration of ``files`` (relative to the repo) as a dict."""
    tool = shutil.which("docker-compose")
    assert tool is not None, INSTALL_HINT
    command = [tool, "--project-directory", str(REPO)]
    for name in files:
        command += ["-f", str(REPO / name)]
    # Only our variables and what the tool needs: the caller's MINIBROKER_* must not leak in.
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MINIBROKER_")}
    result = subprocess.run(
        [*command, "config"],
        capture_output=True,
        text=True,
        timeout=CONFIG_TIMEOUT_S,
        env={**clean, **(env or {})},
        check=False,
    )
    assert result.returncode == 0, f"docker-compose config failed: {result.stderr.strip()}"
    return load_yaml(result.stdout, tool)


def load_yaml(text: str, compose_tool: str) -> dict[str, Any]:
    """Parse YAML with PyYAML if this Python has it, else with the interpreter that runs
    Debian's docker-compose (which always has PyYAML: the tool is built on it)."""
    try:
        import yaml  # type: ignore[import-untyped]
    except ImportError:
        shebang = Path(compose_tool).read_text(encoding="utf-8").splitlines()[0]
        interpreter = shebang.removeprefix("#!").split()
        converted = subprocess.run(
            [
                *interpreter,
                "-c",
                "import json,sys,yaml; json.dump(yaml.safe_load(sys.stdin), sys.stdout)",
            ],
            input=text,
            capture_output=True,
            text=True,
            timeout=CONFIG_TIMEOUT_S,
            check=True,
        )
        parsed: dict[str, Any] = json.loads(converted.stdout)
        return parsed
    loaded: dict[str, Any] = yaml.safe_load(text)
    return loaded


@pytest.fixture(scope="module")
def default_config() -> dict[str, Any]:
    return compose_config("docker-compose.yml")


@pytest.fixture(scope="module")
def host_config() -> dict[str, Any]:
    return compose_config("docker-compose.yml", "docker/compose.host-network.yml")


def broker_config_of(service: dict[str, Any]) -> BrokerConfig:
    """The BrokerConfig a container of ``service`` would start with (entrypoint + CLI)."""
    env = {key: str(value) for key, value in service["environment"].items()}
    argv = entrypoint.command_argv(["broker"], env)
    args = broker_parser().parse_args(argv[2:])
    return BrokerConfig.from_properties(None, overrides_from(args))


def test_compose_file_validates_with_docker_compose(default_config: dict[str, Any]) -> None:
    assert set(BROKERS) | {"net", "zookeeper", "prometheus", "analytics"} == set(
        default_config["services"]
    )


def test_every_service_of_ours_builds_the_one_image_instead_of_pulling_it(
    default_config: dict[str, Any],
) -> None:
    ours = {n: s for n, s in default_config["services"].items() if n != "prometheus"}
    assert {s["image"] for s in ours.values()} == {"minibroker:latest"}
    for name, service in ours.items():
        assert Path(service["build"]["context"]) == REPO, name
        assert service["build"]["args"]["BASE_IMAGE"] == "python:3.11-slim-bookworm", name


def test_every_broker_environment_is_a_valid_broker_config(
    default_config: dict[str, Any],
) -> None:
    configs = [broker_config_of(default_config["services"][name]) for name in BROKERS]
    assert [c.broker_id for c in configs] == [1, 2, 3]
    assert {c.zookeeper_connect for c in configs} == {"127.0.0.1:2181"}
    assert [c.advertised_address for c in configs] == [
        ("127.0.0.1", 9092),
        ("127.0.0.1", 9093),
        ("127.0.0.1", 9094),
    ]
    assert [c.metrics_port for c in configs] == [9308, 9309, 9310]
    assert all(c.default_replication_factor == 3 for c in configs)
    # Kafka's clients and tools reach every broker 10,000 above its msgpack port
    assert [c.kafka_listen_address for c in configs] == [
        ("0.0.0.0", 19092),
        ("0.0.0.0", 19093),
        ("0.0.0.0", 19094),
    ]
    assert [c.kafka_advertised_address for c in configs] == [
        ("127.0.0.1", 19092),
        ("127.0.0.1", 19093),
        ("127.0.0.1", 19094),
    ]


def test_each_broker_keeps_two_log_dirs_on_its_own_named_volumes(
    default_config: dict[str, Any],
) -> None:
    seen: set[str] = set()
    for name in BROKERS:
        service = default_config["services"][name]
        log_dirs = broker_config_of(service).log_dirs
        assert len(log_dirs) == 2
        mounts = {_volume_target(v): _volume_source(v) for v in service["volumes"]}
        sources = [mounts[d] for d in log_dirs]
        assert all(s in default_config["volumes"] for s in sources), sources
        seen.update(sources)
    assert len(seen) == 6


def test_services_share_one_network_namespace_publishing_on_loopback_only(
    default_config: dict[str, Any],
) -> None:
    services = default_config["services"]
    for name in ("zookeeper", *BROKERS, "prometheus", "analytics"):
        assert services[name]["network_mode"] == "service:net", name
    published = {(p["host_ip"], p["published"], p["target"]) for p in _ports(services["net"])}
    ports = (9092, 9093, 9094, 19092, 19093, 19094, 9090)
    assert published == {("127.0.0.1", port, port) for port in ports}


def test_brokers_wait_for_a_healthy_zookeeper(default_config: dict[str, Any]) -> None:
    for name in BROKERS:
        depends = default_config["services"][name]["depends_on"]
        assert depends["zookeeper"]["condition"] == "service_healthy"


def test_prometheus_scrapes_the_brokers_with_the_repo_scrape_config(
    default_config: dict[str, Any],
) -> None:
    service = default_config["services"]["prometheus"]
    sources = {_volume_target(v): _volume_source(v) for v in service["volumes"]}
    assert Path(sources["/etc/prometheus/prometheus.yml"]) == REPO / "deploy" / "prometheus.yml"
    scrape = (REPO / "deploy" / "prometheus.yml").read_text(encoding="utf-8")
    targets_line = re.search(r"^\s*- targets:(.*)$", scrape, re.M)
    assert targets_line is not None
    targets = re.findall(r"127\.0\.0\.1:(\d+)", targets_line.group(1))
    metrics_ports = [broker_config_of(default_config["services"][n]).metrics_port for n in BROKERS]
    assert [int(t) for t in targets] == metrics_ports


def test_analytics_is_an_opt_in_profile_reading_every_log_dir_read_only(
    default_config: dict[str, Any],
) -> None:
    service = default_config["services"]["analytics"]
    assert service["profiles"] == ["analytics"]
    log_dirs_arg = next(a for a in service["command"] if a.startswith("--log-dirs="))
    log_dirs = log_dirs_arg.split("=", 1)[1].split(",")
    read_only = {_volume_target(v) for v in service["volumes"] if _volume_mode(v) == "ro"}
    assert set(log_dirs) == read_only
    assert len(log_dirs) == 6


def test_host_network_override_puts_everything_on_the_host_loopback(
    host_config: dict[str, Any],
) -> None:
    services = host_config["services"]
    # `net` keeps its (bridge-only) port bindings but joins no network, so they bind nothing.
    assert services["net"]["network_mode"] == "none"
    assert {s["network_mode"] for n, s in services.items() if n != "net"} == {"host"}
    for name in BROKERS:
        config = broker_config_of(services[name])
        assert config.listen_address[0] == "127.0.0.1"
        assert config.advertised_address == config.listen_address
        assert config.kafka_listen_address is not None
        assert config.kafka_listen_address[0] == "127.0.0.1"
        assert config.kafka_advertised_address == config.kafka_listen_address
    command = " ".join(services["prometheus"]["command"])
    assert "--web.listen-address=127.0.0.1:9090" in command


def test_ports_and_images_follow_the_environment() -> None:
    env = {
        "MINIBROKER_PORT_2": "19093",
        "MINIBROKER_METRICS_PORT_2": "19309",
        "MINIBROKER_KAFKA_PORT_2": "29093",
        "MINIBROKER_ZOOKEEPER_PORT": "12181",
        "MINIBROKER_IMAGE": "minibroker:test",
    }
    config = compose_config("docker-compose.yml", "docker/compose.host-network.yml", env=env)
    broker = broker_config_of(config["services"]["broker-2"])
    assert broker.listen_address == ("127.0.0.1", 19093)
    assert broker.metrics_port == 19309
    assert broker.kafka_listen_address == broker.kafka_advertised_address == ("127.0.0.1", 29093)
    assert broker.zookeeper_connect == "127.0.0.1:12181"
    assert "--port=12181" in config["services"]["zookeeper"]["command"]
    assert config["services"]["broker-1"]["image"] == "minibroker:test"


def test_dockerfile_defaults_to_a_public_base_and_runs_as_a_non_root_user() -> None:
    text = (REPO / "Dockerfile").read_text(encoding="utf-8")
    assert re.search(r"^ARG BASE_IMAGE=python:3\.11-slim-bookworm$", text, re.M)
    assert re.search(r"^FROM \$\{BASE_IMAGE\}$", text, re.M)
    assert re.search(r"^USER minibroker$", text, re.M)
    assert re.search(r'^VOLUME \["/var/lib/minibroker"\]$', text, re.M)
    assert "HEALTHCHECK" in text
    assert re.search(r'^ENTRYPOINT \["minibroker-entrypoint"\]$', text, re.M)


def _ports(service: dict[str, Any]) -> list[dict[str, Any]]:
    """Published ports in either syntax docker-compose prints (long form, or "ip:h:c")."""
    ports = []
    for port in service.get("ports", []):
        if isinstance(port, dict):
            ports.append({**port, "published": int(port["published"])})
        else:
            host_ip, published, target = str(port).split("/")[0].rsplit(":", 2)
            ports.append({"host_ip": host_ip, "published": int(published), "target": int(target)})
    return ports


def _volume_parts(volume: Any) -> tuple[str, str, str]:
    if isinstance(volume, dict):
        mode = "ro" if volume.get("read_only") else "rw"
        return str(volume["source"]), str(volume["target"]), mode
    parts = str(volume).split(":")
    return parts[0], parts[1], parts[2] if len(parts) > 2 else "rw"


def _volume_source(volume: Any) -> str:
    return _volume_parts(volume)[0]


def _volume_target(volume: Any) -> str:
    return _volume_parts(volume)[1]


def _volume_mode(volume: Any) -> str:
    return _volume_parts(volume)[2]


if __name__ == "__main__":  # print the resolved config, for a look by hand
    json.dump(compose_config(*sys.argv[1:] or ["docker-compose.yml"]), sys.stdout, indent=2)

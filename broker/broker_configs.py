"""Dynamic broker configs: DescribeConfigs / AlterConfigs for resource type BROKER (4).

ZooKeeper-era Kafka keeps a broker's dynamic overrides in ``/config/brokers/<id>`` as
``{"version":1,"config":{...}}`` and announces a change with the same /config/changes
notification topics use, ``{"version":2,"entity_path":"brokers/<id>"}``. Every broker's
change listener (broker/topic_configs.py) hands broker entities to ``apply_changes``;
the listener's start-up re-read calls ``apply`` so a restarted broker picks up what was
set while it was down.

Only the three throttle keys kafka-reassign-partitions sets are dynamic here
(``DYNAMIC_KEYS``); each value is a whole number of bytes per second, at least 1 (the
token bucket cannot run at 0), or -1 for "unlimited". All three apply at once:
``replica.alter.log.dirs.io.max.bytes.per.second`` sets the log-dir mover's
token-bucket rate; ``leader.replication.throttled.rate`` and
``follower.replication.throttled.rate`` set this broker's two replication quotas
(broker/replication_quota.py), which bound the replicas listed in the topics'
``*.replication.throttled.replicas``. Removing an override falls back to the static
value (unlimited for the two replication rates).

AlterConfigs is non-incremental, as for topics: the request's set replaces the
broker's whole override set. ``resource_name`` is the broker id in decimal; Kafka's
cluster-wide default entity (empty name) is not supported.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from minibroker.broker.config import BrokerConfig
from minibroker.broker.config_keys import config_text
from minibroker.broker.replication_quota import UNLIMITED as NO_QUOTA
from minibroker.broker.replication_quota import ReplicationQuotas
from minibroker.protocol.errors import (
    NONE,
    InvalidConfigError,
    InvalidRequestError,
    KafkaError,
    MinibrokerError,
)
from minibroker.protocol.messages import bodies

if TYPE_CHECKING:
    from minibroker.broker.log_dir_mover import LogDirMover
    from minibroker.zk.data import KafkaZkClient

log = logging.getLogger(__name__)

LOG_DIRS_THROTTLE = "replica.alter.log.dirs.io.max.bytes.per.second"
LEADER_THROTTLE = "leader.replication.throttled.rate"
FOLLOWER_THROTTLE = "follower.replication.throttled.rate"
DYNAMIC_KEYS = (FOLLOWER_THROTTLE, LEADER_THROTTLE, LOG_DIRS_THROTTLE)
"""The dynamic broker keys accepted (sorted): the reassignment tool's throttles."""

SOURCE_DYNAMIC_BROKER_CONFIG = 2
SOURCE_STATIC_BROKER_CONFIG = 4
SOURCE_DEFAULT_CONFIG = 5
"""Kafka's ConfigSource codes of a broker resource (1 is a topic's override, 3 the cluster-wide
dynamic default, 6 a logger level)."""

UNLIMITED = 9223372036854775807
"""Kafka's default for the throttle keys (Long.MAX_VALUE: no throttle)."""

BROKER_CONFIGS_PATH = "/config/brokers"
BROKER_ENTITY_PREFIX = "brokers/"


def broker_config_path(broker_id: int) -> str:
    return f"{BROKER_CONFIGS_PATH}/{broker_id}"


def parse_broker_id(name: str) -> int:
    """The broker id a BROKER resource names; InvalidRequestError otherwise."""
    if not name.isdigit():
        raise InvalidRequestError(f"broker resource name must be a broker id, not {name!r}")
    return int(name)


def validate_broker_configs(configs: Mapping[str, str]) -> dict[str, int]:
    """The typed overrides; InvalidConfigError naming the first unknown key or a value
    that is not a whole number >= 1."""
    typed: dict[str, int] = {}
    for name in sorted(configs):
        if name not in DYNAMIC_KEYS:
            raise InvalidConfigError(
                f"{name} is not a dynamic broker config (supported: {', '.join(DYNAMIC_KEYS)})"
            )
        value = configs[name].strip()
        if value == "-1":
            typed[name] = UNLIMITED
            continue
        if not value.isdigit() or not 1 <= int(value) <= UNLIMITED:
            raise InvalidConfigError(
                f"{name} must be a whole number of bytes/s >= 1 (or -1: unlimited), not {value!r}"
            )
        typed[name] = int(value)
    return typed


def static_value(config: BrokerConfig, name: str) -> tuple[int, int]:
    """(value, config_source) of a dynamic key when it has no override."""
    if name == LOG_DIRS_THROTTLE:
        value = config.replica_alter_log_dirs_io_max_bytes_per_second
        default = BrokerConfig().replica_alter_log_dirs_io_max_bytes_per_second
        return value, SOURCE_DEFAULT_CONFIG if value == default else SOURCE_STATIC_BROKER_CONFIG
    return UNLIMITED, SOURCE_DEFAULT_CONFIG


SENSITIVE_WORDS = ("password", "jaas")
"""A key naming one of these holds a secret: described with no value, as Kafka does."""


def static_entries(
    config: BrokerConfig, keys: list[str] | None
) -> list[bodies.DescribeConfigsResponseResultConfig]:
    """This broker's other keys, read-only, as configured at start (Kafka describes every
    broker key; clients read broker.rack, advertised.listeners and the like there)."""
    defaults = BrokerConfig()
    entries: list[bodies.DescribeConfigsResponseResultConfig] = []
    for field in dataclasses.fields(config):
        name = field.metadata["name"]
        if name in DYNAMIC_KEYS or (keys is not None and name not in keys):
            continue
        value = getattr(config, field.name)
        sensitive = any(word in name for word in SENSITIVE_WORDS)
        entries.append(
            {
                "name": name,
                "value": None if sensitive or value is None else config_text(value),
                "read_only": True,
                "config_source": SOURCE_DEFAULT_CONFIG
                if value == getattr(defaults, field.name)
                else SOURCE_STATIC_BROKER_CONFIG,
                "is_sensitive": sensitive,
                "documentation": None,
            }
        )
    return entries


def replication_rate(value: int | None) -> int:
    """A quota rate from a typed override: absent or Long.MAX_VALUE is unlimited."""
    return NO_QUOTA if value is None or value >= UNLIMITED else value


def decode_broker_config(data: bytes) -> dict[str, str]:
    try:
        value = json.loads(data)
        config = value["config"]
        if not isinstance(config, dict):
            raise TypeError("config is not an object")
    except (ValueError, KeyError, TypeError) as exc:
        raise MinibrokerError(f"malformed broker config znode: {exc}") from exc
    return {str(k): str(v) for k, v in config.items()}


def encode_broker_config(config: Mapping[str, str]) -> bytes:
    body = {"version": 1, "config": {k: str(config[k]) for k in sorted(config)}}
    return json.dumps(body, separators=(",", ":")).encode()


async def read_broker_config(data: KafkaZkClient, broker_id: int) -> dict[str, str]:
    from minibroker.zk.types import NoNode

    try:
        raw, _ = await data.zk.get(broker_config_path(broker_id))
    except NoNode:
        return {}
    return decode_broker_config(raw)


async def write_broker_config(
    data: KafkaZkClient, broker_id: int, config: Mapping[str, str]
) -> None:
    """Replace /config/brokers/<id>, then notify every broker under /config/changes."""
    from minibroker.zk.model import CONFIG_CHANGE_PREFIX, CONFIG_CHANGES_PATH, encode_config_change
    from minibroker.zk.types import NoNode

    path, raw = broker_config_path(broker_id), encode_broker_config(config)
    try:
        await data.zk.set(path, raw)
    except NoNode:
        await data.zk.create(path, raw, makepath=True)
    await data.zk.create(
        f"{CONFIG_CHANGES_PATH}/{CONFIG_CHANGE_PREFIX}",
        encode_config_change(f"{BROKER_ENTITY_PREFIX}{broker_id}"),
        sequence=True,
        makepath=True,
    )


class BrokerConfigs:
    """This broker's BROKER-resource config APIs and its dynamic throttle."""

    def __init__(
        self,
        config: BrokerConfig,
        mover: LogDirMover | None,
        *,
        zk: KafkaZkClient | None,
        quotas: ReplicationQuotas | None = None,
    ) -> None:
        self.config = config
        self.mover = mover
        self.quotas = quotas  # the replication throttle's leader and follower sides
        self._zk = zk
        self.overrides: dict[str, int] = {}  # what was last applied

    def _data(self) -> KafkaZkClient:
        data = self._zk
        if data is None:
            raise InvalidRequestError("a standalone broker has no ZooKeeper to keep configs")
        return data

    async def describe(
        self, resource: bodies.DescribeConfigsRequestResource
    ) -> bodies.DescribeConfigsResponseResult:
        result: bodies.DescribeConfigsResponseResult = {
            "resource_type": resource["resource_type"],
            "resource_name": resource["resource_name"],
            "configs": [],
        }
        try:
            broker_id = parse_broker_id(resource["resource_name"])
            data = self._zk
            overrides = {} if data is None else await read_broker_config(data, broker_id)
        except KafkaError as exc:
            return result | {"error_code": exc.code, "error_message": exc.message}
        except MinibrokerError as exc:
            return result | {"error_code": KafkaError.code, "error_message": str(exc)}
        keys = resource["configuration_keys"]
        for name in DYNAMIC_KEYS:
            if keys is not None and name not in keys:
                continue
            if name in overrides:
                value, source = overrides[name], SOURCE_DYNAMIC_BROKER_CONFIG
            else:
                number, source = static_value(self.config, name)
                value = str(number)
            result["configs"].append(
                {
                    "name": name,
                    "value": value,
                    "read_only": False,
                    "config_source": source,
                    "is_sensitive": False,
                    "documentation": None,
                }
            )
        if broker_id == self.config.broker_id:
            result["configs"] += static_entries(self.config, keys)
        return result | {"error_code": NONE, "error_message": None}

    async def alter(
        self, resource: bodies.AlterConfigsRequestResource, validate_only: bool
    ) -> bodies.AlterConfigsResponseResponse:
        result: bodies.AlterConfigsResponseResponse = {
            "resource_type": resource["resource_type"],
            "resource_name": resource["resource_name"],
        }
        try:
            broker_id = parse_broker_id(resource["resource_name"])
            names = [c["name"] for c in resource["configs"]]
            duplicates = sorted({n for n in names if names.count(n) > 1})
            if duplicates:
                raise InvalidRequestError(f"config {duplicates[0]} appears twice")
            configs = {c["name"]: c["value"] for c in resource["configs"] if c["value"] is not None}
            validate_broker_configs(configs)
            data = self._data()
            if not validate_only:
                await write_broker_config(data, broker_id, configs)
                log.info("broker %d dynamic config set to %s", broker_id, configs)
        except KafkaError as exc:
            return result | {"error_code": exc.code, "error_message": exc.message}
        except MinibrokerError as exc:  # ZooKeeper trouble
            return result | {"error_code": KafkaError.code, "error_message": str(exc)}
        return result | {"error_code": NONE, "error_message": None}

    # -- dynamic application -------------------------------------------------------------

    def apply_overrides(self, configs: Mapping[str, str]) -> None:
        """Make ``configs`` this broker's dynamic overrides; a bad stored value is
        logged and ignored (the static value stays), never fatal."""
        try:
            typed = validate_broker_configs(configs)
        except InvalidConfigError as exc:
            log.warning("ignoring dynamic broker config %s: %s", configs, exc)
            typed = {}
        self.overrides = typed
        rate = typed.get(LOG_DIRS_THROTTLE)
        if rate is None:
            rate = self.config.replica_alter_log_dirs_io_max_bytes_per_second
        if self.mover is not None:
            self.mover.bucket.set_rate(rate)  # the next chunk is sized and paid at it
        log.info("log-dir move throttle is %d bytes/s", rate)
        if self.quotas is not None:
            for quota, name in (
                (self.quotas.leader, LEADER_THROTTLE),
                (self.quotas.follower, FOLLOWER_THROTTLE),
            ):
                quota.set_rate(replication_rate(typed.get(name)))
            log.info(
                "replication throttle: leader %s, follower %s bytes/s",
                typed.get(LEADER_THROTTLE, "unlimited"),
                typed.get(FOLLOWER_THROTTLE, "unlimited"),
            )

    async def apply(self, data: KafkaZkClient) -> None:
        """Re-read /config/brokers/<own id> and apply it."""
        self.apply_overrides(await read_broker_config(data, self.config.broker_id))

    async def apply_changes(self, data: KafkaZkClient, names: Iterable[str]) -> None:
        """Apply the notifications among /config/changes ``names`` that name this broker."""
        from minibroker.zk.model import CONFIG_CHANGES_PATH

        paths = [f"{CONFIG_CHANGES_PATH}/{name}" for name in names]
        mine = f"{BROKER_ENTITY_PREFIX}{self.config.broker_id}"
        for result in await data.zk.get_many(paths):
            if isinstance(result, Exception):
                continue  # purged meanwhile
            with contextlib.suppress(ValueError, AttributeError):
                if json.loads(result[0]).get("entity_path") == mine:
                    await self.apply(data)
                    return

"""Dynamic broker configs: DescribeConfigs / AlterConfigs for resource type BROKER (4).

ZooKeeper-era Kafka keeps a broker's dynamic overrides in ``/config/brokers/<id>`` and
the cluster-wide ones in ``/config/brokers/<default>`` (a BROKER resource with an empty
name), each as ``{"version":1,"config":{...}}``, and announces a change with the same
/config/changes notification topics use, ``{"version":2,"entity_path":"brokers/<id>"}``
(``brokers/<default>``). Every broker's change listener (broker/admin/topic_configs.py) hands
broker entities to ``apply_changes``; the listener's start-up re-read calls ``apply`` so
a restarted broker picks up what was set while it was down. A broker's own overrides win
over the defaults, which win over its properties.

The dynamic keys (``DYNAMIC_KEYS``), all applied at once without a restart:

- the broker keys topics inherit (``log.retention.ms``, ``log.segment.bytes``,
  ``min.insync.replicas``, ``compression.type`` ...: Kafka's DynamicLogConfig): every
  hosted topic without its own override takes the new value
  (``HostedReplicas.update_topic_defaults``);
- the three throttles kafka-reassign-partitions sets, each a whole number of bytes per
  second, at least 1, or -1 for "unlimited":
  ``replica.alter.log.dirs.io.max.bytes.per.second`` sets the log-dir mover's
  token-bucket rate; ``leader.replication.throttled.rate`` and
  ``follower.replication.throttled.rate`` this broker's two replication quotas
  (broker/quotas/replication_quota.py), which bound the replicas listed in the topics'
  ``*.replication.throttled.replicas``;
- the log cleaner's ``log.cleaner.backoff.ms``, ``log.cleaner.dedupe.buffer.size`` and
  ``log.cleaner.io.max.bytes.per.second`` (``CLEANER_KEYS``, as Kafka's LogCleaner
  reconfigures them): a cleaner waiting out its backoff wakes and waits the new one, the
  next job takes the new buffer and rate (broker/logdirs/log_cleaner.py);
- Kafka's SASL login keys for Kerberos and OAUTHBEARER refresh (``SASL_LOGIN_KEYS``),
  which a Kafka broker takes per broker even when no listener uses those mechanisms:
  kept and described, read by nothing (minibroker serves neither mechanism). As Kafka
  does, they are refused at the cluster-wide default: a broker id must be named.

Removing an override falls back to the next layer. Every other broker key is described
read-only (broker/config/config_describe.py describes them all). AlterConfigs is
non-incremental: the request's set replaces the entity's whole override set;
IncrementalAlterConfigs (broker/admin/incremental_configs.py) edits it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from minibroker.broker.config.broker_config import BrokerConfig
from minibroker.broker.config.config_describe import (
    SOURCE_DYNAMIC_BROKER_CONFIG,
    SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG,
    BrokerLayers,
    describe_broker,
    topic_default_keys,
)
from minibroker.broker.config.config_keys import LONG_MAX, apply_values
from minibroker.broker.quotas.replication_quota import UNLIMITED as NO_QUOTA
from minibroker.broker.quotas.replication_quota import ReplicationQuotas
from minibroker.protocol.errors import (
    NONE,
    ConfigError,
    InvalidConfigError,
    InvalidRequestError,
    KafkaError,
    MinibrokerError,
)
from minibroker.protocol.messages import bodies

if TYPE_CHECKING:
    from minibroker.broker.logdirs.log_cleaner import LogCleaner
    from minibroker.broker.logdirs.log_dir_mover import LogDirMover
    from minibroker.zk.data import KafkaZkClient

log = logging.getLogger(__name__)

LOG_DIRS_THROTTLE = "replica.alter.log.dirs.io.max.bytes.per.second"
LEADER_THROTTLE = "leader.replication.throttled.rate"
FOLLOWER_THROTTLE = "follower.replication.throttled.rate"
THROTTLE_KEYS = (FOLLOWER_THROTTLE, LEADER_THROTTLE, LOG_DIRS_THROTTLE)
"""The reassignment tool's throttles: bytes/s, -1 for unlimited."""

SASL_LOGIN_KEYS = (
    "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.min.time.before.relogin",
    "sasl.kerberos.principal.to.local.rules",
    "sasl.kerberos.service.name",
    "sasl.kerberos.ticket.renew.jitter",
    "sasl.kerberos.ticket.renew.window.factor",
    "sasl.login.refresh.buffer.seconds",
    "sasl.login.refresh.min.period.seconds",
    "sasl.login.refresh.window.factor",
    "sasl.login.refresh.window.jitter",
)
"""Per-broker dynamic keys with no effect here (Kafka's DynamicListenerConfig SASL keys)."""

CLEANER_KEYS = (
    "log.cleaner.backoff.ms",
    "log.cleaner.dedupe.buffer.size",
    "log.cleaner.io.max.bytes.per.second",
)
"""The log cleaner's run-time keys (Kafka's also has log.cleaner.threads: a restart here)."""

DYNAMIC_KEYS = tuple(
    sorted(set(THROTTLE_KEYS) | topic_default_keys() | set(SASL_LOGIN_KEYS) | set(CLEANER_KEYS))
)
"""Every broker key that can be changed at run time (sorted)."""

UNLIMITED = LONG_MAX
"""Kafka's default for the throttle keys (Long.MAX_VALUE: no throttle)."""

BROKER_CONFIGS_PATH = "/config/brokers"
BROKER_ENTITY_PREFIX = "brokers/"
DEFAULT_ENTITY = "<default>"
"""The cluster-wide entity's znode name (a BROKER resource named "")."""

_FIELD_OF = {f.metadata["name"]: f.name for f in dataclasses.fields(BrokerConfig)}


def broker_config_path(entity: int | str) -> str:
    return f"{BROKER_CONFIGS_PATH}/{entity}"


def parse_broker_id(name: str) -> int:
    """The broker id a BROKER resource names; InvalidRequestError otherwise."""
    if not name.isdigit():
        raise InvalidRequestError(f"broker resource name must be a broker id, not {name!r}")
    return int(name)


def broker_entity(name: str) -> str:
    """The znode name a BROKER resource names: its id, or ``<default>`` for ""."""
    return DEFAULT_ENTITY if name == "" else str(parse_broker_id(name))


def validate_broker_configs(
    configs: Mapping[str, str], *, cluster_default: bool = False
) -> dict[str, Any]:
    """The typed overrides; InvalidConfigError naming the first key that is not
    dynamic (or, for the ``cluster_default``, is per-broker only) or whose value does
    not parse or validate."""
    typed: dict[str, Any] = {}
    for name in sorted(configs):
        if name not in DYNAMIC_KEYS:
            raise InvalidConfigError(f"{name} is not a dynamic broker config")
        if cluster_default and name in SASL_LOGIN_KEYS:
            raise InvalidConfigError(
                f"{name} cannot be set as a cluster-wide default: name a broker id"
            )
        value = configs[name].strip()
        if name in THROTTLE_KEYS:
            typed[name] = _throttle(name, value)
            continue
        try:
            parsed = apply_values(BrokerConfig(), {name: value})
        except ConfigError as exc:
            raise InvalidConfigError(str(exc)) from exc
        typed[name] = getattr(parsed, _FIELD_OF[name])
    return typed


def _throttle(name: str, value: str) -> int:
    if value == "-1":
        return UNLIMITED
    if not value.isdigit() or not 1 <= int(value) <= UNLIMITED:
        raise InvalidConfigError(
            f"{name} must be a whole number of bytes/s >= 1 (or -1: unlimited), not {value!r}"
        )
    return int(value)


def replication_rate(value: int | None) -> int:
    """A quota rate from a typed value: absent or Long.MAX_VALUE is unlimited."""
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


async def read_broker_config(data: KafkaZkClient, entity: int | str) -> dict[str, str]:
    from minibroker.zk.types import NoNode

    try:
        raw, _ = await data.zk.get(broker_config_path(entity))
    except NoNode:
        return {}
    return decode_broker_config(raw)


async def write_broker_config(
    data: KafkaZkClient, entity: int | str, config: Mapping[str, str]
) -> None:
    """Replace /config/brokers/<entity>, then notify every broker under /config/changes."""
    from minibroker.zk.model import CONFIG_CHANGE_PREFIX, CONFIG_CHANGES_PATH, encode_config_change
    from minibroker.zk.types import NoNode

    path, raw = broker_config_path(entity), encode_broker_config(config)
    try:
        await data.zk.set(path, raw)
    except NoNode:
        await data.zk.create(path, raw, makepath=True)
    await data.zk.create(
        f"{CONFIG_CHANGES_PATH}/{CONFIG_CHANGE_PREFIX}",
        encode_config_change(f"{BROKER_ENTITY_PREFIX}{entity}"),
        sequence=True,
        makepath=True,
    )


def effective_config(config: BrokerConfig, typed: Mapping[str, Any]) -> BrokerConfig:
    """``config`` with typed dynamic overrides applied (the throttles' "unlimited" is
    their Long.MAX_VALUE default)."""
    changes = {_FIELD_OF[name]: value for name, value in typed.items() if name in _FIELD_OF}
    return dataclasses.replace(config, **changes)


TopicDefaultsHook = Callable[[BrokerConfig], Awaitable[None]]
"""Hands the broker's config with dynamic overrides to the hosted topics."""


class BrokerConfigs:
    """This broker's BROKER-resource config APIs and its dynamic keys."""

    def __init__(
        self,
        config: BrokerConfig,
        mover: LogDirMover | None,
        *,
        zk: KafkaZkClient | None,
        quotas: ReplicationQuotas | None = None,
        cleaner: LogCleaner | None = None,
        on_topic_defaults: TopicDefaultsHook | None = None,
    ) -> None:
        self.config = config
        self.mover = mover
        self.quotas = quotas  # the replication throttle's leader and follower sides
        self.cleaner = cleaner
        self.on_topic_defaults = on_topic_defaults
        self._zk = zk
        self.overrides: dict[str, Any] = {}  # what was last applied (own over default)
        self.effective = config

    def _data(self) -> KafkaZkClient:
        data = self._zk
        if data is None:
            raise InvalidRequestError("a standalone broker has no ZooKeeper to keep configs")
        return data

    async def layers(self, entity: str | None = None) -> BrokerLayers:
        """This broker's layers as ZooKeeper holds them now (``entity``: another
        broker's id, or ``<default>``)."""
        data = self._zk
        if data is None:
            return BrokerLayers(self.config)
        own = str(self.config.broker_id) if entity is None else entity
        default = await read_broker_config(data, DEFAULT_ENTITY)
        broker = {} if own == DEFAULT_ENTITY else await read_broker_config(data, own)
        return BrokerLayers(self.config, broker, default)

    async def describe(
        self,
        resource: bodies.DescribeConfigsRequestResource,
        *,
        include_synonyms: bool = False,
        include_documentation: bool = False,
    ) -> bodies.DescribeConfigsResponseResult:
        """Kafka answers for its own id, or "" (the cluster-wide defaults alone); this
        broker also describes another id's dynamic overrides."""
        result: bodies.DescribeConfigsResponseResult = {
            "resource_type": resource["resource_type"],
            "resource_name": resource["resource_name"],
            "configs": [],
        }
        keys = resource["configuration_keys"]
        try:
            entity = broker_entity(resource["resource_name"])
            layers = await self.layers(entity)
        except KafkaError as exc:
            return result | {"error_code": exc.code, "error_message": exc.message}
        except MinibrokerError as exc:
            return result | {"error_code": KafkaError.code, "error_message": str(exc)}
        if entity == str(self.config.broker_id):
            typed = lenient_typed({**layers.default, **layers.broker})
            result["configs"] = describe_broker(
                layers,
                dynamic=DYNAMIC_KEYS,
                effective=effective_config(self.config, typed),
                keys=keys,
                include_synonyms=include_synonyms,
                include_documentation=include_documentation,
            )
        else:  # only what ZooKeeper says of it: its dynamic layer
            own = layers.default if entity == DEFAULT_ENTITY else layers.broker
            source = (
                SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG
                if entity == DEFAULT_ENTITY
                else SOURCE_DYNAMIC_BROKER_CONFIG
            )
            result["configs"] = [
                {
                    "name": name,
                    "value": value,
                    "read_only": False,
                    "config_source": source,
                    "is_sensitive": False,
                    "synonyms": [{"name": name, "value": value, "source": source}]
                    if include_synonyms
                    else [],
                    "documentation": None,
                }
                for name, value in sorted(own.items())
                if keys is None or name in keys
            ]
        return result | {"error_code": NONE, "error_message": None}

    async def alter(
        self, resource: bodies.AlterConfigsRequestResource, validate_only: bool
    ) -> bodies.AlterConfigsResponseResponse:
        result: bodies.AlterConfigsResponseResponse = {
            "resource_type": resource["resource_type"],
            "resource_name": resource["resource_name"],
        }
        try:
            entity = broker_entity(resource["resource_name"])
            names = [c["name"] for c in resource["configs"]]
            duplicates = sorted({n for n in names if names.count(n) > 1})
            if duplicates:
                raise InvalidRequestError(f"config {duplicates[0]} appears twice")
            configs = {c["name"]: c["value"] for c in resource["configs"] if c["value"] is not None}
            await self.replace(entity, configs, validate_only)
        except KafkaError as exc:
            return result | {"error_code": exc.code, "error_message": exc.message}
        except MinibrokerError as exc:  # ZooKeeper trouble
            return result | {"error_code": KafkaError.code, "error_message": str(exc)}
        return result | {"error_code": NONE, "error_message": None}

    async def replace(self, entity: str, configs: Mapping[str, str], validate_only: bool) -> None:
        """Check ``configs`` and, unless ``validate_only``, make them the whole override
        set of /config/brokers/<entity>."""
        validate_broker_configs(configs, cluster_default=entity == DEFAULT_ENTITY)
        data = self._data()
        if not validate_only:
            await write_broker_config(data, entity, configs)
            log.info("broker %s dynamic config set to %s", entity, dict(configs))

    # -- dynamic application -------------------------------------------------------------

    def apply_overrides(
        self, configs: Mapping[str, str], defaults: Mapping[str, str] | None = None
    ) -> BrokerConfig:
        """Make ``configs`` (over the cluster-wide ``defaults``) this broker's dynamic
        overrides; a bad stored value is logged and ignored (the next layer's value
        stays), never fatal. Returns the broker's config with them applied."""
        typed = lenient_typed({**(defaults or {}), **configs})
        self.overrides = typed
        self.effective = effective = effective_config(self.config, typed)
        rate = effective.replica_alter_log_dirs_io_max_bytes_per_second
        if self.mover is not None:
            self.mover.bucket.set_rate(rate)  # the next chunk is sized and paid at it
        log.info("log-dir move throttle is %d bytes/s", rate)
        if self.quotas is not None:
            leader = replication_rate(effective.leader_replication_throttled_rate)
            follower = replication_rate(effective.follower_replication_throttled_rate)
            self.quotas.leader.set_rate(leader)
            self.quotas.follower.set_rate(follower)
            log.info("replication throttle: leader %s, follower %s bytes/s", leader, follower)
        if self.cleaner is not None:
            self.cleaner.reconfigure(effective)
        return effective

    async def apply(self, data: KafkaZkClient) -> None:
        """Re-read /config/brokers/<own id> and <default> and apply them."""
        own = await read_broker_config(data, self.config.broker_id)
        effective = self.apply_overrides(own, await read_broker_config(data, DEFAULT_ENTITY))
        if self.on_topic_defaults is not None:
            await self.on_topic_defaults(effective)

    async def apply_changes(self, data: KafkaZkClient, names: Iterable[str]) -> None:
        """Apply the notifications among /config/changes ``names`` that name this broker
        or the cluster-wide default."""
        from minibroker.zk.model import CONFIG_CHANGES_PATH

        paths = [f"{CONFIG_CHANGES_PATH}/{name}" for name in names]
        mine = {
            f"{BROKER_ENTITY_PREFIX}{self.config.broker_id}",
            f"{BROKER_ENTITY_PREFIX}{DEFAULT_ENTITY}",
        }
        for result in await data.zk.get_many(paths):
            if isinstance(result, Exception):
                continue  # purged meanwhile
            with contextlib.suppress(ValueError, AttributeError):
                if json.loads(result[0]).get("entity_path") in mine:
                    await self.apply(data)
                    return


def lenient_typed(configs: Mapping[str, str]) -> dict[str, Any]:
    """The typed overrides, each bad one logged and left out."""
    typed: dict[str, Any] = {}
    for name, value in configs.items():
        try:
            typed |= validate_broker_configs({name: value})
        except InvalidConfigError as exc:
            log.warning("ignoring dynamic broker config %s=%r: %s", name, value, exc)
    return typed

"""How DescribeConfigs describes a key: its value, where the value comes from, the
synonyms that could set it, its type and whether it is a secret.

How this works (Kafka's ConfigHelper / DynamicBrokerConfig, ZooKeeper era): a broker
key's value is looked up in four layers, first hit winning - this broker's dynamic
overrides (``/config/brokers/<id>``, source DYNAMIC_BROKER_CONFIG), the cluster-wide
dynamic defaults (``/config/brokers/<default>``, DYNAMIC_DEFAULT_BROKER_CONFIG), the
broker's properties (STATIC_BROKER_CONFIG: here, a value other than the built-in
default) and the built-in default (DEFAULT_CONFIG). A topic key first looks at the
topic's own override (TOPIC_CONFIG), then at the broker keys it inherits from. Every
layer that holds a key (or one of its synonyms: ``log.retention.ms`` is also
``log.retention.minutes`` and ``log.retention.hours``) is a synonym, listed layer by
layer as Kafka lists them; the entry's source is the first synonym's.

The keys themselves are declared once, as rows of the tables in broker/config/broker_config.py;
this module only reads those rows. A key naming a password (or ``sasl.jaas.config``)
is sensitive: its value is never returned, in the entry or in a synonym.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from minibroker.broker.config.broker_config import BrokerConfig, TopicConfig
from minibroker.broker.config.config_keys import config_text
from minibroker.protocol.messages import bodies

SOURCE_TOPIC_CONFIG = 1
SOURCE_DYNAMIC_BROKER_CONFIG = 2
SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG = 3
SOURCE_STATIC_BROKER_CONFIG = 4
SOURCE_DEFAULT_CONFIG = 5
"""Kafka's DescribeConfigsResponse ConfigSource codes (6, a logger level, is not served)."""


class ConfigType(IntEnum):
    """Kafka's DescribeConfigs config_type (v3+)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


SENSITIVE_WORDS = ("password", "jaas")
"""A key naming one of these holds a secret: described with no value, as Kafka does."""

BROKER_SYNONYMS: Mapping[str, tuple[str, ...]] = {
    "log.retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "log.roll.ms": ("log.roll.ms", "log.roll.hours"),
}
"""Broker keys set by more than one name, the winning one first (Kafka's brokerSynonyms)."""

INHERITED_SYNONYMS: Mapping[str, str] = {
    "retention_ms": "log.retention.ms",
    "roll_ms": "log.roll.ms",
}
"""Topic keys that inherit a computed broker value (a property over several keys): the
broker key group they come from."""

_BUILT_IN = BrokerConfig()
_BROKER_FIELDS = {f.metadata["name"]: f for f in dataclasses.fields(BrokerConfig)}
_BROKER_HINTS = typing.get_type_hints(BrokerConfig)
_TOPIC_HINTS = typing.get_type_hints(TopicConfig)


def is_sensitive(name: str) -> bool:
    return any(word in name for word in SENSITIVE_WORDS)


def config_type(field: dataclasses.Field[Any], hint: Any) -> ConfigType:
    """Kafka's type of one row: its ``kind`` when declared, else from its annotation
    (an int is LONG for ``.ms`` keys and defaults beyond 32 bits, INT otherwise)."""
    name = field.metadata["name"]
    if field.metadata.get("kind"):
        return ConfigType[field.metadata["kind"]]
    if is_sensitive(name):
        return ConfigType.PASSWORD
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    kind = args[0] if args else hint
    if kind is bool:
        return ConfigType.BOOLEAN
    if kind is float:
        return ConfigType.DOUBLE
    if typing.get_origin(kind) is list:
        return ConfigType.LIST
    if kind is int:
        default = field.default if isinstance(field.default, int) else 0
        wide = name.endswith(".ms") or not -(2**31) <= default < 2**31
        return ConfigType.LONG if wide else ConfigType.INT
    return ConfigType.STRING


@dataclass(frozen=True, slots=True)
class BrokerLayers:
    """What one broker's keys are made of: its properties (``config``) and the dynamic
    overrides ZooKeeper holds for it (``broker``) and for every broker (``default``)."""

    config: BrokerConfig
    broker: Mapping[str, str] = dataclasses.field(default_factory=dict)
    default: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def static_text(self, name: str) -> str | None:
        """The properties' value of ``name`` when it differs from the built-in one."""
        field = _BROKER_FIELDS.get(name)
        if field is None:
            return None
        value = getattr(self.config, field.name)
        if value == getattr(_BUILT_IN, field.name) or value is None:
            return None
        return config_text(value)

    def synonyms(self, names: tuple[str, ...]) -> list[tuple[str, str, int]]:
        """(name, value text, source) of every layer holding one of ``names``, layer by
        layer, as Kafka's configSynonyms orders them."""
        found: list[tuple[str, str, int]] = []
        for layer, source in (
            (self.broker, SOURCE_DYNAMIC_BROKER_CONFIG),
            (self.default, SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG),
        ):
            found += [(n, layer[n], source) for n in names if n in layer]
        for n in names:
            text = self.static_text(n)
            if text is not None:
                found.append((n, text, SOURCE_STATIC_BROKER_CONFIG))
        for n in names:
            field = _BROKER_FIELDS.get(n)
            if field is not None and getattr(_BUILT_IN, field.name) is not None:
                found.append(
                    (n, config_text(getattr(_BUILT_IN, field.name)), SOURCE_DEFAULT_CONFIG)
                )
        return found


def _synonym_names(name: str) -> tuple[str, ...]:
    for group in BROKER_SYNONYMS.values():
        if name in group:
            return group[group.index(name) :]  # Kafka drops the ones before the key
    return (name,)


def _entry(
    name: str,
    value: str | None,
    source: int,
    *,
    read_only: bool,
    kind: ConfigType,
    synonyms: list[tuple[str, str, int]] | None,
    doc: str | None,
) -> bodies.DescribeConfigsResponseResultConfig:
    sensitive = is_sensitive(name)
    return {
        "name": name,
        "value": None if sensitive else value,
        "read_only": read_only,
        "config_source": source,
        "is_sensitive": sensitive,
        "synonyms": [
            {"name": n, "value": None if sensitive else v, "source": s}
            for n, v, s in synonyms or ()
        ],
        "config_type": int(kind),
        "documentation": doc,
    }


def describe_broker(
    layers: BrokerLayers,
    *,
    dynamic: Collection[str],
    effective: BrokerConfig,
    keys: list[str] | None = None,
    include_synonyms: bool = False,
    include_documentation: bool = False,
) -> list[bodies.DescribeConfigsResponseResultConfig]:
    """Every broker key (or just ``keys``), in table order; ``dynamic`` are the keys
    that can be changed at run time (the others are read-only), ``effective`` the
    broker's config with its dynamic overrides applied."""
    entries = []
    for name, field in _BROKER_FIELDS.items():
        if keys is not None and name not in keys:
            continue
        synonyms = layers.synonyms(_synonym_names(name))
        value = getattr(effective, field.name)
        entries.append(
            _entry(
                name,
                None if value is None else config_text(value),
                synonyms[0][2] if synonyms else SOURCE_DEFAULT_CONFIG,
                read_only=name not in dynamic,
                kind=config_type(field, _BROKER_HINTS[field.name]),
                synonyms=synonyms if include_synonyms else None,
                doc=field.metadata["doc"] if include_documentation else None,
            )
        )
    return entries


def describe_topic(
    layers: BrokerLayers,
    overrides: Mapping[str, str],
    *,
    effective: BrokerConfig,
    keys: list[str] | None = None,
    include_synonyms: bool = False,
    include_documentation: bool = False,
) -> list[bodies.DescribeConfigsResponseResultConfig]:
    """Every topic key (or just ``keys``), in table order: the topic's override, else
    what ``effective`` (the broker with its dynamic overrides) gives it. An override
    is shown as stored, even one that no longer validates."""
    defaults = effective.topic_config()
    entries = []
    for field in dataclasses.fields(TopicConfig):
        name = field.metadata["name"]
        if keys is not None and name not in keys:
            continue
        inherits = field.metadata["inherits"]
        if inherits in INHERITED_SYNONYMS:
            broker_names = BROKER_SYNONYMS[INHERITED_SYNONYMS[inherits]]
        elif inherits is not None:
            broker_names = (_inherited_name(inherits),)
        else:
            broker_names = ()
        synonyms = layers.synonyms(broker_names)
        if name in overrides:
            synonyms.insert(0, (name, overrides[name], SOURCE_TOPIC_CONFIG))
            value = overrides[name]
        else:
            value = config_text(getattr(defaults, field.name))
        entries.append(
            _entry(
                name,
                value,
                synonyms[0][2] if synonyms else SOURCE_DEFAULT_CONFIG,
                read_only=False,
                kind=config_type(field, _TOPIC_HINTS[field.name]),
                synonyms=synonyms if include_synonyms else None,
                doc=field.metadata["doc"] if include_documentation else None,
            )
        )
    return entries


def _inherited_name(attribute: str) -> str:
    field = next(f for f in _BROKER_FIELDS.values() if f.name == attribute)
    return str(field.metadata["name"])


def topic_default_keys() -> frozenset[str]:
    """The broker keys topics inherit (Kafka's DynamicLogConfig keys: a dynamic change
    of one reaches every topic without an override)."""
    names: set[str] = set()
    for field in dataclasses.fields(TopicConfig):
        inherits = field.metadata["inherits"]
        if inherits in INHERITED_SYNONYMS:
            names.update(BROKER_SYNONYMS[INHERITED_SYNONYMS[inherits]])
        elif inherits is not None:
            names.add(_inherited_name(inherits))
    return frozenset(names)


def is_list_key(name: str) -> bool:
    """Is ``name`` (a broker or topic key) a LIST key, which APPEND and SUBTRACT edit?"""
    topic = {f.metadata["name"]: f for f in dataclasses.fields(TopicConfig)}
    if name in topic:
        return config_type(topic[name], _TOPIC_HINTS[topic[name].name]) is ConfigType.LIST
    field = _BROKER_FIELDS.get(name)
    return field is not None and (config_type(field, _BROKER_HINTS[field.name]) is ConfigType.LIST)

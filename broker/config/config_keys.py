"""The machinery of the configuration tables: one row per key, validators, parsing.

A table is a frozen dataclass whose fields are its keys (broker/config/broker_config.py explains the
scheme). ``config_key`` declares one row; ``apply_values`` parses the text of a
``.properties`` file (or takes typed values) into a table and validates every row;
``describe_keys`` lists the rows.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Mapping
from dataclasses import field
from typing import TYPE_CHECKING, Any, TypeVar

from minibroker.protocol.errors import ConfigError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

Validator = Callable[[Any], str | None]
"""Returns None when the value is acceptable, else what is wrong with it."""

LONG_MAX = 2**63 - 1
"""Kafka's Long.MAX_VALUE, its spelling of "no limit" for several byte and count keys."""


def at_least(low: int) -> Validator:
    return lambda v: None if v is None or v >= low else f"must be >= {low}"


def between(low: int, high: int) -> Validator:
    return lambda v: None if v is None or low <= v <= high else f"must be in [{low}, {high}]"


def fraction(v: Any) -> str | None:
    return None if 0.0 <= v <= 1.0 else "must be in [0, 1]"


def one_of(*choices: str) -> Validator:
    return lambda v: None if v in choices else f"must be one of {', '.join(choices)}"


def non_empty(v: Any) -> str | None:
    return None if v else "must not be empty"


def config_key(
    name: str,
    default: Any,
    doc: str,
    check: Validator | None = None,
    inherits: str | None = None,
    kind: str | None = None,
) -> Any:
    """One row of a configuration table (see broker/config/broker_config.py's
    docstring). ``kind`` is Kafka's type name when the annotation does not tell it (an
    int Kafka declares LONG that is not a ``.ms`` key); broker/config/config_describe.py
    derives the rest."""
    meta = {"name": name, "doc": doc, "check": check, "inherits": inherits, "kind": kind}
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=meta)
    return field(default=default, metadata=meta)


def _parse_value(text: str, kind: Any, key: str) -> Any:
    """Parse the text of one property as the field's annotated type."""
    text = text.strip()
    args = typing.get_args(kind)
    if type(None) in args:  # X | None: empty or "null" means None
        if text in ("", "null"):
            return None
        kind = next(a for a in args if a is not type(None))
    try:
        if kind is bool:
            lowered = text.lower()
            if lowered not in ("true", "false"):
                raise ValueError
            return lowered == "true"
        if kind is int:
            return int(text)
        if kind is float:
            return float(text)
        if kind is str:
            return text
        if typing.get_origin(kind) is list:
            return [part.strip() for part in text.split(",") if part.strip()]
    except ValueError:
        raise ConfigError(f"{key}: invalid value {text!r} (expected {_kind_name(kind)})") from None
    raise AssertionError(f"unsupported config type {kind!r} for {key}")


def _kind_name(kind: Any) -> str:
    names = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
    return names.get(kind, "a list")


_C = TypeVar("_C", bound="DataclassInstance")


def apply_values(base: _C, values: Mapping[str, Any]) -> _C:
    """``base`` with ``values`` (Kafka names -> text or typed value) applied and validated."""
    table = {f.metadata["name"]: f for f in dataclasses.fields(base)}
    hints = typing.get_type_hints(type(base))
    changes: dict[str, Any] = {}
    for key, raw in values.items():
        f = table.get(key)
        if f is None:
            raise ConfigError(f"{key}: unknown configuration key")
        value = _parse_value(raw, hints[f.name], key) if isinstance(raw, str) else raw
        changes[f.name] = value
    for f in dataclasses.fields(base):
        value = changes.get(f.name, getattr(base, f.name))
        check = f.metadata["check"]
        problem = check(value) if check is not None else None
        if problem:
            raise ConfigError(f"{f.metadata['name']}: {problem} (got {value!r})")
    return dataclasses.replace(base, **changes)


def describe_keys(config_type: type[DataclassInstance]) -> list[tuple[str, str]]:
    """(Kafka name, doc) of every key, in declaration order (for ``--help``-style output)."""
    return [(f.metadata["name"], f.metadata["doc"]) for f in dataclasses.fields(config_type)]


def config_text(value: Any) -> str:
    """A typed config value as Kafka's properties spell it (booleans lower-case, lists
    comma-separated)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)

"""Client quotas in ZooKeeper, where ZooKeeper-era Kafka keeps them.

    /config/users/<user>                      {"version":1,"config":{"producer_byte_rate":"1024"}}
    /config/users/<user>/clients/<client-id>
    /config/users/<default>                   every user without its own
    /config/users/<default>/clients/<default> ... and every combination
    /config/clients/<client-id>
    /config/clients/<default>

A name is URL-encoded (Kafka's Sanitizer) so it is one path segment; ``<default>`` is
the type's default entity. A user's znode may also hold its SCRAM credentials
(zk/scram_users.py): only the quota keys are read and written here, the others kept.
A change is announced as Kafka does, by a /config/changes notification naming the
entity path (``users/<user>/clients/<client-id>``, ``clients/<default>``, ...).

An entity is a tuple of (type, name) pairs, user first: ``(("user", "alice"),)``,
``(("user", None), ("client-id", "app"))``; a None name is the default entity.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from urllib.parse import quote, unquote

from minibroker.zk.client import ZkClient
from minibroker.zk.model import (
    CONFIG_CHANGE_PREFIX,
    CONFIG_CHANGES_PATH,
    CONFIG_PATH,
    encode_config_change,
)
from minibroker.zk.types import NoNode, ZkError
from minibroker.zk.values import ZkDataError

USER = "user"
CLIENT_ID = "client-id"
DEFAULT = "<default>"
QUOTA_KEYS = ("consumer_byte_rate", "producer_byte_rate", "request_percentage")
"""The client quota keys served (Kafka's; controller_mutation_rate is not)."""

QuotaEntity = tuple[tuple[str, str | None], ...]
"""(type, name) pairs, user first; a None name is the default entity of its type."""

_SEGMENT = {USER: "users", CLIENT_ID: "clients"}


def entity_path(entity: QuotaEntity) -> str:
    """``users/alice/clients/app``: the entity's path below /config (and its name in
    change notifications)."""
    return "/".join(f"{_SEGMENT[kind]}/{_sanitize(name)}" for kind, name in entity)


def _sanitize(name: str | None) -> str:
    return DEFAULT if name is None else quote(name, safe="")


def _desanitize(segment: str) -> str | None:
    return None if segment == DEFAULT else unquote(segment)


def quota_values(config: Mapping[str, str]) -> dict[str, float]:
    """The quota keys of an entity's config (a value that is no number is left out)."""
    values: dict[str, float] = {}
    for key in QUOTA_KEYS:
        with contextlib.suppress(KeyError, ValueError):
            values[key] = float(config[key])
    return values


def _decode(data: bytes, path: str) -> dict[str, str]:
    try:
        value = json.loads(data)
        config = value["config"]
        if not isinstance(config, dict):
            raise TypeError("config is not an object")
        return {str(k): str(v) for k, v in config.items()}
    except (ValueError, KeyError, TypeError) as exc:
        raise ZkDataError(f"{path}: not an entity config: {exc}") from exc


async def read_all_quotas(zk: ZkClient) -> dict[QuotaEntity, dict[str, float]]:
    """Every entity with a quota -> its quota values."""
    entities: list[QuotaEntity] = []
    for kind in (USER, CLIENT_ID):
        try:
            children = await zk.get_children(f"{CONFIG_PATH}/{_SEGMENT[kind]}")
        except NoNode:
            continue
        for child in children:
            entities.append(((kind, _desanitize(child)),))
            if kind == USER:
                with contextlib.suppress(NoNode):
                    path = f"{CONFIG_PATH}/users/{child}/clients"
                    for client in await zk.get_children(path):
                        entities.append(
                            ((USER, _desanitize(child)), (CLIENT_ID, _desanitize(client)))
                        )
    paths = [f"{CONFIG_PATH}/{entity_path(e)}" for e in entities]
    found: dict[QuotaEntity, dict[str, float]] = {}
    for entity, path, result in zip(entities, paths, await zk.get_many(paths), strict=True):
        if isinstance(result, ZkError):
            continue  # deleted meanwhile
        with contextlib.suppress(ZkDataError):
            values = quota_values(_decode(result[0], path))
            if values:
                found[entity] = values
    return found


async def alter_quotas(
    zk: ZkClient, entity: QuotaEntity, set_: Mapping[str, float], remove: set[str]
) -> None:
    """Set and remove quota keys of one entity (its other keys kept) and announce it."""
    path = f"{CONFIG_PATH}/{entity_path(entity)}"
    try:
        data, _ = await zk.get(path)
        config = _decode(data, path)
    except NoNode:
        config = {}
    for key in remove:
        config.pop(key, None)
    config.update({key: _text(value) for key, value in set_.items()})
    raw = json.dumps({"version": 1, "config": config}, separators=(",", ":")).encode()
    try:
        await zk.set(path, raw)
    except NoNode:
        await zk.create(path, raw, makepath=True)
    await zk.create(
        f"{CONFIG_CHANGES_PATH}/{CONFIG_CHANGE_PREFIX}",
        encode_config_change(entity_path(entity)),
        sequence=True,
        makepath=True,
    )


def _text(value: float) -> str:
    """As kafka-configs writes a quota: a whole number without ".0"."""
    return str(int(value)) if value == int(value) else repr(value)


def is_quota_change(entity_path_text: str) -> bool:
    """Whether a /config/changes entity path may name a client quota entity."""
    return entity_path_text.startswith(("users/", "clients/"))

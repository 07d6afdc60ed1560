"""SCRAM users: ``/config/users/<name>``, where Kafka keeps them.

    /config/users/<name>   {"version":1,"config":{"SCRAM-SHA-256":"salt=...,stored_key=...,
                                                   server_key=...,iterations=4096"}}

``<name>`` is the user name URL-encoded (Kafka's Sanitizer), so any name makes one path
segment. The config may hold other user-level keys (Kafka keeps quotas there); only the
``SCRAM-*`` keys are ours, and the others are kept when a credential changes. Every
change is announced as Kafka announces it: a sequential ``/config/changes/config_change_``
znode naming ``users/<name>``, which every broker watches (broker/security/credentials.py) to
re-read that user at once, without a restart.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Mapping
from urllib.parse import quote, unquote

from minibroker.protocol.sasl import SCRAM_MECHANISMS, ScramCredential, parse_scram_credential
from minibroker.zk.client import ZkClient
from minibroker.zk.config_changes import config_change_entity
from minibroker.zk.model import (
    CONFIG_CHANGE_PREFIX,
    CONFIG_CHANGES_PATH,
    CONFIG_PATH,
    encode_config_change,
)
from minibroker.zk.types import NoNode, ZkError
from minibroker.zk.values import ZkDataError

CONFIG_USERS_PATH = f"{CONFIG_PATH}/users"
USER_ENTITY_PREFIX = "users/"

UserCredentials = dict[str, ScramCredential]
"""One user's credentials by mechanism."""


def user_config_path(name: str) -> str:
    return f"{CONFIG_USERS_PATH}/{quote(name, safe='')}"


def encode_user_config(config: Mapping[str, str]) -> bytes:
    return json.dumps({"version": 1, "config": dict(config)}, separators=(",", ":")).encode()


def decode_user_config(data: bytes, path: str) -> dict[str, str]:
    try:
        value = json.loads(data)
        config = value["config"]
        if not isinstance(config, dict):
            raise TypeError("config is not an object")
        return {str(k): str(v) for k, v in config.items()}
    except (ValueError, KeyError, TypeError) as exc:
        raise ZkDataError(f"{path}: not a user config: {exc}") from exc


def credentials_of(config: Mapping[str, str]) -> UserCredentials:
    """The SCRAM credentials in a user's config (a malformed one is left out)."""
    found: UserCredentials = {}
    for mechanism in SCRAM_MECHANISMS:
        text = config.get(mechanism)
        if text is None:
            continue
        try:
            found[mechanism] = parse_scram_credential(text)
        except ValueError:
            continue
    return found


async def read_user_config(zk: ZkClient, name: str) -> dict[str, str]:
    """A user's whole config ({} when there is none)."""
    path = user_config_path(name)
    try:
        data, _ = await zk.get(path)
    except NoNode:
        return {}
    return decode_user_config(data, path)


async def read_user_credentials(zk: ZkClient, name: str) -> UserCredentials:
    return credentials_of(await read_user_config(zk, name))


async def list_scram_users(zk: ZkClient) -> dict[str, list[str]]:
    """Every user with a SCRAM credential -> its mechanisms."""
    return {name: sorted(creds) for name, creds in (await read_all_credentials(zk)).items()}


async def read_all_credentials(zk: ZkClient) -> dict[str, UserCredentials]:
    """Every user's SCRAM credentials (users without any are left out)."""
    try:
        children = await zk.get_children(CONFIG_USERS_PATH)
    except NoNode:
        return {}
    paths = [f"{CONFIG_USERS_PATH}/{child}" for child in children]
    users: dict[str, UserCredentials] = {}
    for child, path, result in zip(children, paths, await zk.get_many(paths), strict=True):
        if isinstance(result, ZkError):
            continue  # deleted meanwhile
        try:
            credentials = credentials_of(decode_user_config(result[0], path))
        except ZkDataError:
            continue
        if credentials:
            users[unquote(child)] = credentials
    return users


async def set_scram_credential(zk: ZkClient, name: str, mechanism: str, credential: str) -> None:
    """Add or replace one mechanism's credential (Kafka's text form) and announce it."""
    config = await read_user_config(zk, name)
    config[mechanism] = credential
    await _write(zk, name, config)


async def alter_scram_credentials(
    zk: ZkClient, name: str, upserts: Mapping[str, str], deletions: Iterable[str]
) -> None:
    """Remove ``deletions`` (mechanisms) and set ``upserts`` (mechanism -> Kafka's text
    form) of one user in one write, and announce it."""
    config = await read_user_config(zk, name)
    for mechanism in deletions:
        config.pop(mechanism, None)
    config.update(upserts)
    await _write(zk, name, config)


async def delete_scram_user(zk: ZkClient, name: str) -> bool:
    """Remove every SCRAM credential of ``name``; False if it had none."""
    config = await read_user_config(zk, name)
    remaining = {k: v for k, v in config.items() if k not in SCRAM_MECHANISMS}
    if remaining == config:
        return False
    await _write(zk, name, remaining)
    return True


async def _write(zk: ZkClient, name: str, config: Mapping[str, str]) -> None:
    path = user_config_path(name)
    if config:
        data = encode_user_config(config)
        try:
            await zk.set(path, data)
        except NoNode:
            await zk.create(path, data, makepath=True)
    else:
        with contextlib.suppress(NoNode):
            await zk.delete(path)
    await zk.create(
        f"{CONFIG_CHANGES_PATH}/{CONFIG_CHANGE_PREFIX}",
        encode_config_change(f"{USER_ENTITY_PREFIX}{quote(name, safe='')}"),
        sequence=True,
        makepath=True,
    )


async def users_changed(zk: ZkClient, names: Iterable[str]) -> set[str]:
    """The users the named /config/changes notifications announce."""
    paths = [f"{CONFIG_CHANGES_PATH}/{name}" for name in names]
    users: set[str] = set()
    for path, result in zip(paths, await zk.get_many(paths), strict=True):
        if isinstance(result, ZkError):
            continue  # purged meanwhile
        entity = config_change_entity(result[0], path)
        if entity is not None and entity.startswith(USER_ENTITY_PREFIX):
            users.add(unquote(entity[len(USER_ENTITY_PREFIX) :]))
    return users

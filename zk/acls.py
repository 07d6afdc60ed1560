"""ACLs in ZooKeeper, in Kafka's layout (kafka.zk.ZkAclStore), readable by Kafka's tools.

One znode per resource pattern holds every entry of that pattern::

    /kafka-acl/<Topic|Group|Cluster>/<name>                    LITERAL patterns
    /kafka-acl-extended/prefixed/<Topic|Group|Cluster>/<name>  PREFIXED patterns

    {"version": 1, "acls": [{"principal": "User:alice", "permissionType": "Allow",
                             "operation": "Read", "host": "*"}]}

Whoever changes a pattern's znode (conditionally on its version, retried on a race)
then appends a sequential change notification naming the pattern, which every broker
watches to re-read that one znode:

    /kafka-acl-changes/acl_changes_<seq>           LITERAL: the text "Topic:<name>"
    /kafka-acl-extended-changes/acl_changes_<seq>  the rest: {"version": 1,
        "resourceType": "TOPIC", "name": ..., "patternType": "PREFIXED"}

A pattern left with no entries has its znode deleted, as Kafka does.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Final

from minibroker.protocol.acls import (
    AccessControlEntry,
    PatternType,
    ResourcePattern,
    ResourceType,
    parse_operation,
    parse_permission,
    parse_resource_type,
)
from minibroker.zk.client import BadVersion, NodeExists, NoNode, ZkClient
from minibroker.zk.types import ZkError
from minibroker.zk.values import ZkDataError

LITERAL_ACL_PATH: Final = "/kafka-acl"
PREFIXED_ACL_PATH: Final = "/kafka-acl-extended/prefixed"
LITERAL_CHANGES_PATH: Final = "/kafka-acl-changes"
EXTENDED_CHANGES_PATH: Final = "/kafka-acl-extended-changes"
CHANGE_PATHS: Final = (LITERAL_CHANGES_PATH, EXTENDED_CHANGES_PATH)
CHANGE_PREFIX: Final = "acl_changes_"

ACL_VERSION: Final = 1
CHANGE_EVENT_VERSION: Final = 1

MAX_UPDATE_ATTEMPTS: Final = 20
"""Conditional writes of one pattern's znode before giving up: each retry means another
writer changed the same pattern in between, which a handful of admins never sustain."""

_STORES: Final = {PatternType.LITERAL: LITERAL_ACL_PATH, PatternType.PREFIXED: PREFIXED_ACL_PATH}


def acl_path(pattern: ResourcePattern) -> str:
    return f"{_STORES[pattern.pattern_type]}/{pattern.resource_type.title}/{pattern.name}"


# -- JSON --------------------------------------------------------------------------------------


def encode_acls(entries: Iterable[AccessControlEntry]) -> bytes:
    acls = [
        {
            "principal": e.principal,
            "permissionType": e.permission.title,
            "operation": e.operation.title,
            "host": e.host,
        }
        for e in sorted(entries, key=_entry_order)
    ]
    return json.dumps({"version": ACL_VERSION, "acls": acls}).encode()


def decode_acls(data: bytes, path: str) -> frozenset[AccessControlEntry]:
    try:
        doc = json.loads(data) if data else {"acls": []}
        return frozenset(
            AccessControlEntry(
                principal=str(acl["principal"]),
                host=str(acl["host"]),
                operation=parse_operation(str(acl["operation"])),
                permission=parse_permission(str(acl["permissionType"])),
            )
            for acl in doc["acls"]
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise ZkDataError(f"{path}: not Kafka's ACL JSON: {exc}") from exc


def encode_change(pattern: ResourcePattern) -> tuple[str, bytes]:
    """(notification parent, data) announcing a change of ``pattern``."""
    if pattern.pattern_type is PatternType.LITERAL:
        return LITERAL_CHANGES_PATH, f"{pattern.resource_type.title}:{pattern.name}".encode()
    event = {
        "version": CHANGE_EVENT_VERSION,
        "resourceType": pattern.resource_type.name,
        "name": pattern.name,
        "patternType": pattern.pattern_type.name,
    }
    return EXTENDED_CHANGES_PATH, json.dumps(event).encode()


def decode_change(parent: str, data: bytes) -> ResourcePattern:
    try:
        if parent == LITERAL_CHANGES_PATH:
            kind, name = data.decode().split(":", 1)
            return ResourcePattern(parse_resource_type(kind), name, PatternType.LITERAL)
        event = json.loads(data)
        pattern_type = PatternType[str(event["patternType"]).upper()]
        if pattern_type not in _STORES:
            raise ValueError(f"pattern type {pattern_type.name}")
        return ResourcePattern(
            parse_resource_type(str(event["resourceType"])), event["name"], pattern_type
        )
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise ZkDataError(f"{parent}: not an ACL change notification: {exc}") from exc


def _entry_order(e: AccessControlEntry) -> tuple[str, str, str, str]:
    return (e.principal, e.host, e.operation.title, e.permission.title)


# -- reads -------------------------------------------------------------------------------------


async def read_acls(
    zk: ZkClient, pattern: ResourcePattern
) -> tuple[frozenset[AccessControlEntry], int]:
    """The pattern's entries and its znode's version (-1: no znode)."""
    path = acl_path(pattern)
    try:
        data, stat = await zk.get(path)
    except NoNode:
        return frozenset(), -1
    return decode_acls(data, path), stat.version


async def read_all_acls(zk: ZkClient) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
    """Every stored pattern with its entries (a znode that is not Kafka's JSON is
    raised as ZkDataError: a broker must not run with half its ACLs)."""
    patterns: list[ResourcePattern] = []
    for pattern_type, root in _STORES.items():
        for resource_type in ResourceType:
            parent = f"{root}/{resource_type.title}"
            try:
                names = await zk.get_children(parent)
            except NoNode:
                continue
            patterns += [ResourcePattern(resource_type, n, pattern_type) for n in names]
    paths = [acl_path(p) for p in patterns]
    acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
    for pattern, path, result in zip(patterns, paths, await zk.get_many(paths), strict=True):
        if isinstance(result, NoNode):
            continue  # deleted since the listing
        if isinstance(result, ZkError):
            raise result
        entries = decode_acls(result[0], path)
        if entries:
            acls[pattern] = entries
    return acls


# -- writes ------------------------------------------------------------------------------------


async def update_acls(
    zk: ZkClient,
    pattern: ResourcePattern,
    change: Callable[[frozenset[AccessControlEntry]], frozenset[AccessControlEntry]],
) -> tuple[frozenset[AccessControlEntry], frozenset[AccessControlEntry]]:
    """Apply ``change`` to the pattern's entries with a conditional write (re-read and
    retried when another writer got there first), then announce the change; returns
    (before, after). Nothing is written or announced when ``change`` changes nothing."""
    path = acl_path(pattern)
    for _ in range(MAX_UPDATE_ATTEMPTS):
        before, version = await read_acls(zk, pattern)
        after = change(before)
        if after == before:
            return before, after
        try:
            if version < 0:
                await zk.create(path, encode_acls(after), makepath=True)
            elif after:
                await zk.set(path, encode_acls(after), version=version)
            else:
                await zk.delete(path, version=version)
        except (BadVersion, NodeExists, NoNode):
            continue
        await announce_change(zk, pattern)
        return before, after
    raise ZkDataError(f"{path}: changed by others {MAX_UPDATE_ATTEMPTS} times in a row")


async def announce_change(zk: ZkClient, pattern: ResourcePattern) -> None:
    parent, data = encode_change(pattern)
    await zk.create(f"{parent}/{CHANGE_PREFIX}", data, sequence=True, makepath=True)


# -- change notifications ----------------------------------------------------------------------


async def change_names(zk: ZkClient, parent: str, *, watch: bool) -> list[str]:
    """The notifications under ``parent``, oldest first (the parent is created if
    missing: a child watch needs it)."""
    try:
        names = await zk.get_children(parent, watch=watch)
    except NoNode:
        await zk.ensure_path(parent)
        names = await zk.get_children(parent, watch=watch)
    return sorted(n for n in names if n.startswith(CHANGE_PREFIX))


async def changed_patterns(zk: ZkClient, parent: str, names: Iterable[str]) -> set[ResourcePattern]:
    """The patterns the named notifications announce (purged or unreadable ones are
    skipped)."""
    paths = [f"{parent}/{name}" for name in names]
    patterns: set[ResourcePattern] = set()
    for result in await zk.get_many(paths):
        if isinstance(result, ZkError):
            continue  # purged by another broker meanwhile
        try:
            patterns.add(decode_change(parent, result[0]))
        except ZkDataError:
            continue  # not a notification we can act on
    return patterns

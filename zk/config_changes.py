"""Reading Kafka's config change notifications (/config/changes/config_change_N).

Whoever changes an entity's config (/config/topics/T, /config/brokers/N) appends a
sequential znode here whose JSON names the entity (``{"version": 2, "entity_path":
"topics/T"}``, see ``encode_config_change`` in zk/model.py); brokers watch the children
and re-read the entities named by the notifications they have not seen yet.
"""

from __future__ import annotations

from collections.abc import Iterable

from minibroker.zk.client import ZkClient
from minibroker.zk.model import CONFIG_CHANGE_PREFIX, CONFIG_CHANGES_PATH, decode_config_change
from minibroker.zk.types import ZkError
from minibroker.zk.values import ZkDataError

TOPIC_ENTITY_PREFIX = "topics/"


def config_change_entity(data: bytes, path: str) -> str | None:
    """``entity_path`` of a notification's data; None for anything else."""
    try:
        return decode_config_change(data, path)
    except ZkDataError:
        return None  # not a notification we know: nothing to act on


async def config_change_names(zk: ZkClient, *, watch: bool) -> list[str]:
    """The notification znodes' names, oldest first."""
    names = await zk.get_children(CONFIG_CHANGES_PATH, watch=watch)
    return sorted(n for n in names if n.startswith(CONFIG_CHANGE_PREFIX))


async def topics_changed(zk: ZkClient, names: Iterable[str]) -> set[str]:
    """The topics the named notifications announce (a purged one is skipped)."""
    paths = [f"{CONFIG_CHANGES_PATH}/{name}" for name in names]
    topics: set[str] = set()
    for path, result in zip(paths, await zk.get_many(paths), strict=True):
        if isinstance(result, ZkError):
            continue  # removed by a broker's cleanup meanwhile
        entity = config_change_entity(result[0], path)
        if entity is not None and entity.startswith(TOPIC_ENTITY_PREFIX):
            topics.add(entity[len(TOPIC_ENTITY_PREFIX) :])
    return topics

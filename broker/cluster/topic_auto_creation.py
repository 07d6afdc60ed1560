"""Kafka's ``auto.create.topics.enable``: a Metadata request naming an unknown topic
creates it, with the broker defaults ``num.partitions`` and ``default.replication.factor``.

How this works. ``KafkaApis.handle_metadata`` calls ``request(names)`` (synchronous) when
the request allows auto-creation (``allow_auto_topic_creation``: true from producers,
false from consumers and admin tools). Unknown, validly named topics are marked in the
metadata cache, which then answers LEADER_NOT_AVAILABLE for them (clients retry that)
instead of UNKNOWN_TOPIC_OR_PARTITION, and are queued for ``run``, which sends them
through CreateTopics without waiting for leaders, as Kafka's KafkaApis does. The mark
goes when the controller's UpdateMetadata brings the topic; a creation that failed
(e.g. INVALID_REPLICATION_FACTOR: fewer live brokers than the default) is answered with
its error for a while, then the next Metadata request tries again.

Until ``run`` is started (a standalone broker, or ``auto.create.topics.enable=false``)
``request`` does nothing and unknown topics stay UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable

import trio

from minibroker.broker.cluster.metadata_cache import MetadataCache
from minibroker.protocol.errors import NONE, KafkaError, TopicAlreadyExistsError
from minibroker.protocol.messages import bodies

log = logging.getLogger(__name__)

CreateTopics = Callable[[bodies.CreateTopicsRequest], Awaitable[bodies.CreateTopicsResponse]]
"""A CreateTopics handler: request body -> response body."""

QUEUE_SIZE = 64
"""Creation batches waiting for ``run``; when full, the topics are unmarked and the
client's next Metadata request asks again."""

DEFAULT_SETTING = -1
"""CreateTopics' num_partitions / replication_factor meaning "the broker default"."""


class TopicAutoCreator:
    def __init__(self, cache: MetadataCache) -> None:
        self._cache = cache
        self._queue: trio.MemorySendChannel[list[str]] | None = None

    def request(self, names: Iterable[str]) -> None:
        """Start creating the topics among ``names`` nobody has created yet."""
        if self._queue is None:
            return
        started = self._cache.start_auto_creation(names)
        if not started:
            return
        try:
            self._queue.send_nowait(started)
        except (trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
            for name in started:
                self._cache.finish_auto_creation(name, NONE)

    async def run(
        self,
        create_topics: CreateTopics,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Create queued topics through ``create_topics`` until cancelled."""
        send, receive = trio.open_memory_channel[list[str]](QUEUE_SIZE)
        self._queue = send
        try:
            async with trio.open_nursery() as nursery:
                task_status.started()
                async for names in receive:
                    nursery.start_soon(self._create, create_topics, names)
        finally:
            self._queue = None

    async def _create(self, create_topics: CreateTopics, names: list[str]) -> None:
        request: bodies.CreateTopicsRequest = {
            "topics": [
                {
                    "name": name,
                    "num_partitions": DEFAULT_SETTING,
                    "replication_factor": DEFAULT_SETTING,
                    "assignments": [],
                    "configs": [],
                }
                for name in names
            ],
            "timeout_ms": 0,
            "validate_only": False,
        }
        try:
            response = await create_topics(request)
        except KafkaError as exc:
            log.warning("auto-creating topics %s failed: %s", names, exc)
            codes = dict.fromkeys(names, exc.code)
        except Exception:  # ZooKeeper trouble: report it, never take the broker down
            log.exception("auto-creating topics %s failed", names)
            codes = dict.fromkeys(names, KafkaError.code)
        else:
            codes = {t["name"]: t["error_code"] for t in response["topics"]}
        for name, code in codes.items():
            if code == TopicAlreadyExistsError.code:
                code = NONE  # created meanwhile by someone else: wait for its metadata
            elif code == NONE:
                log.info("auto-created topic %r", name)
            self._cache.finish_auto_creation(name, code)

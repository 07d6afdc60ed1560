"""Where a coordinator lives: the leader of a key's partition of an internal topic
(``__consumer_offsets`` for groups, ``__transaction_state`` for transactional ids).

FindCoordinator asks one ``CoordinatorLocator`` per key type. The internal topic is
created on first use, as Kafka does: the call that finds it missing starts the creation
and answers COORDINATOR_NOT_AVAILABLE, which clients retry; until this broker's metadata
cache lists the topic, further calls start no second creation (a created topic reaches
the cache a moment later, with the controller's UpdateMetadata). Its replication factor is
the configured one capped by the brokers alive at that moment: Kafka refuses to create
the topic until enough brokers are up, which leaves a one-broker dev cluster with no
coordinator at all.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping

from minibroker.broker.cluster.metadata_cache import MetadataCache
from minibroker.broker.cluster.topic_auto_creation import CreateTopics
from minibroker.protocol.errors import (
    NONE,
    CoordinatorNotAvailableError,
    KafkaError,
    TopicAlreadyExistsError,
)
from minibroker.protocol.messages import bodies
from minibroker.protocol.topic_partition import TopicPartition

log = logging.getLogger(__name__)


class CoordinatorLocator:
    def __init__(
        self,
        metadata_cache: MetadataCache,
        *,
        topic: str,
        partition_for: Callable[[str, int], int],
        num_partitions: int,
        replication_factor: int,
        configs: Mapping[str, str],
        create_topics: CreateTopics | None,
        spawn: Callable[[Callable[[], Awaitable[None]]], None],
        min_isr: int | None = None,
    ) -> None:
        """``create_topics`` is None standalone (no ZooKeeper: no internal topic, so no
        coordinator); ``spawn`` runs the topic's creation in the background;
        ``min_isr`` (capped by the replication factor) becomes its min.insync.replicas."""
        self.metadata_cache = metadata_cache
        self.topic = topic
        self.partition_for = partition_for
        self.num_partitions = num_partitions
        self.replication_factor = replication_factor
        self.configs = dict(configs)
        self.create_topics = create_topics
        self.spawn = spawn
        self.min_isr = min_isr
        self._creating = False

    def partition_count(self) -> int:
        """Partitions of the topic as the metadata cache knows it (0: not created)."""
        return self.metadata_cache.partition_count(self.topic)

    def partition_of(self, key: str) -> int | None:
        count = self.partition_count()
        return None if count == 0 else self.partition_for(key, count)

    def locate(self, key: str) -> bodies.FindCoordinatorResponseCoordinator:
        try:
            count = self.partition_count()
            if count == 0:
                self._create_topic()
                raise CoordinatorNotAvailableError(f"{self.topic} is being created")
            self._creating = False  # it exists: should it go, the next call creates it
            info = self.metadata_cache.partition(
                TopicPartition(self.topic, self.partition_for(key, count))
            )
            broker = None if info is None else self.metadata_cache.brokers.get(info.leader)
            if broker is None:
                raise CoordinatorNotAvailableError(f"the coordinator of {key!r} has no leader")
        except KafkaError as exc:
            return refused(key, exc)
        return {
            "key": key,
            "node_id": broker.id,
            "host": broker.host,
            "port": broker.port,
            "error_code": NONE,
            "error_message": None,
            "kafka_host": broker.kafka_host,
            "kafka_port": broker.kafka_port if broker.kafka_host is not None else None,
        }

    def _create_topic(self) -> None:
        create = self.create_topics
        if create is None or self._creating:
            return
        self._creating = True
        live = max(len(self.metadata_cache.brokers), 1)
        replication_factor = min(self.replication_factor, live)
        configs = dict(self.configs)
        if self.min_isr is not None:
            configs["min.insync.replicas"] = str(min(self.min_isr, replication_factor))
        body: bodies.CreateTopicsRequest = {
            "topics": [
                {
                    "name": self.topic,
                    "num_partitions": self.num_partitions,
                    "replication_factor": replication_factor,
                    "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in configs.items()],
                }
            ],
            "timeout_ms": 0,
            "validate_only": False,
        }
        topic = self.topic

        async def create_topic() -> None:
            created = False
            try:
                response = await create(body)
                code = response["topics"][0]["error_code"]
                created = code in (NONE, TopicAlreadyExistsError.code)
                if code == NONE:
                    log.info("created %s", topic)
                elif created:
                    log.debug("%s was created by another broker", topic)
                else:
                    log.warning("creating %s failed with error %d", topic, code)
            except Exception:  # ZooKeeper trouble: the next FindCoordinator tries again
                log.exception("creating %s failed", topic)
            finally:
                # Created: no second creation until the cache has it (``locate``).
                self._creating = created

        self.spawn(create_topic)


def refused(key: str, error: KafkaError) -> bodies.FindCoordinatorResponseCoordinator:
    return {
        "key": key,
        "node_id": -1,
        "host": "",
        "port": -1,
        "error_code": error.code,
        "error_message": error.message,
        "kafka_host": None,
        "kafka_port": None,
    }

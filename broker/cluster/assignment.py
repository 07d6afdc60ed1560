"""Replica assignment for new topics (Kafka's rack-unaware algorithm) and the checks
CreateTopics applies before anything is written.

How the assignment works, for brokers sorted by id, ``n`` of them:

* Partition ``p``'s first replica (its preferred leader) is broker
  ``(start + p) mod n``: leaders go round-robin from a random start, so every broker
  leads ``partitions / n`` partitions, give or take one.
* The other replicas follow the first at a distance ``1 + (shift + j) mod (n - 1)`` for
  the j-th follower. The distance is never 0 or n, so no broker appears twice in a
  partition, and ``shift`` (random at first) grows by one after every full round of
  ``n`` partitions, so the followers of one broker's partitions spread over different
  brokers instead of always being its neighbours.

Both random numbers come from the injected ``random.Random``; tests seed it. A fixed
start index (used by tests and by Kafka's tooling) replaces both.
"""

from __future__ import annotations

import random
import re
from collections.abc import Collection, Iterable, Sequence

from minibroker.protocol.errors import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    TopicAlreadyExistsError,
)

MAX_TOPIC_NAME_LENGTH = 249
"""Kafka's limit: a partition directory name (topic + '-' + partition + '.' + 36-char
uuid + '-delete') must stay under the 255-byte file name limit."""

_LEGAL_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")


def validate_topic_name(name: str) -> None:
    if not name:
        raise InvalidTopicError("topic name is empty")
    if name in (".", ".."):
        raise InvalidTopicError(f"topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(
            f"topic name is {len(name)} characters long, the limit is {MAX_TOPIC_NAME_LENGTH}"
        )
    if not _LEGAL_TOPIC_NAME.fullmatch(name):
        raise InvalidTopicError(
            f"topic name {name!r} has characters outside ASCII letters, digits, '.', '_', '-'"
        )


def validate_new_topic(
    name: str,
    num_partitions: int,
    replication_factor: int,
    live_broker_ids: Collection[int],
    existing_topics: Collection[str],
) -> None:
    """The CreateTopics checks, in Kafka's order; raises the Kafka error to return."""
    validate_topic_name(name)
    if name in existing_topics:
        raise TopicAlreadyExistsError(f"topic {name!r} already exists")
    if num_partitions <= 0:
        raise InvalidPartitionsError(f"number of partitions must be positive, not {num_partitions}")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError(
            f"replication factor must be positive, not {replication_factor}"
        )
    if replication_factor > len(live_broker_ids):
        raise InvalidReplicationFactorError(
            f"replication factor {replication_factor} is larger than the"
            f" {len(live_broker_ids)} available brokers"
        )


def assign_replicas_to_brokers(
    broker_ids: Iterable[int],
    num_partitions: int,
    replication_factor: int,
    rng: random.Random,
    *,
    fixed_start_index: int | None = None,
    start_partition_id: int = 0,
) -> dict[int, list[int]]:
    """Partition id -> replicas (preferred leader first) for ``num_partitions`` new
    partitions numbered from ``start_partition_id``."""
    brokers: Sequence[int] = sorted(set(broker_ids))
    n = len(brokers)
    if num_partitions <= 0:
        raise InvalidPartitionsError(f"number of partitions must be positive, not {num_partitions}")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError(
            f"replication factor must be positive, not {replication_factor}"
        )
    if replication_factor > n:
        raise InvalidReplicationFactorError(
            f"replication factor {replication_factor} is larger than the {n} available brokers"
        )
    if fixed_start_index is not None:
        start = shift = fixed_start_index
    else:
        start = rng.randrange(n)
        shift = rng.randrange(n)
    assignment: dict[int, list[int]] = {}
    for partition in range(start_partition_id, start_partition_id + num_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start) % n
        replicas = [brokers[first]]
        for j in range(replication_factor - 1):
            distance = 1 + (shift + j) % (n - 1)
            replicas.append(brokers[(first + distance) % n])
        assignment[partition] = replicas
    return assignment

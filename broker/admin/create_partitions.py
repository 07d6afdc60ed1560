"""CreatePartitions, which any broker answers: topics grow, never shrink.

How this works (Kafka's ZooKeeper-mode AdminManager.createPartitions):

1. per topic, in Kafka's order: named once in the request, exists, is not being
   deleted, has no reassignment in progress, ``count`` is larger than its partition
   count (equal or smaller: INVALID_PARTITIONS), and the new replicas are valid -
   given (``assignments``: one replica list per new partition, live brokers, no
   repeats, the topic's replication factor) or placed by Kafka's algorithm
   (broker/cluster/assignment.py) from the live brokers, starting where partition 0's first
   replica stands so that leaders keep going round the brokers;
2. unless ``validate_only``, the topic's assignment znode is rewritten with the new
   partitions added, conditional on the version read (a concurrent change re-reads
   and re-checks the topic, so two requests cannot both add the same partitions);
3. the controller's data watch on the topic znode (PartitionModifications,
   controller/topic_changes.py) moves the new partitions New -> Online and sends
   LeaderAndIsr and UpdateMetadata: on failover the next controller finds them with
   no state znode and does the same;
4. the answer waits, up to ``timeout_ms``, until this broker's metadata shows a leader
   for every new partition, so a client can produce to them right after; a topic
   still waiting then is REQUEST_TIMED_OUT (its partitions are written and come online
   when a controller acts on them).
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

import trio

from minibroker.broker.cluster.assignment import assign_replicas_to_brokers
from minibroker.broker.requests.dispatcher import Deferred, RequestDispatcher
from minibroker.protocol.api import RequestHeader
from minibroker.protocol.errors import (
    NONE,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicError,
    KafkaError,
    ReassignmentInProgressError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
)
from minibroker.protocol.messages import bodies
from minibroker.zk.client import BadVersion
from minibroker.zk.values import TopicAssignment

WRITE_ATTEMPTS = 5
"""Conditional writes of one topic's assignment before giving up: each failure means
another writer changed the topic meanwhile, which is rare (a reassignment, a second
CreatePartitions)."""


class GrowthZk(Protocol):
    """The part of zk/data.py's KafkaZkClient this API uses."""

    async def get_live_brokers(self, *, watch: bool = ...) -> Mapping[int, Any]: ...
    async def get_assignment(self, topic: str, *, watch: bool = ...) -> TopicAssignment | None: ...
    async def get_topic_deletions(self, *, watch: bool = ...) -> set[str]: ...
    async def set_assignment(
        self, assignment: TopicAssignment, *, controller_epoch_zk_version: int | None = ...
    ) -> TopicAssignment: ...


PartitionsReady = Callable[[str, int], Awaitable[None]]
"""``ready(topic, count)`` returns once this broker's metadata shows partitions 0..count-1
of ``topic``, each with a leader (cancelled at the request's timeout)."""


class CreatePartitions:
    def __init__(
        self,
        zk: GrowthZk,
        partitions_ready: PartitionsReady,
        *,
        max_new_partitions: int,
        rng: random.Random | None = None,
    ) -> None:
        """``max_new_partitions``: request.max.partitions, the most partitions one request
        may add over all its topics (each costs ZooKeeper state and a LeaderAndIsr)."""
        self._zk = zk
        self._partitions_ready = partitions_ready
        self._max_new_partitions = max_new_partitions
        self._rng = rng or random.Random()

    def install(self, dispatcher: RequestDispatcher) -> None:
        def create(
            header: RequestHeader, request: bodies.CreatePartitionsRequest
        ) -> Deferred[bodies.CreatePartitionsResponse]:
            return Deferred(lambda: self.create_partitions(request))

        dispatcher.register(bodies.CREATE_PARTITIONS, create)

    async def create_partitions(
        self, request: bodies.CreatePartitionsRequest
    ) -> bodies.CreatePartitionsResponse:
        topics = request["topics"]
        named = Counter(t["name"] for t in topics)
        live = set(await self._zk.get_live_brokers())
        deleting = await self._zk.get_topic_deletions()
        results: list[bodies.CreatePartitionsResponseResult] = []
        grown: dict[str, int] = {}
        budget = self._max_new_partitions
        for topic in topics:
            name = topic["name"]
            try:
                if named[name] > 1:
                    raise InvalidRequestError("Duplicate topic in request.")
                if name in deleting:
                    raise InvalidTopicError(f"The topic '{name}' is queued for deletion.")
                added = await self._grow(topic, live, budget, request["validate_only"])
            except KafkaError as exc:
                results.append({"name": name, "error_code": exc.code, "error_message": exc.message})
            else:
                budget -= added
                grown[name] = topic["count"]
                results.append({"name": name, "error_code": NONE, "error_message": None})
        if grown and not request["validate_only"] and request["timeout_ms"] > 0:
            late = await self._wait_ready(grown, request["timeout_ms"])
            for result in results:
                if result["name"] in late:
                    timed_out = RequestTimedOutError(
                        f"the new partitions of '{result['name']}' had no leader within"
                        f" {request['timeout_ms']} ms (they come online once a controller"
                        " acts on them)"
                    )
                    result |= {"error_code": timed_out.code, "error_message": timed_out.message}
        return {"results": results}

    async def _grow(
        self,
        topic: bodies.CreatePartitionsRequestTopic,
        live: set[int],
        budget: int,
        validate_only: bool,
    ) -> int:
        """Check and (unless ``validate_only``) write one topic's new partitions;
        returns how many it adds."""
        name = topic["name"]
        for _ in range(WRITE_ATTEMPTS):
            current = await self._zk.get_assignment(name)
            if current is None:
                raise UnknownTopicOrPartitionError(f"The topic '{name}' does not exist.")
            new = self._new_partitions(current, topic, live, budget)
            if validate_only:
                return len(new)
            grown = dataclasses.replace(current, partitions={**current.partitions, **new})
            try:
                await self._zk.set_assignment(grown)
            except BadVersion:
                continue  # changed meanwhile: read and check again
            return len(new)
        raise ReassignmentInProgressError(
            f"the assignment of '{name}' kept changing while partitions were being added"
        )

    def _new_partitions(
        self,
        current: TopicAssignment,
        topic: bodies.CreatePartitionsRequestTopic,
        live: set[int],
        budget: int,
    ) -> dict[int, tuple[int, ...]]:
        if current.adding_replicas or current.removing_replicas:
            raise ReassignmentInProgressError("A partition reassignment is in progress.")
        old = len(current.partitions)
        count = topic["count"]
        if count < old:
            raise InvalidPartitionsError(
                f"Topic currently has {old} partitions, which is higher than the requested {count}."
            )
        if count == old:
            raise InvalidPartitionsError(f"Topic already has {old} partitions.")
        increment = count - old
        if increment > budget:
            raise InvalidRequestError(
                f"adding {increment} partitions would pass request.max.partitions"
                f" ({self._max_new_partitions}) for this request"
            )
        replication_factor = len(current.partitions[0]) if 0 in current.partitions else 1
        explicit = topic["assignments"]
        if explicit is None:
            return _placed(current, live, increment, replication_factor, self._rng)
        if len(explicit) != increment:
            raise InvalidReplicaAssignmentError(
                f"Increasing the number of partitions by {increment} but {len(explicit)}"
                " assignments provided."
            )
        new: dict[int, tuple[int, ...]] = {}
        for index, assignment in enumerate(explicit, start=old):
            replicas = tuple(assignment["broker_ids"])
            _check_replicas(index, replicas, live, replication_factor)
            new[index] = replicas
        return new

    async def _wait_ready(self, grown: Mapping[str, int], timeout_ms: int) -> set[str]:
        """The topics whose new partitions still have no leader here after ``timeout_ms``."""
        late = set(grown)

        async def ready(topic: str, count: int) -> None:
            await self._partitions_ready(topic, count)
            late.discard(topic)

        with trio.move_on_after(timeout_ms / 1000):
            async with trio.open_nursery() as nursery:
                for topic, count in grown.items():
                    nursery.start_soon(ready, topic, count)
        return late


def _placed(
    current: TopicAssignment,
    live: set[int],
    increment: int,
    replication_factor: int,
    rng: random.Random,
) -> dict[int, tuple[int, ...]]:
    """Kafka's placement for added partitions: its start index is where partition 0's
    preferred leader stands among the live brokers (sorted by id), so the new leaders
    continue the topic's round-robin."""
    if replication_factor > len(live):
        raise InvalidReplicationFactorError(
            f"replication factor {replication_factor} is larger than the {len(live)}"
            " available brokers"
        )
    brokers = sorted(live)
    first = current.partitions[0][0] if current.partitions.get(0) else brokers[0]
    start = next((i for i, b in enumerate(brokers) if b >= first), 0)
    placed = assign_replicas_to_brokers(
        brokers,
        increment,
        replication_factor,
        rng,
        fixed_start_index=start,
        start_partition_id=len(current.partitions),
    )
    return {p: tuple(r) for p, r in placed.items()}


def _check_replicas(
    partition: int, replicas: Sequence[int], live: set[int], replication_factor: int
) -> None:
    if not replicas:
        raise InvalidReplicaAssignmentError(f"partition {partition} has no replicas")
    if len(set(replicas)) != len(replicas):
        raise InvalidReplicaAssignmentError(
            f"Duplicate brokers not allowed in replica assignment: {list(replicas)} for"
            f" partition {partition}."
        )
    unknown = sorted(set(replicas) - live)
    if unknown:
        raise InvalidReplicaAssignmentError(
            f"Unknown broker(s) in replica assignment: {unknown} for partition {partition}."
        )
    if len(replicas) != replication_factor:
        raise InvalidReplicaAssignmentError(
            f"Inconsistent replication factor between partitions, partition 0 has"
            f" {replication_factor} while partition {partition} has {len(replicas)}."
        )

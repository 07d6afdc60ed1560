"""AdminManager: CreateTopics and DeleteTopics, which any broker answers.

Kafka's AdminManager duties (topic configs are broker/admin/topic_configs.py): validate, then
write ZooKeeper (the assignment from Kafka's algorithm in broker/cluster/assignment.py, or a
deletion mark); the active controller reacts to the watch. Each then waits, up to the
request's ``timeout_ms``, for the outcome: the topic in this broker's metadata, the
topic's znode gone.

Each method takes a request body (already validated against protocol/schemas) and
returns the response body; errors are Kafka error codes in the body, never exceptions.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

import trio

from minibroker.broker.cluster.assignment import (
    assign_replicas_to_brokers,
    validate_new_topic,
    validate_topic_name,
)
from minibroker.broker.requests.dispatcher import Deferred, RequestDispatcher
from minibroker.protocol.api import RequestHeader
from minibroker.protocol.errors import (
    NONE,
    InvalidReplicaAssignmentError,
    InvalidRequestError,
    KafkaError,
    RequestTimedOutError,
    TopicAlreadyExistsError,
    TopicDeletionDisabledError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from minibroker.protocol.messages import bodies
from minibroker.protocol.topic_ids import ZERO_TOPIC_ID, topic_id_str

DEFAULT_SETTING = -1

TOPICS_PER_TURN = 100
"""CreateTopics validates (and assigns) this many topics between two yields to the other
connections: one maximal request never holds the event loop for long."""
"""num_partitions / replication_factor meaning "use the broker default"."""


class AdminZk(Protocol):
    """The part of the ZooKeeper data layer (zk/data.py's KafkaZkClient) these APIs use."""

    async def get_live_brokers(self, *, watch: bool = ...) -> Mapping[int, Any]: ...
    async def get_topics(self, *, watch: bool = ...) -> set[str]: ...
    async def create_topics(
        self, topics: Mapping[str, tuple[Mapping[int, Sequence[int]], Mapping[str, str]]]
    ) -> Mapping[str, KafkaError | None]: ...
    async def mark_topic_for_deletion(self, topic: str) -> bool: ...
    async def wait_for_topics_deleted(self, topics: Iterable[str]) -> None: ...


ConfigValidator = Callable[
    [Mapping[str, str]], Sequence[bodies.CreateTopicsResponseTopicConfig] | None
]
"""Raises InvalidConfigError naming the bad key (broker/admin/topic_configs.py's table); else
returns the topic's resulting configs for the answer (None: none to report)."""

TopicsReady = Callable[[Iterable[str]], Awaitable[None]]
"""Returns once this broker's metadata knows every named topic (CreateTopics waits for it
so a client can produce right after; cancelled at the request's timeout)."""


async def _never_ready(topics: Iterable[str]) -> None:
    return None


class AdminManager:
    def __init__(
        self,
        zk: AdminZk,
        *,
        num_partitions: int = 1,
        default_replication_factor: int = 1,
        delete_topic_enable: bool = True,
        rng: random.Random | None = None,
        topics_ready: TopicsReady = _never_ready,
        validate_config: ConfigValidator | None = None,
        topic_id_of: Callable[[str], bytes | None] = lambda topic: None,
        topic_named_by: Callable[[bytes], str | None] = lambda topic_id: None,
    ) -> None:
        """``topic_id_of``: a topic's id (KIP-516) as this broker's metadata knows it,
        for CreateTopics v7+'s answer once the topic is ready; ``topic_named_by`` the
        topic with an id, for DeleteTopics v6+ by id."""
        self._zk = zk
        self._num_partitions = num_partitions
        self._replication_factor = default_replication_factor
        self._delete_topic_enable = delete_topic_enable
        self._rng = rng or random.Random()
        self._topics_ready = topics_ready
        self._validate_config = validate_config
        self._topic_id_of = topic_id_of
        self._topic_named_by = topic_named_by

    def install(self, dispatcher: RequestDispatcher) -> None:
        """Serve CreateTopics and DeleteTopics through ``dispatcher``."""

        def create(
            header: RequestHeader, request: bodies.CreateTopicsRequest
        ) -> Deferred[bodies.CreateTopicsResponse]:
            return Deferred(lambda: self.create_topics(request))

        def delete(
            header: RequestHeader, request: bodies.DeleteTopicsRequest
        ) -> Deferred[bodies.DeleteTopicsResponse]:
            return Deferred(lambda: self.delete_topics(request))

        dispatcher.register(bodies.CREATE_TOPICS, create)
        dispatcher.register(bodies.DELETE_TOPICS, delete)

    async def create_topics(
        self, request: bodies.CreateTopicsRequest
    ) -> bodies.CreateTopicsResponse:
        live = set(await self._zk.get_live_brokers())
        existing = await self._zk.get_topics()
        named = Counter(t["name"] for t in request["topics"])
        results: list[bodies.CreateTopicsResponseTopic] = []
        valid: dict[str, tuple[dict[int, list[int]], dict[str, str]]] = {}
        for index, topic in enumerate(request["topics"]):
            if index % TOPICS_PER_TURN == TOPICS_PER_TURN - 1:
                await trio.lowlevel.checkpoint()  # a large request lets others run
            name = topic["name"]
            result: bodies.CreateTopicsResponseTopic = {
                "name": name,
                "num_partitions": -1,
                "replication_factor": -1,
            }
            try:
                if named[name] > 1:
                    raise InvalidRequestError(f"topic {name!r} appears twice in the request")
                assignment = self._assignment_for(topic, live, existing)
                config = {c["name"]: c["value"] for c in topic["configs"] if c["value"] is not None}
                configs = None
                if self._validate_config is not None:
                    configs = self._validate_config(config)
            except KafkaError as exc:
                result |= {"error_code": exc.code, "error_message": exc.message}
            else:
                valid[name] = assignment, config
                result |= {
                    "error_code": NONE,
                    "error_message": None,
                    "num_partitions": len(assignment),
                    "replication_factor": len(assignment[0]),
                    "configs": list(configs or ()),
                }
            results.append(result)
        created: list[str] = []
        if valid and not request["validate_only"]:
            # Every topic's znodes in one batch: one after the other, a request of a
            # thousand one-partition topics cost thousands of ZooKeeper round trips.
            outcomes = await self._zk.create_topics(valid)
            for result in results:
                error = outcomes.get(result["name"])
                if error is not None:
                    result |= {
                        "error_code": error.code,
                        "error_message": error.message,
                        "num_partitions": -1,
                        "replication_factor": -1,
                        "configs": [],
                    }
                elif result["name"] in valid:
                    created.append(result["name"])
        if created and request["timeout_ms"] > 0:
            with trio.move_on_after(request["timeout_ms"] / 1000):
                await self._topics_ready(created)
            for result in results:
                topic_id = self._topic_id_of(result["name"]) if result["name"] in created else None
                if topic_id is not None:
                    result["topic_id"] = topic_id
        return {"topics": results}

    def _assignment_for(
        self, topic: bodies.CreateTopicsRequestTopic, live: set[int], existing: set[str]
    ) -> dict[int, list[int]]:
        name = topic["name"]
        explicit = topic["assignments"]
        if not explicit:
            partitions = topic["num_partitions"]
            rf = topic["replication_factor"]
            partitions = self._num_partitions if partitions == DEFAULT_SETTING else partitions
            rf = self._replication_factor if rf == DEFAULT_SETTING else rf
            validate_new_topic(name, partitions, rf, live, existing)
            return assign_replicas_to_brokers(live, partitions, rf, self._rng)
        validate_topic_name(name)
        if name in existing:
            raise TopicAlreadyExistsError(f"topic {name!r} already exists")
        if (
            topic["num_partitions"] != DEFAULT_SETTING
            or topic["replication_factor"] != DEFAULT_SETTING
        ):
            raise InvalidRequestError("give either assignments or partitions/replication factor")
        assignment = {a["partition_index"]: list(a["broker_ids"]) for a in explicit}
        if sorted(assignment) != list(range(len(assignment))):
            raise InvalidReplicaAssignmentError("partition indexes must be 0..N-1")
        sizes = {len(replicas) for replicas in assignment.values()}
        for replicas in assignment.values():
            if not replicas or len(set(replicas)) != len(replicas):
                raise InvalidReplicaAssignmentError(f"bad replica list {replicas}")
            if not set(replicas) <= live:
                raise InvalidReplicaAssignmentError(f"unknown brokers in {replicas}")
        if len(sizes) != 1:
            raise InvalidReplicaAssignmentError("every partition needs the same replica count")
        return assignment

    async def delete_topics(
        self, request: bodies.DeleteTopicsRequest
    ) -> bodies.DeleteTopicsResponse:
        """Mark the topics for deletion, then (Kafka's DelayedDeleteTopics) wait up to
        ``timeout_ms`` until the controller has deleted them; one still there then is
        REQUEST_TIMED_OUT (it stays marked: the deletion goes on, typically once a
        stopped replica's broker is back). ``timeout_ms`` <= 0 answers once marked."""
        existing = await self._zk.get_topics()
        results: list[bodies.DeleteTopicsResponseTopic] = []
        asked: list[tuple[str | None, bytes | None]] = [(n, None) for n in request["topic_names"]]
        asked += [(t["name"], t["topic_id"]) for t in request.get("topics", ())]  # v6+
        for name, topic_id in asked:
            if name is None and topic_id is not None:  # v6+: by id alone
                name = self._topic_named_by(topic_id)
                if name is None:
                    unknown = UnknownTopicIdError(f"no topic has the id {topic_id_str(topic_id)}")
                    results.append(
                        {
                            "name": None,
                            "topic_id": topic_id,
                            "error_code": unknown.code,
                            "error_message": unknown.message,
                        }
                    )
                    continue
            assert name is not None
            result: bodies.DeleteTopicsResponseTopic = {
                "name": name,
                "topic_id": self._topic_id_of(name) or ZERO_TOPIC_ID,
            }
            try:
                if not self._delete_topic_enable:
                    raise TopicDeletionDisabledError("delete.topic.enable is false")
                if name not in existing:
                    raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
                await self._zk.mark_topic_for_deletion(name)
            except KafkaError as exc:
                result |= {"error_code": exc.code, "error_message": exc.message}
            else:
                result |= {"error_code": NONE, "error_message": None}
            results.append(result)
        marked = {r["name"] for r in results if r["error_code"] == NONE and r["name"] is not None}
        timeout_ms = request["timeout_ms"]
        if marked and timeout_ms > 0:
            with trio.move_on_after(timeout_ms / 1000):
                await self._zk.wait_for_topics_deleted(marked)
            still_there = await self._zk.get_topics() & marked
            for result in results:
                if result["name"] in still_there:
                    timed_out = RequestTimedOutError(
                        f"topic {result['name']!r} is marked for deletion but was not"
                        f" deleted within {timeout_ms} ms (is a broker holding one of its"
                        " replicas down?)"
                    )
                    result |= {"error_code": timed_out.code, "error_message": timed_out.message}
        return {"topics": results}

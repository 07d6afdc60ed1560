"""ControllerApis: the requests only the active controller answers.

ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments and
ControlledShutdown become events on the controller's queue and the handler waits for the
event's reply, up to the request's ``timeout_ms``; a broker whose controller candidate is
not the active controller answers NOT_CONTROLLER (the client asks again after refreshing
metadata).

Each method takes a request body (already validated against protocol/schemas) and
returns the response body (both typed by protocol/messages/bodies.py); errors are Kafka
error codes in the body, never exceptions. The process that runs a broker and its
controller candidate (node/) serves them on the broker's listener.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypeVar

import trio

from minibroker.controller import events as ev
from minibroker.controller.controller import KafkaController
from minibroker.protocol.errors import (
    NONE,
    ClusterAuthorizationFailedError,
    ElectionNotNeededError,
    InvalidRequestError,
    KafkaError,
    NotControllerError,
    RequestTimedOutError,
)
from minibroker.protocol.messages import bodies
from minibroker.protocol.messages.replicas import ELECTION_PREFERRED, ELECTION_UNCLEAN
from minibroker.protocol.topic_partition import TopicPartition

T = TypeVar("T")


def _code_and_message(error: KafkaError | None) -> tuple[int, str | None]:
    """A partition's outcome as its response fields: NONE and no message when it worked."""
    return (NONE, None) if error is None else (error.code, error.message)


class ControllerApis:
    def __init__(self, controller: KafkaController) -> None:
        self._controller = controller

    async def _ask_controller(
        self, event: ev.ControllerEvent, reply: ev.Reply[T], timeout_ms: int
    ) -> T:
        if not self._controller.is_active:
            raise NotControllerError(
                f"broker {self._controller.config.broker_id} is not the controller"
            )
        self._controller.events.put(event)
        with trio.move_on_after(timeout_ms / 1000 if timeout_ms > 0 else math.inf):
            return await reply.wait()
        raise RequestTimedOutError("the controller did not answer in time")

    async def elect_leaders(
        self, request: bodies.ElectLeadersRequest
    ) -> bodies.ElectLeadersResponse:
        try:
            election_type = request["election_type"]
            if election_type not in (ELECTION_PREFERRED, ELECTION_UNCLEAN):
                raise InvalidRequestError(f"unknown election type {election_type}")
            requested = request["topic_partitions"]
            partitions = (
                None
                if requested is None
                else frozenset(
                    TopicPartition(t["topic"], p) for t in requested for p in t["partitions"]
                )
            )
            event: ev.PreferredReplicaElection | ev.UncleanLeaderElection
            if election_type == ELECTION_UNCLEAN:
                event = ev.UncleanLeaderElection(partitions)
            else:
                event = ev.PreferredReplicaElection(partitions, ev.Reply())
            assert event.reply is not None
            results = await self._ask_controller(event, event.reply, request["timeout_ms"])
        except KafkaError as exc:
            return {"error_code": exc.code, "replica_election_results": []}
        by_topic: dict[
            str, list[bodies.ElectLeadersResponseReplicaElectionResultPartitionResult]
        ] = {}
        for tp, error in sorted(results.items()):
            if partitions is None and isinstance(error, ElectionNotNeededError):
                continue  # "all partitions": leave out the ones already fine
            code, message = _code_and_message(error)
            by_topic.setdefault(tp.topic, []).append(
                {"partition_id": tp.partition, "error_code": code, "error_message": message}
            )
        return {
            "error_code": NONE,
            "replica_election_results": [
                {"topic": topic, "partition_result": parts} for topic, parts in by_topic.items()
            ],
        }

    async def alter_partition_reassignments(
        self, request: bodies.AlterPartitionReassignmentsRequest
    ) -> bodies.AlterPartitionReassignmentsResponse:
        targets: dict[TopicPartition, Sequence[int] | None] = {
            TopicPartition(t["name"], p["partition_index"]): p["replicas"]
            for t in request["topics"]
            for p in t["partitions"]
        }
        try:
            event = ev.ApiPartitionReassignment(targets)
            results = await self._ask_controller(event, event.reply, request["timeout_ms"])
        except KafkaError as exc:
            return {"error_code": exc.code, "error_message": exc.message, "topics": []}
        by_topic: dict[str, list[bodies.AlterPartitionReassignmentsResponseTopicPartition]] = {}
        for tp, error in sorted(results.items()):
            code, message = _code_and_message(error)
            by_topic.setdefault(tp.topic, []).append(
                {"partition_index": tp.partition, "error_code": code, "error_message": message}
            )
        return {
            "error_code": NONE,
            "error_message": None,
            "topics": [{"name": name, "partitions": parts} for name, parts in by_topic.items()],
        }

    async def list_partition_reassignments(
        self, request: bodies.ListPartitionReassignmentsRequest
    ) -> bodies.ListPartitionReassignmentsResponse:
        wanted = request["topics"]
        try:
            event = ev.ListPartitionReassignments()
            ongoing = await self._ask_controller(event, event.reply, request["timeout_ms"])
        except KafkaError as exc:
            return {"error_code": exc.code, "error_message": exc.message, "topics": []}
        if wanted is not None:
            keep = {TopicPartition(t["name"], p) for t in wanted for p in t["partition_indexes"]}
            ongoing = {tp: v for tp, v in ongoing.items() if tp in keep}
        by_topic: dict[str, list[bodies.ListPartitionReassignmentsResponseTopicPartition]] = {}
        for tp, (replicas, adding, removing) in sorted(ongoing.items()):
            by_topic.setdefault(tp.topic, []).append(
                {
                    "partition_index": tp.partition,
                    "replicas": replicas,
                    "adding_replicas": adding,
                    "removing_replicas": removing,
                }
            )
        return {
            "error_code": NONE,
            "error_message": None,
            "topics": [{"name": name, "partitions": parts} for name, parts in by_topic.items()],
        }

    async def controlled_shutdown(
        self,
        request: bodies.ControlledShutdownRequest,
        *,
        sender: int,
        timeout_ms: int = 30_000,
    ) -> bodies.ControlledShutdownResponse:
        """``sender``: the broker id the connection has proven to be (-1: none); only a
        broker may ask for its own shutdown."""
        if sender < 0 or sender != request["broker_id"]:
            refused = ClusterAuthorizationFailedError
            return {"error_code": refused.code, "remaining_partitions": []}
        try:
            event = ev.ControlledShutdown(request["broker_id"], request["broker_epoch"])
            remaining = await self._ask_controller(event, event.reply, timeout_ms)
        except KafkaError as exc:
            return {"error_code": exc.code, "remaining_partitions": []}
        return {
            "error_code": NONE,
            "remaining_partitions": [
                {"topic_name": tp.topic, "partition_index": tp.partition}
                for tp in sorted(remaining)
            ],
        }

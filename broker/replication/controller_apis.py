"""ControllerRequestApis: the broker's handlers of the controller's requests, LeaderAndIsr,
StopReplica and UpdateMetadata.

They are served on the inter-broker listener only, and each passes the controller
fence (broker/security/controller_fence.py) before it changes anything: the connection must
have proven to be the controller ZooKeeper names, the controller epoch must be the
current one, the broker epoch this broker's registration.
They take effect one at a time in arrival order (``InOrder``), as Kafka's
one-request-at-a-time channel guarantees.

Python's collector: the objects a LeaderAndIsr builds (each new partition's state,
log, segments, indexes) live as long as the partition, and thousands of partitions
made every full collection walk them (40-65 ms with 3,000, stalling every client,
docs/performance.md). A LeaderAndIsr that created partitions therefore freezes
(``gc.freeze``, a constant-time move) everything alive, as the broker does after its
start-up; a StopReplica that deletes partitions unfreezes, so what they leave behind
can be collected, until the next LeaderAndIsr that creates partitions.
"""

from __future__ import annotations

import gc
from collections.abc import Awaitable, Callable
from typing import TypeAlias, TypeVar

import trio

from minibroker.broker.cluster.metadata_cache import MetadataCache
from minibroker.broker.replication.partition import LeaderAndIsrPartition
from minibroker.broker.replication.replica_manager import ReplicaManager
from minibroker.broker.requests.dispatcher import Answer, Deferred, RequestDispatcher
from minibroker.broker.security.controller_fence import ControllerFence
from minibroker.protocol.api import RequestHeader
from minibroker.protocol.errors import (
    NONE,
    ClusterAuthorizationFailedError,
    KafkaError,
    StaleBrokerEpochError,
    StaleControllerEpochError,
)
from minibroker.protocol.messages import bodies
from minibroker.protocol.topic_partition import TopicPartition

ControllerRequest: TypeAlias = (
    bodies.LeaderAndIsrRequest | bodies.StopReplicaRequest | bodies.UpdateMetadataRequest
)
"""The requests only the controller may send (checked by ``ControllerFence``)."""

ResponseT = TypeVar("ResponseT")
ResultT = TypeVar("ResultT")


class ControllerRequestApis:
    def __init__(
        self,
        replica_manager: ReplicaManager,
        metadata_cache: MetadataCache,
        fence: ControllerFence,
    ) -> None:
        """``fence`` decides whether a request comes from the controller."""
        self.replica_manager = replica_manager
        self.metadata_cache = metadata_cache
        self.fence = fence
        self._queue = InOrder()

    def install(self, dispatcher: RequestDispatcher, *, listener: str = "PLAINTEXT") -> None:
        """Serve the controller's requests through ``dispatcher`` on ``listener`` only."""
        dispatcher.register(bodies.LEADER_AND_ISR, self.handle_leader_and_isr, listener=listener)
        dispatcher.register(bodies.STOP_REPLICA, self.handle_stop_replica, listener=listener)
        dispatcher.register(bodies.UPDATE_METADATA, self.handle_update_metadata, listener=listener)

    def handle_leader_and_isr(
        self, header: RequestHeader, request: bodies.LeaderAndIsrRequest
    ) -> Answer[bodies.LeaderAndIsrResponse]:
        states = {
            TopicPartition(s["topic_name"], s["partition_index"]): LeaderAndIsrPartition(
                controller_epoch=s["controller_epoch"],
                leader=s["leader"],
                leader_epoch=s["leader_epoch"],
                isr=tuple(s["isr"]),
                zk_version=s["zk_version"],
                replicas=tuple(s["replicas"]),
                is_new=s["is_new"],
            )
            for s in request["partition_states"]
        }

        async def apply() -> bodies.LeaderAndIsrResponse:
            refused = await self._refuse_unless_from_controller(header, request)
            if refused is not None:
                return {
                    "error_code": refused.code,
                    "error_message": refused.message,
                    "partition_errors": [],
                }
            for broker in request["live_leaders"]:
                self.metadata_cache.note_leader(broker["id"], broker["host"], broker["port"])
            hosted = len(self.replica_manager.replicas.partitions)
            errors = await self.replica_manager.leadership.become_leader_or_follower(
                request["controller_epoch"],
                states,
                {t["topic_name"]: t["topic_id"] for t in request.get("topic_ids", ())},
            )
            if len(self.replica_manager.replicas.partitions) > hosted:
                gc.freeze()  # the new partitions are out of full collections' walk
            return {"error_code": NONE, "partition_errors": _partition_errors(errors)}

        return self._controller_ordered(apply)

    def handle_stop_replica(
        self, header: RequestHeader, request: bodies.StopReplicaRequest
    ) -> Answer[bodies.StopReplicaResponse]:
        stops = [
            (TopicPartition(s["topic_name"], s["partition_index"]), s["delete_partition"])
            for s in request["partition_states"]
        ]

        async def apply() -> bodies.StopReplicaResponse:
            refused = await self._refuse_unless_from_controller(header, request)
            if refused is not None:
                return {
                    "error_code": refused.code,
                    "error_message": refused.message,
                    "partition_errors": [],
                }
            errors = await self.replica_manager.leadership.stop_replicas(
                request["controller_epoch"], stops
            )
            if any(delete for _, delete in stops):
                gc.unfreeze()  # the deleted partitions' objects may be collected
            return {"error_code": NONE, "partition_errors": _partition_errors(errors)}

        return self._controller_ordered(apply)

    def handle_update_metadata(
        self, header: RequestHeader, request: bodies.UpdateMetadataRequest
    ) -> Answer[bodies.UpdateMetadataResponse]:
        async def apply() -> bodies.UpdateMetadataResponse:
            refused = await self._refuse_unless_from_controller(header, request)
            if refused is not None:
                return {"error_code": refused.code, "error_message": refused.message}
            self.replica_manager.leadership.update_metadata(request)
            return {"error_code": NONE}

        return self._controller_ordered(apply)

    async def _refuse_unless_from_controller(
        self, header: RequestHeader, request: ControllerRequest
    ) -> KafkaError | None:
        """None if the controller ZooKeeper names sent ``request``, on its proven
        connection, to this broker's current registration; else the error to answer
        (nothing is changed)."""
        try:
            await self.fence.check(
                header.session,
                request["controller_id"],
                request["controller_epoch"],
                request["broker_epoch"],
            )
        except (
            ClusterAuthorizationFailedError,
            StaleControllerEpochError,
            StaleBrokerEpochError,
        ) as exc:
            return exc
        return None

    def _controller_ordered(self, apply: Callable[[], Awaitable[ResponseT]]) -> Deferred[ResponseT]:
        """Controller requests take effect in arrival order, as Kafka's one-request-at-a-
        time channel guarantees: a pipelined UpdateMetadata must not overtake the
        LeaderAndIsr before it while that one waits for the disk."""
        ticket = self._queue.ticket()
        return Deferred(lambda: self._queue.run(ticket, apply))


class InOrder:
    """Runs async jobs one at a time in the order their tickets were taken.

    A job whose task is cancelled before its turn (its connection closed) gives up its
    ticket, so it never blocks the jobs after it.
    """

    def __init__(self) -> None:
        self._next_ticket = 0
        self._turn = 0
        self._abandoned: set[int] = set()
        self._wakeups: dict[int, trio.Event] = {}

    def ticket(self) -> int:
        ticket = self._next_ticket
        self._next_ticket += 1
        return ticket

    async def run(self, ticket: int, job: Callable[[], Awaitable[ResultT]]) -> ResultT:
        try:
            while self._turn != ticket:
                event = self._wakeups.setdefault(ticket, trio.Event())
                await event.wait()
        except BaseException:
            self._wakeups.pop(ticket, None)
            if self._turn == ticket:  # woken and cancelled at once: pass the turn on
                self._advance()
            else:
                self._abandoned.add(ticket)
            raise
        try:
            return await job()
        finally:
            self._advance()

    def _advance(self) -> None:
        self._turn += 1
        while self._turn in self._abandoned:
            self._abandoned.discard(self._turn)
            self._turn += 1
        event = self._wakeups.pop(self._turn, None)
        if event is not None:
            event.set()


def _partition_errors(
    errors: dict[TopicPartition, int],
) -> list[bodies.LeaderAndIsrResponsePartitionError]:
    """``partition_errors`` of LeaderAndIsr and of StopReplica (the same struct)."""
    return [
        {"topic_name": tp.topic, "partition_index": tp.partition, "error_code": code}
        for tp, code in errors.items()
    ]

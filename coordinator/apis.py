"""CoordinatorApis: the group APIs' handlers, request bodies in, response bodies out.

Bodies are protocol/messages/groups.py's (Kafka's field names); ``install`` registers
the handlers with the broker's RequestDispatcher, which serves them on both listeners.
Requests that wait (JoinGroup until the rebalance completes, SyncGroup until the
assignment is stored, commits and deletions until written with acks=all) answer a
``Deferred``.

FindCoordinator creates ``__consumer_offsets`` on first use, as Kafka does
(broker/cluster/coordinator_locator.py), with ``offsets.topic.replication.factor`` capped by the
brokers alive at that moment. The topic is compacted (``cleanup.policy=compact``), as
Kafka's: the log cleaner keeps each group's latest metadata and each partition's latest
commit, and removes what a tombstone deleted; nothing is ever deleted by age, which
would lose the last commit of a quiet group.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from minibroker.broker.cluster.coordinator_locator import CoordinatorLocator, refused
from minibroker.broker.cluster.metadata_cache import MetadataCache
from minibroker.broker.cluster.topic_auto_creation import CreateTopics
from minibroker.broker.requests.dispatcher import Answer, Deferred, RequestDispatcher
from minibroker.broker.security.authorized_operations import everything, group_operations
from minibroker.coordinator.coordinator import GroupCoordinator, JoinRequest
from minibroker.coordinator.group import Answer as Parked
from minibroker.coordinator.group import Group, GroupState, KeyT, Written
from minibroker.coordinator.offsets_log import TxnProducer
from minibroker.protocol.api import RequestHeader
from minibroker.protocol.errors import (
    NONE,
    CoordinatorLoadInProgressError,
    InvalidRequestError,
    KafkaError,
    UnknownTopicOrPartitionError,
    UnstableOffsetCommitError,
)
from minibroker.protocol.messages import bodies
from minibroker.protocol.messages.form import NO_AUTHORIZED_OPERATIONS
from minibroker.protocol.messages.groups import KEY_TYPE_GROUP
from minibroker.protocol.offsets_topic import OFFSETS_TOPIC, OffsetCommitValue, partition_for
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.storage.log_config import Clock

log = logging.getLogger(__name__)


ResponseT = TypeVar("ResponseT")

OFFSETS_TOPIC_SEGMENT_BYTES = 104857600
"""Kafka's offsets.topic.segment.bytes: smaller than log segments, so that compaction
(once it exists) and loading have less to read."""


class CoordinatorApis:
    def __init__(
        self,
        coordinator: GroupCoordinator,
        metadata_cache: MetadataCache,
        *,
        clock: Clock,
        num_partitions: int,
        replication_factor: int,
        create_topics: CreateTopics | None,
        spawn: Callable[[Callable[[], Awaitable[None]]], None],
    ) -> None:
        """``create_topics`` is None standalone (no ZooKeeper: no offsets topic, so no
        coordinator); ``spawn`` runs the offsets topic's creation in the background
        (broker/cluster/coordinator_locator.py)."""
        self.coordinator = coordinator
        self.metadata_cache = metadata_cache
        self.clock = clock
        self.locators: dict[int, CoordinatorLocator] = {
            KEY_TYPE_GROUP: CoordinatorLocator(
                metadata_cache,
                topic=OFFSETS_TOPIC,
                partition_for=partition_for,
                num_partitions=num_partitions,
                replication_factor=replication_factor,
                configs={
                    "cleanup.policy": "compact",
                    "segment.bytes": str(OFFSETS_TOPIC_SEGMENT_BYTES),
                },
                create_topics=create_topics,
                spawn=spawn,
            )
        }
        """FindCoordinator's key types: the transaction coordinator adds its own."""

    def install(self, dispatcher: RequestDispatcher) -> None:
        dispatcher.register(bodies.FIND_COORDINATOR, self.handle_find_coordinator)
        dispatcher.register(bodies.JOIN_GROUP, self.handle_join_group)
        dispatcher.register(bodies.SYNC_GROUP, self.handle_sync_group)
        dispatcher.register(bodies.HEARTBEAT, self.handle_heartbeat)
        dispatcher.register(bodies.LEAVE_GROUP, self.handle_leave_group)
        dispatcher.register(bodies.OFFSET_COMMIT, self.handle_offset_commit)
        dispatcher.register(bodies.OFFSET_FETCH, self.handle_offset_fetch)
        dispatcher.register(bodies.DESCRIBE_GROUPS, self.handle_describe_groups)
        dispatcher.register(bodies.LIST_GROUPS, self.handle_list_groups)
        dispatcher.register(bodies.DELETE_GROUPS, self.handle_delete_groups)
        dispatcher.register(bodies.OFFSET_DELETE, self.handle_offset_delete)
        dispatcher.register(bodies.TXN_OFFSET_COMMIT, self.handle_txn_offset_commit)

    # -- FindCoordinator -----------------------------------------------------------------------

    def handle_find_coordinator(
        self, header: RequestHeader, request: bodies.FindCoordinatorRequest
    ) -> Answer[bodies.FindCoordinatorResponse]:
        keys = request["coordinator_keys"] or [request["key"]]
        coordinators = [self._coordinator_for(key, request["key_type"]) for key in keys]
        first = coordinators[0]
        return {
            "throttle_time_ms": 0,
            "error_code": first["error_code"],
            "error_message": first["error_message"],
            "node_id": first["node_id"],
            "host": first["host"],
            "port": first["port"],
            "coordinators": coordinators,
        }

    def _coordinator_for(
        self, key: str, key_type: int
    ) -> bodies.FindCoordinatorResponseCoordinator:
        locator = self.locators.get(key_type)
        if locator is None:
            known = ", ".join(str(k) for k in sorted(self.locators))
            return refused(
                key, InvalidRequestError(f"key type {key_type}: only {known} are served")
            )
        return locator.locate(key)

    # -- membership ----------------------------------------------------------------------------

    def handle_join_group(
        self, header: RequestHeader, request: bodies.JoinGroupRequest
    ) -> Answer[bodies.JoinGroupResponse]:
        session = request["session_timeout_ms"]
        rebalance = request["rebalance_timeout_ms"]
        join = JoinRequest(
            group_id=request["group_id"],
            member_id=request["member_id"],
            group_instance_id=request["group_instance_id"],
            client_id=header.client_id or "",
            client_host=_kafka_client_host(header.session.client_host),
            session_timeout_ms=session,
            rebalance_timeout_ms=session if rebalance < 0 else rebalance,
            protocol_type=request["protocol_type"],
            protocols=[(p["name"], p["metadata"]) for p in request["protocols"]],
            require_known_member_id=request["require_known_member_id"],
        )
        return _deferred(self.coordinator.join_group(join))

    def handle_sync_group(
        self, header: RequestHeader, request: bodies.SyncGroupRequest
    ) -> Answer[bodies.SyncGroupResponse]:
        answer = self.coordinator.sync_group(
            request["group_id"],
            request["generation_id"],
            request["member_id"],
            request["group_instance_id"],
            request["protocol_type"],
            request["protocol_name"],
            {a["member_id"]: a["assignment"] for a in request["assignments"]},
        )
        return _deferred(answer)

    def handle_heartbeat(
        self, header: RequestHeader, request: bodies.HeartbeatRequest
    ) -> Answer[bodies.HeartbeatResponse]:
        try:
            self.coordinator.membership.heartbeat(
                request["group_id"],
                request["generation_id"],
                request["member_id"],
                request["group_instance_id"],
            )
        except KafkaError as exc:
            return {"throttle_time_ms": 0, "error_code": exc.code}
        return {"throttle_time_ms": 0, "error_code": NONE}

    def handle_leave_group(
        self, header: RequestHeader, request: bodies.LeaveGroupRequest
    ) -> Answer[bodies.LeaveGroupResponse]:
        leaving = [(m["member_id"], m["group_instance_id"]) for m in request["members"]]
        if not leaving:
            leaving = [(request["member_id"], None)]
        try:
            members = self.coordinator.membership.leave_group(request["group_id"], leaving)
        except KafkaError as exc:
            return {"throttle_time_ms": 0, "error_code": exc.code, "members": []}
        # Kafka v0-2 (one member) answer that member's error at the top.
        top = members[0]["error_code"] if not request["members"] else NONE
        return {"throttle_time_ms": 0, "error_code": top, "members": members}

    # -- offsets -------------------------------------------------------------------------------

    def handle_offset_commit(
        self, header: RequestHeader, request: bodies.OffsetCommitRequest
    ) -> Answer[bodies.OffsetCommitResponse]:
        now = self.clock()
        retention = request["retention_time_ms"]
        offsets = {
            TopicPartition(t["name"], p["partition_index"]): OffsetCommitValue(
                offset=p["committed_offset"],
                metadata=p["committed_metadata"] or "",
                commit_timestamp=now,
                leader_epoch=p["committed_leader_epoch"],
                expire_timestamp=now + retention if retention >= 0 else -1,
            )
            for t in request["topics"]
            for p in t["partitions"]
        }
        unknown = self._drop_unknown(offsets)
        if not offsets:
            return {"throttle_time_ms": 0, "topics": _per_topic(unknown)}
        answer = self.coordinator.offsets.commit_offsets(
            request["group_id"],
            request["generation_id"],
            request["member_id"],
            request["group_instance_id"],
            offsets,
        )

        async def wait() -> bodies.OffsetCommitResponse:
            errors = await _outcome(answer)
            return {"throttle_time_ms": 0, "topics": _per_topic({**errors, **unknown})}

        return Deferred(wait)

    def handle_offset_fetch(
        self, header: RequestHeader, request: bodies.OffsetFetchRequest
    ) -> Answer[bodies.OffsetFetchResponse]:
        asked: list[tuple[str, Sequence[bodies.OffsetFetchRequestGroupTopic] | None]]
        if request["groups"] is not None:
            asked = [(g["group_id"], g["topics"]) for g in request["groups"]]
        elif request["group_id"] is not None:
            asked = [(request["group_id"], request["topics"])]
        else:
            raise InvalidRequestError("OffsetFetch names no group")
        stable = request["require_stable"]
        groups = [self._fetch_group(group_id, topics, stable) for group_id, topics in asked]
        answer: bodies.OffsetFetchResponse = {
            "throttle_time_ms": 0,
            "error_code": NONE,
            "topics": [],
            "groups": groups,
        }
        if request["groups"] is None:
            answer["error_code"] = groups[0]["error_code"]
            answer["topics"] = groups[0]["topics"]
        return answer

    def _fetch_group(
        self,
        group_id: str,
        topics: Sequence[bodies.OffsetFetchRequestGroupTopic] | None,
        require_stable: bool = False,
    ) -> bodies.OffsetFetchResponseGroup:
        """``require_stable`` (KIP-447): a partition an open transaction holds offsets
        of answers UNSTABLE_OFFSET_COMMIT (retriable) instead of its older offset."""
        tps = (
            None
            if topics is None
            else [TopicPartition(t["name"], i) for t in topics for i in t["partition_indexes"]]
        )
        try:
            committed = self.coordinator.offsets.fetch_offsets(group_id, tps)
        except KafkaError as exc:
            failed = [_fetched(tp, None, exc.code) for tp in (tps or [])]
            return {"group_id": group_id, "topics": _grouped(failed), "error_code": exc.code}
        unstable: set[TopicPartition] = set()
        if require_stable:
            unstable = self.coordinator.offsets.unstable_partitions(group_id)
        partitions = [
            _fetched(tp, None, UnstableOffsetCommitError.code)
            if tp in unstable
            else _fetched(tp, value, NONE)
            for tp, value in committed.items()
        ]
        return {"group_id": group_id, "topics": _grouped(partitions), "error_code": NONE}

    # -- transactions --------------------------------------------------------------------------

    def _drop_unknown(
        self, offsets: dict[TopicPartition, OffsetCommitValue]
    ) -> dict[TopicPartition, int]:
        """Take the partitions the cluster does not have out of ``offsets``; their
        UNKNOWN_TOPIC_OR_PARTITION codes. As Kafka: they are answered at once and never
        stored, so a typo cannot leave offsets for a topic nobody can read."""
        unknown = {
            tp: UnknownTopicOrPartitionError.code
            for tp in offsets
            if self.metadata_cache.partition(tp) is None
        }
        for tp in unknown:
            del offsets[tp]
        return unknown

    def handle_txn_offset_commit(
        self, header: RequestHeader, request: bodies.TxnOffsetCommitRequest
    ) -> Answer[bodies.TxnOffsetCommitResponse]:
        """A transactional producer's offsets for its group (KIP-98, KIP-447)."""
        now = self.clock()
        offsets = {
            TopicPartition(t["name"], p["partition_index"]): OffsetCommitValue(
                offset=p["committed_offset"],
                metadata=p["committed_metadata"] or "",
                commit_timestamp=now,
                leader_epoch=p["committed_leader_epoch"],
            )
            for t in request["topics"]
            for p in t["partitions"]
        }
        unknown = self._drop_unknown(offsets)
        if not offsets:
            return {"throttle_time_ms": 0, "topics": _per_topic(unknown)}
        answer = self.coordinator.offsets.commit_txn_offsets(
            request["group_id"],
            TxnProducer(request["producer_id"], request["producer_epoch"]),
            request["generation_id"],
            request["member_id"],
            request["group_instance_id"],
            offsets,
        )

        async def wait() -> bodies.TxnOffsetCommitResponse:
            errors = await _outcome(answer)
            return {"throttle_time_ms": 0, "topics": _per_topic({**errors, **unknown})}

        return Deferred(wait)

    # -- administration ------------------------------------------------------------------------

    def handle_describe_groups(
        self, header: RequestHeader, request: bodies.DescribeGroupsRequest
    ) -> Answer[bodies.DescribeGroupsResponse]:
        asked = request["include_authorized_operations"]
        return {
            "throttle_time_ms": 0,
            "groups": [
                self._describe(group_id)
                | {"authorized_operations": group_operations(asked, group_id, everything)}
                for group_id in request["groups"]
            ],
        }

    def _describe(self, group_id: str) -> bodies.DescribeGroupsResponseGroup:
        try:
            group = self.coordinator.offsets.describe_group(group_id)
        except KafkaError as exc:
            return _described(group_id, None, exc.code)
        return _described(group_id, group, NONE)

    def handle_list_groups(
        self, header: RequestHeader, request: bodies.ListGroupsRequest
    ) -> Answer[bodies.ListGroupsResponse]:
        wanted = {s.lower() for s in request["states_filter"]}
        groups: list[bodies.ListGroupsResponseGroup] = [
            {
                "group_id": g.group_id,
                "protocol_type": g.protocol_type or "",
                "group_state": g.state.value,
            }
            for g in self.coordinator.offsets.list_groups()
            if not wanted or g.state.value.lower() in wanted
        ]
        # Kafka answers COORDINATOR_LOAD_IN_PROGRESS while any of its partitions loads:
        # the list would miss that partition's groups.
        code = CoordinatorLoadInProgressError.code if self.coordinator.manager.loading else NONE
        return {"throttle_time_ms": 0, "error_code": code, "groups": groups}

    def handle_delete_groups(
        self, header: RequestHeader, request: bodies.DeleteGroupsRequest
    ) -> Answer[bodies.DeleteGroupsResponse]:
        answer = self.coordinator.offsets.delete_groups(request["groups_names"])

        async def wait() -> bodies.DeleteGroupsResponse:
            errors = await _outcome(answer)
            return {
                "throttle_time_ms": 0,
                "results": [{"group_id": g, "error_code": c} for g, c in errors.items()],
            }

        return Deferred(wait)

    def handle_offset_delete(
        self, header: RequestHeader, request: bodies.OffsetDeleteRequest
    ) -> Answer[bodies.OffsetDeleteResponse]:
        tps = [
            TopicPartition(t["name"], p["partition_index"])
            for t in request["topics"]
            for p in t["partitions"]
        ]
        try:
            answer = self.coordinator.offsets.delete_offsets(request["group_id"], tps)
        except KafkaError as exc:
            return {"throttle_time_ms": 0, "error_code": exc.code, "topics": []}

        async def wait() -> bodies.OffsetDeleteResponse:
            errors = await _outcome(answer)
            return {"throttle_time_ms": 0, "error_code": NONE, "topics": _per_topic(errors)}

        return Deferred(wait)


# -- helpers -----------------------------------------------------------------------------------


def _deferred(parked: Parked[ResponseT]) -> Answer[ResponseT]:
    """An answer already set is returned now; else the request waits for it."""
    ready = parked.get()
    return ready if ready is not None else Deferred(parked.wait)


async def _outcome(parked: Parked[Written[KeyT]]) -> dict[KeyT, int]:
    """The error codes of a detached write (GroupCoordinator.detached); the error that
    failed it as a whole re-raised."""
    written = await parked.wait()
    error = written.get("_error")
    if isinstance(error, KafkaError):
        raise error
    return written["errors"]


def _per_topic(errors: dict[TopicPartition, int]) -> list[bodies.OffsetCommitResponseTopic]:
    """Error codes by topic, as OffsetCommit and OffsetDelete (same shape) answer them."""
    topics: dict[str, list[bodies.OffsetCommitResponseTopicPartition]] = {}
    for tp, code in errors.items():
        topics.setdefault(tp.topic, []).append(
            {"partition_index": tp.partition, "error_code": code}
        )
    return [{"name": name, "partitions": parts} for name, parts in topics.items()]


def _fetched(
    tp: TopicPartition, value: OffsetCommitValue | None, code: int
) -> tuple[str, bodies.OffsetFetchResponseGroupTopicPartition]:
    return tp.topic, {
        "partition_index": tp.partition,
        "committed_offset": -1 if value is None else value.offset,
        "committed_leader_epoch": -1 if value is None else value.leader_epoch,
        "metadata": None if value is None else value.metadata,
        "error_code": code,
    }


def _grouped(
    partitions: list[tuple[str, bodies.OffsetFetchResponseGroupTopicPartition]],
) -> list[bodies.OffsetFetchResponseGroupTopic]:
    topics: dict[str, list[bodies.OffsetFetchResponseGroupTopicPartition]] = {}
    for topic, partition in partitions:
        topics.setdefault(topic, []).append(partition)
    return [{"name": name, "partitions": parts} for name, parts in topics.items()]


def _described(group_id: str, group: Group | None, code: int) -> bodies.DescribeGroupsResponseGroup:
    """A DescribeGroups entry. As Kafka's GroupMetadata.summary: members' metadata,
    assignments and the protocol only while the group is Stable (otherwise they are
    about to change); an unknown group is Dead with no members."""
    if group is None:
        return {
            "error_code": code,
            "group_id": group_id,
            "group_state": GroupState.DEAD.value,
            "protocol_type": "",
            "protocol_data": "",
            "members": [],
            "authorized_operations": NO_AUTHORIZED_OPERATIONS,
        }
    stable = group.state is GroupState.STABLE
    protocol = group.protocol_name if stable else None
    return {
        "error_code": code,
        "group_id": group_id,
        "group_state": group.state.value,
        "protocol_type": group.protocol_type or "",
        "protocol_data": protocol or "",
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "member_metadata": next(
                    (meta for name, meta in m.protocols if name == protocol), b""
                ),
                "member_assignment": m.assignment if stable else b"",
            }
            for m in group.members.values()
        ],
        "authorized_operations": NO_AUTHORIZED_OPERATIONS,
    }


def _kafka_client_host(host: str) -> str:
    """The member's address as Kafka reports it (Java's InetAddress text: "/10.0.0.7")."""
    return f"/{host}" if host else ""

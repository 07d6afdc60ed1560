"""Admin for consumer groups: list, describe (members, committed offsets, lag), alter
and delete committed offsets, delete groups. ``Admin`` (client/admin.py) owns one and
delegates these methods to it.

Every broker coordinates some groups, so ListGroups asks each of them; the other
requests go to the group's coordinator (client/group_coordinator.py), found again when
it moves. An admin commits offsets as a non-member (generation -1, member id ""),
which the coordinator accepts only while the group has no members, as in Kafka.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import trio

from minibroker.client.errors import raise_if_error
from minibroker.client.group_coordinator import (
    RETRY_BACKOFF_S,
    RETRY_LATER,
    CoordinatorLink,
    commit_offsets,
    fetch_committed,
)
from minibroker.client.metadata import ClusterClient
from minibroker.client.offsets import list_offsets
from minibroker.protocol.api import ApiKey
from minibroker.protocol.consumer_protocol import (
    PROTOCOL_TYPE,
    ConsumerProtocolError,
    decode_assignment,
)
from minibroker.protocol.errors import KafkaError, NetworkError, RequestTimedOutError
from minibroker.protocol.messages import bodies
from minibroker.protocol.messages.bodies import ResponseT, Route

TopicPartition = tuple[str, int]
LATEST = -1  # ListOffsets timestamp: the log end (high watermark)


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    state: str
    protocol_type: str


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str  # the assignor the group uses ("" while it has none)
    members: tuple[MemberDescription, ...]
    coordinator: int


@dataclass(frozen=True, slots=True)
class PartitionLag:
    topic: str
    partition: int
    committed: int | None
    log_end: int | None
    lag: int | None
    member: MemberDescription | None


class GroupAdmin:
    """The consumer-group requests of ``Admin``, over its ``cluster`` client."""

    def __init__(self, cluster: ClusterClient, request_timeout_ms: int) -> None:
        self.cluster = cluster
        self.request_timeout_ms = request_timeout_ms

    @property
    def _timeout_s(self) -> float:
        return self.request_timeout_ms / 1000

    @contextlib.asynccontextmanager
    async def _link(self, group_id: str) -> AsyncIterator[CoordinatorLink]:
        link = CoordinatorLink(self.cluster, group_id)
        try:
            yield link
        finally:
            with trio.CancelScope(shield=True):
                await link.aclose()

    async def list_groups(self) -> list[GroupListing]:
        """Every group of every broker, sorted by id."""
        meta = await self.cluster.refresh()
        found: dict[str, GroupListing] = {}
        for node in sorted(meta.brokers):
            body: bodies.ListGroupsRequestBody = {"states_filter": []}
            response: bodies.ListGroupsResponse = await self.cluster.request(
                node, ApiKey.LIST_GROUPS, body
            )
            for group in response.get("groups", ()):
                found[group["group_id"]] = GroupListing(
                    group["group_id"], group.get("group_state", ""), group["protocol_type"]
                )
        return [found[g] for g in sorted(found)]

    async def _ask_coordinator(
        self, group_id: str, route: Route[Any, ResponseT], body: Mapping[str, Any]
    ) -> tuple[ResponseT, int]:
        """One request to the group's coordinator, retried while it moves or loads:
        the response (typed as ``route`` declares it) and the node id of the
        coordinator that answered."""
        async with self._link(group_id) as link:
            with trio.fail_after(self._timeout_s):
                while True:
                    try:
                        # read untyped here: each API puts its error codes elsewhere
                        answer: Any = await link.request(ApiKey(route.api_key), body)
                    except (NetworkError, RequestTimedOutError):
                        await trio.sleep(RETRY_BACKOFF_S)
                        continue
                    entries = answer.get("groups") or answer.get("results") or [answer]
                    code = max((e.get("error_code", 0) for e in entries), default=0)
                    if code and (link.moved(code) or code in RETRY_LATER):
                        await trio.sleep(RETRY_BACKOFF_S)
                        continue
                    assert link.coordinator is not None
                    return answer, link.coordinator.node_id

    async def describe_group(self, group_id: str) -> GroupDescription:
        """State and members (with their assignments) of a group; an unknown group is
        described as state "Dead" with no members, as Kafka describes it."""
        body: bodies.DescribeGroupsRequestBody = {
            "groups": [group_id],
            "include_authorized_operations": False,
        }
        response, node = await self._ask_coordinator(group_id, bodies.DESCRIBE_GROUPS, body)
        group = next(g for g in response["groups"] if g["group_id"] == group_id)
        raise_if_error(group.get("error_code", 0), f"group {group_id!r}")
        members = tuple(
            MemberDescription(
                m["member_id"],
                m.get("group_instance_id"),
                m["client_id"],
                m["client_host"],
                _assignment(group["protocol_type"], m["member_assignment"]),
            )
            for m in group["members"]
        )
        return GroupDescription(
            group_id,
            group["group_state"],
            group["protocol_type"],
            group["protocol_data"],
            members,
            node,
        )

    async def list_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, int | None]:
        """Committed offsets (all the group has, or of ``partitions``: None if none)."""
        async with self._link(group_id) as link:
            return await fetch_committed(link, partitions, timeout_s=self._timeout_s)

    async def alter_group_offsets(self, group_id: str, offsets: dict[TopicPartition, int]) -> None:
        """Set committed offsets; the group must have no members (else UNKNOWN_MEMBER_ID)."""
        async with self._link(group_id) as link:
            await commit_offsets(link, offsets, timeout_s=self._timeout_s)

    async def delete_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> None:
        """Forget committed offsets (refused for a topic a member still consumes)."""
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(partitions):
            by_topic.setdefault(topic, []).append(partition)
        body: bodies.OffsetDeleteRequestBody = {
            "group_id": group_id,
            "topics": [
                {"name": t, "partitions": [{"partition_index": p} for p in ps]}
                for t, ps in by_topic.items()
            ],
        }
        response, _ = await self._ask_coordinator(group_id, bodies.OFFSET_DELETE, body)
        raise_if_error(response.get("error_code", 0), f"group {group_id!r}")
        for answered in response.get("topics", ()):
            for part in answered["partitions"]:
                raise_if_error(
                    part.get("error_code", 0), f"{answered['name']}-{part['partition_index']}"
                )

    async def delete_groups(self, group_ids: Iterable[str]) -> None:
        """Delete groups and their offsets; refused (NON_EMPTY_GROUP) while one has members."""
        for group_id in group_ids:
            body: bodies.DeleteGroupsRequestBody = {"groups_names": [group_id]}
            response, _ = await self._ask_coordinator(group_id, bodies.DELETE_GROUPS, body)
            for result in response.get("results", ()):
                raise_if_error(result.get("error_code", 0), f"group {result['group_id']!r}")

    async def log_end_offsets(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int]:
        found = await list_offsets(
            self.cluster, dict.fromkeys(partitions, LATEST), timeout_s=self._timeout_s
        )
        return {tp: offset for tp, (offset, _) in found.items()}

    async def describe_group_offsets(
        self, group_id: str
    ) -> tuple[GroupDescription, list[PartitionLag]]:
        """Per partition the group has an offset for or a member reads: committed
        offset, log end, lag and the member reading it (kafka-consumer-groups
        --describe)."""
        description = await self.describe_group(group_id)
        committed = await self.list_group_offsets(group_id)
        owner = {tp: m for m in description.members for tp in m.assignment}
        partitions = sorted(set(committed) | set(owner))
        try:
            ends = await self.log_end_offsets(partitions) if partitions else {}
        except KafkaError as exc:
            if exc.retriable:
                raise
            ends = {}  # e.g. a topic deleted since: show what is known
        rows = []
        for tp in partitions:
            offset, end = committed.get(tp), ends.get(tp)
            lag = end - offset if offset is not None and end is not None else None
            rows.append(PartitionLag(tp[0], tp[1], offset, end, lag, owner.get(tp)))
        return description, rows


def _assignment(protocol_type: str, raw: bytes) -> tuple[TopicPartition, ...]:
    if protocol_type != PROTOCOL_TYPE or not raw:
        return ()
    try:
        return tuple(decode_assignment(raw).partitions())
    except ConsumerProtocolError:
        return ()

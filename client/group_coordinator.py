"""Talking to a group's coordinator: finding it, and committing and fetching offsets.

A group's coordinator is one broker (the leader of the group's partition of
``__consumer_offsets``); FindCoordinator, asked of any broker, names it. A
:class:`CoordinatorLink` remembers that answer and sends the group's requests there.
The coordinator moves when that partition's leadership moves: a response saying
NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE, a broken connection or a timeout makes
the link forget it (``mark_unknown``), and the next request asks FindCoordinator again.

``fetch_committed`` and ``commit_offsets`` are the two offset requests both the
consumer and the admin client send, retried through coordinator moves until their
deadline. Group error codes are compared as numbers here (the constants below); errors
handed to callers go through ``wire_error`` so their message names the error.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, overload

import trio

from minibroker.client.errors import wire_error
from minibroker.client.metadata import ClusterClient
from minibroker.net.connection import Connection
from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    KafkaError,
    MemberIdRequiredError,
    MinibrokerError,
    NetworkError,
    NotCoordinatorError,
    RebalanceInProgressError,
    RequestTimedOutError,
    UnknownMemberIdError,
    UnknownTopicOrPartitionError,
    UnstableOffsetCommitError,
    error_for_code,
)
from minibroker.protocol.messages.bodies import ResponseT, Route
from minibroker.protocol.messages.groups import KEY_TYPE_GROUP

TopicPartition = tuple[str, int]

# The group APIs' error codes, by name.
UNKNOWN_TOPIC_OR_PARTITION = UnknownTopicOrPartitionError.code
REQUEST_TIMED_OUT = RequestTimedOutError.code
COORDINATOR_LOAD_IN_PROGRESS = CoordinatorLoadInProgressError.code
COORDINATOR_NOT_AVAILABLE = CoordinatorNotAvailableError.code
NOT_COORDINATOR = NotCoordinatorError.code
ILLEGAL_GENERATION = IllegalGenerationError.code
INCONSISTENT_GROUP_PROTOCOL = InconsistentGroupProtocolError.code
UNKNOWN_MEMBER_ID = UnknownMemberIdError.code
REBALANCE_IN_PROGRESS = RebalanceInProgressError.code
MEMBER_ID_REQUIRED = MemberIdRequiredError.code
FENCED_INSTANCE_ID = FencedInstanceIdError.code
UNSTABLE_OFFSET_COMMIT = UnstableOffsetCommitError.code

COORDINATOR_MOVED = frozenset({COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR})
RETRY_LATER = frozenset({COORDINATOR_LOAD_IN_PROGRESS, REQUEST_TIMED_OUT, UNSTABLE_OFFSET_COMMIT})
FENCED = frozenset(
    {ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS, FENCED_INSTANCE_ID}
)
"""Codes that say this member's generation is over: it must rejoin the group."""

RETRY_BACKOFF_S = 0.1  # Kafka's retry.backoff.ms: between attempts at a moving coordinator
NO_GENERATION = -1  # generation and member id an admin commits with (group must be empty)
NO_MEMBER = ""


class CommitFailedError(MinibrokerError):
    """The group rebalanced (or this member was fenced), so the commit was refused:
    the partitions may belong to another member now. ``code`` is the wire error."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class Coordinator:
    node_id: int
    host: str
    port: int


class CoordinatorLink:
    """The coordinator of one group, found on demand and forgotten when it moves.

    Group requests travel on a connection of their own, as Kafka's clients do: on the
    broker connection they would queue behind a consumer's long-polling Fetch (answers
    leave a connection in request order), so a heartbeat or a JoinGroup could wait up
    to fetch.max.wait.ms for nothing. ``aclose`` closes that connection."""

    def __init__(
        self, cluster: ClusterClient, group_id: str, *, key_type: int = KEY_TYPE_GROUP
    ) -> None:
        """``key_type``: FindCoordinator's (KEY_TYPE_TRANSACTION: ``group_id`` is a
        transactional id, the link goes to its transaction coordinator)."""
        self.cluster = cluster
        self.group_id = group_id
        self.key_type = key_type
        self.coordinator: Coordinator | None = None
        self._connection: Connection | None = None
        self._connecting = trio.Lock()

    def mark_unknown(self) -> None:
        self.coordinator = None

    async def aclose(self) -> None:
        conn, self._connection = self._connection, None
        if conn is not None:
            await conn.aclose()

    async def _connect(self, coordinator: Coordinator) -> Connection:
        async with self._connecting:
            conn = self._connection
            address = (coordinator.host, coordinator.port)
            if conn is not None and conn.is_usable and (conn.host, conn.port) == address:
                return conn
            await self.aclose()
            conn = Connection(
                coordinator.host,
                coordinator.port,
                client_id=self.cluster.client_id,
                connect_timeout=self.cluster.connect_timeout_s,
                request_timeout=self.cluster.request_timeout_s,
            )
            await conn.connect()
            self._connection = conn
            return conn

    async def find(self) -> Coordinator:
        """The coordinator, asking FindCoordinator until a broker names one."""
        while self.coordinator is None:
            body = {"key_type": self.key_type, "coordinator_keys": [self.group_id]}
            try:
                response = await self.cluster.request_any(ApiKey.FIND_COORDINATOR, body)
            except KafkaError as exc:
                if not exc.retriable and exc.code not in COORDINATOR_MOVED | RETRY_LATER:
                    raise
                await trio.sleep(RETRY_BACKOFF_S)
                continue
            entries = response.get("coordinators") or [response]  # v4 batches; v0-3 do not
            entry: dict[str, Any] = next(
                (e for e in entries if e.get("key", self.group_id) == self.group_id), {}
            )
            code = entry.get("error_code", 0)
            if code == 0 and entry.get("node_id", -1) >= 0:
                self.coordinator = Coordinator(entry["node_id"], entry["host"], entry["port"])
            elif code and code not in COORDINATOR_MOVED | RETRY_LATER:
                raise wire_error(code, f"group {self.group_id!r}", entry.get("error_message"))
            else:
                await trio.sleep(RETRY_BACKOFF_S)
        return self.coordinator

    @overload
    async def request(
        self,
        api_key: Route[Any, ResponseT],
        body: Mapping[str, Any],
        *,
        timeout: float | None = None,
    ) -> ResponseT: ...

    @overload
    async def request(
        self, api_key: ApiKey, body: Mapping[str, Any], *, timeout: float | None = None
    ) -> dict[str, Any]: ...

    async def request(
        self,
        api_key: ApiKey | Route[Any, Any],
        body: Mapping[str, Any],
        *,
        timeout: float | None = None,
    ) -> Any:
        """One request to the coordinator. A broken connection or a timeout forgets the
        coordinator and raises (NetworkError / RequestTimedOutError); error codes in the
        response are the caller's to read (``moved`` says which ones mean "ask again").
        Given a route (``bodies.DESCRIBE_TRANSACTIONS``) rather than an API key, the
        answer is typed as the route declares it (protocol/messages/bodies.py)."""
        key = api_key if isinstance(api_key, ApiKey) else ApiKey(api_key.api_key)
        coordinator = await self.find()
        try:
            conn = await self._connect(coordinator)
            response: dict[str, Any] = await conn.request(key, body, timeout=timeout)
        except (NetworkError, RequestTimedOutError):
            self.mark_unknown()
            await self.aclose()
            raise
        return response

    def moved(self, code: int) -> bool:
        """True (and the coordinator forgotten) if ``code`` says to find it again."""
        if code in COORDINATOR_MOVED:
            self.mark_unknown()
            return True
        return False


def _partition_list(tps: Iterable[TopicPartition]) -> dict[str, list[int]]:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(tps):
        by_topic.setdefault(topic, []).append(partition)
    return by_topic


async def fetch_committed(
    link: CoordinatorLink, tps: Iterable[TopicPartition] | None, *, timeout_s: float
) -> dict[TopicPartition, int | None]:
    """Committed offsets of the group; ``tps=None`` means every partition it has one for
    (then only those are returned). A partition without a committed offset maps to None."""
    wanted = None if tps is None else list(tps)
    topics = (
        None
        if wanted is None
        else [{"name": t, "partition_indexes": ps} for t, ps in _partition_list(wanted).items()]
    )
    body = {"groups": [{"group_id": link.group_id, "topics": topics}], "require_stable": True}
    with trio.fail_after(timeout_s):
        while True:
            try:
                response = await link.request(ApiKey.OFFSET_FETCH, body)
            except (NetworkError, RequestTimedOutError):
                await trio.sleep(RETRY_BACKOFF_S)
                continue
            result = _read_offset_fetch(link, response, wanted)
            if result is not None:
                return result
            await trio.sleep(RETRY_BACKOFF_S)


def _read_offset_fetch(
    link: CoordinatorLink, response: dict[str, Any], wanted: list[TopicPartition] | None
) -> dict[TopicPartition, int | None] | None:
    """The offsets, or None to ask again (coordinator moved, loading, unstable)."""
    groups = response.get("groups")
    group = next((g for g in groups if g["group_id"] == link.group_id), {}) if groups else response
    code = group.get("error_code", 0) or response.get("error_code", 0)
    if code:
        if link.moved(code) or code in RETRY_LATER:
            return None
        raise wire_error(code, f"group {link.group_id!r}", "fetching committed offsets")
    found: dict[TopicPartition, int | None] = {} if wanted is None else dict.fromkeys(wanted, None)
    for topic in group.get("topics", ()):
        for part in topic["partitions"]:
            tp = (topic["name"], part["partition_index"])
            code = part.get("error_code", 0)
            if code in RETRY_LATER or link.moved(code):
                return None
            if code and code != UNKNOWN_TOPIC_OR_PARTITION:
                raise wire_error(code, f"{tp[0]}-{tp[1]}", "fetching committed offset")
            offset = part.get("committed_offset", -1)
            if wanted is None or tp in found:
                found[tp] = offset if offset >= 0 else None
    return found


async def commit_offsets(
    link: CoordinatorLink,
    offsets: dict[TopicPartition, int],
    *,
    generation_id: int = NO_GENERATION,
    member_id: str = NO_MEMBER,
    group_instance_id: str | None = None,
    timeout_s: float,
) -> None:
    """Commit ``offsets`` (the next offset to read, per partition) for the group.

    Retried through coordinator moves until ``timeout_s``; a fenced generation raises
    CommitFailedError, any other refusal its Kafka error naming the partition."""
    pending = dict(offsets)
    with trio.fail_after(timeout_s):
        while pending:
            body = {
                "group_id": link.group_id,
                "generation_id": generation_id,
                "member_id": member_id,
                "group_instance_id": group_instance_id,
                "topics": [
                    {
                        "name": topic,
                        "partitions": [
                            {
                                "partition_index": p,
                                "committed_offset": pending[(topic, p)],
                                "committed_leader_epoch": -1,
                                "committed_metadata": "",
                            }
                            for p in ps
                        ],
                    }
                    for topic, ps in _partition_list(pending).items()
                ],
            }
            try:
                response = await link.request(ApiKey.OFFSET_COMMIT, body)
            except (NetworkError, RequestTimedOutError):
                await trio.sleep(RETRY_BACKOFF_S)
                continue
            if _read_offset_commit(link, response, pending):
                await trio.sleep(RETRY_BACKOFF_S)


def _read_offset_commit(
    link: CoordinatorLink, response: dict[str, Any], pending: dict[TopicPartition, int]
) -> bool:
    """Drop the committed partitions from ``pending``; True if some must be retried."""
    retry = False
    top = response.get("error_code", 0)
    for topic in response.get("topics", ()):
        for part in topic["partitions"]:
            tp = (topic["name"], part["partition_index"])
            code = part.get("error_code", 0) or top
            if code == 0:
                pending.pop(tp, None)
            elif link.moved(code) or code in RETRY_LATER:
                retry = True
            else:
                _raise_commit_error(link, code, f"{tp[0]}-{tp[1]}")
    if top and pending and not retry:
        if link.moved(top) or top in RETRY_LATER:
            return True
        _raise_commit_error(link, top, f"group {link.group_id!r}")
    return retry


def _raise_commit_error(link: CoordinatorLink, code: int, what: str) -> None:
    if code in FENCED:
        raise CommitFailedError(
            f"group {link.group_id!r}: commit refused with {error_for_code(code).name}: the "
            "group rebalanced and the partitions may belong to another member now",
            code,
        )
    raise wire_error(code, what, "committing offsets")

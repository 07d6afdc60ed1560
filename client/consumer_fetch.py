"""The Consumer's fetching side: one Fetch in flight per broker, position resets, and
what each Fetch answer does to a partition's state.

How this works. The fetch manager task (``_fetch_manager``) keeps ONE Fetch in flight
per broker, covering every assigned partition that broker leads whose buffered bytes
are below ``max_partition_fetch_bytes``; it wakes whenever something changes (an answer
arrived, ``poll`` freed buffer space, a seek) and plans again. The task of a Fetch just
answered sends that broker's next one itself, at once (``_plan_fetches`` again, for its
node): that way the next answer is on its way while ``poll`` decodes this one. A partition with no
position is first reset with ListOffsets as ``auto_offset_reset`` says. An answer
whose partition was sought since it was asked for (its ``generation`` moved on) is
dropped.

Leader changes are followed transparently: NOT_LEADER_OR_FOLLOWER, a fenced or unknown
leader epoch, an unknown partition or a lost connection ask for fresh metadata and the
partition is fetched from its new leader; nothing is returned twice or skipped because
the position only moves when ``poll`` hands records out. OFFSET_OUT_OF_RANGE resets the
position as ``auto_offset_reset`` says ("earliest", "latest", or "none" to raise).

``FetchMethods`` is inherited by ``Consumer`` (client/consumer.py), which owns the state
these methods read and write.
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import trio

from minibroker.client.errors import wire_error
from minibroker.client.metadata import ClusterClient, TopicInfo
from minibroker.client.offsets import list_offsets
from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import KafkaError, OffsetOutOfRangeError, error_for_code
from minibroker.protocol.records import iter_headers
from minibroker.protocol.records.isolation import kept_batches, needs_filtering

EARLIEST = -2  # ListOffsets timestamp meaning "log start offset"
LATEST = -1  # ListOffsets timestamp meaning "log end offset (high watermark)"
FETCH_MAX_BYTES = 52_428_800  # Kafka's fetch.max.bytes: one whole response
RETRY_BACKOFF_S = 0.1  # between attempts when a partition has no leader
RESETTING = -1  # position of a partition whose offset is being looked up

TopicPartition = tuple[str, int]


READ_COMMITTED = 1
"""Fetch's and ListOffsets' isolation_level for a read_committed consumer."""


class Fetched(NamedTuple):
    """One fetched chunk of a partition, as buffered for ``poll``."""

    records: bytes
    """Its record batches, aborted and control batches already taken out (may be empty)."""
    generation: int
    end: int
    """The offset after its last batch, control or aborted ones included: once the
    application has every record before it, its position moves there (as the Java
    consumer's does), so a transaction's marker at a log's end leaves no lag of 1."""


@dataclass(slots=True)
class TopicPartitionState:
    position: int | None = None  # None: reset with auto_offset_reset before fetching
    fetch_offset: int | None = None
    generation: int = 0
    buffered: deque[Fetched] = field(default_factory=deque)
    buffered_bytes: int = 0
    high_watermark: int = -1
    error: KafkaError | None = None  # raised by the next poll


class FetchMethods:
    """The Consumer's fetching methods (the Consumer inherits them and owns the state)."""

    cluster: ClusterClient
    auto_offset_reset: str
    max_partition_fetch_bytes: int
    fetch_max_wait_ms: int
    fetch_min_bytes: int
    request_timeout_s: float
    isolation_level: int
    _states: dict[TopicPartition, TopicPartitionState]
    _generations: itertools.count[int]
    _in_flight: set[int]
    _wakeup: trio.Event
    _data: trio.Event

    async def _fetch_manager(self, nursery: trio.Nursery) -> None:
        while True:
            self._wakeup = trio.Event()
            by_node, to_reset, missing_leader = self._plan_fetches()
            if to_reset:
                nursery.start_soon(self._reset_positions, to_reset)
            if missing_leader:
                self.cluster.request_update()
            for node, tps in by_node.items():
                self._in_flight.add(node)
                nursery.start_soon(self._fetch, node, tps)
            with trio.move_on_after(RETRY_BACKOFF_S if missing_leader else math.inf):
                await self._wakeup.wait()

    def _plan_fetches(
        self, continuing: int | None = None
    ) -> tuple[dict[int, list[TopicPartition]], list[TopicPartition], bool]:
        """What to fetch now: the partitions of each leader with no Fetch in flight
        (``continuing``: the node whose Fetch was just answered, which may ask again at
        once), those to reset first, and whether a leader is missing."""
        meta = self.cluster.metadata
        by_node: dict[int, list[TopicPartition]] = {}
        to_reset: list[TopicPartition] = []
        missing_leader = False
        for tp, state in self._states.items():
            if state.error is None and self._refused(meta.topics.get(tp[0]), state):
                continue
            if state.position is None:
                to_reset.append(tp)
                continue
            if state.position == RESETTING:
                continue  # a ListOffsets for it is on its way
            if state.buffered_bytes >= self.max_partition_fetch_bytes or state.error:
                continue
            leader = meta.leader(*tp)
            if leader < 0 or leader not in meta.brokers:
                missing_leader = True
            elif leader == continuing or leader not in self._in_flight:
                by_node.setdefault(leader, []).append(tp)
        return by_node, to_reset, missing_leader

    def _refused(self, info: TopicInfo | None, state: TopicPartitionState) -> bool:
        """Whether the metadata refuses the partition's topic for good (an ACL:
        TOPIC_AUTHORIZATION_FAILED): then that is the next poll's error, at once, rather
        than a wait for a leader that will never be named."""
        if info is None or not info.error_code:
            return False
        error = wire_error(info.error_code, f"topic {info.name!r}")
        if error.retriable:
            return False
        state.error = error
        self._data.set()
        return True

    async def _reset_positions(self, tps: list[TopicPartition]) -> None:
        # A rebalance may have removed some since the reset was planned, and a seek may
        # have given others a position (which a reset must not overwrite).
        tps = [tp for tp in tps if tp in self._states and self._states[tp].position is None]
        if not tps:
            return
        if self.auto_offset_reset == "none":
            for tp in tps:
                self._states[tp].error = OffsetOutOfRangeError(
                    f"{tp[0]}-{tp[1]}: OFFSET_OUT_OF_RANGE (no position and auto_offset_reset "
                    "is none)"
                )
            self._data.set()
            return
        timestamp = EARLIEST if self.auto_offset_reset == "earliest" else LATEST
        for tp in tps:  # mark as being reset so the manager does not start twice
            self._states[tp].position = self._states[tp].fetch_offset = RESETTING
        try:
            found = await self._list_offsets(dict.fromkeys(tps, timestamp))
        except KafkaError:
            found = {}
            await trio.sleep(RETRY_BACKOFF_S)
        for tp in tps:
            state = self._states.get(tp)
            if state is not None and state.position == RESETTING:
                if tp in found:
                    state.position = state.fetch_offset = found[tp][0]
                else:
                    state.position = state.fetch_offset = None
        self._wakeup.set()

    async def _fetch(self, node: int, tps: list[TopicPartition]) -> None:
        """Fetches from ``node`` while it leads partitions that want data: the next one
        is sent from here as soon as an answer is buffered, before ``poll`` decodes that
        answer (a turn of the manager would start it only once ``poll`` has yielded, so
        after the decode: the broker's work and the transfer would never overlap it)."""
        try:
            while tps:
                response = await self._fetch_once(node, tps)
                if response is None:
                    return
                self._wakeup.set()  # the manager looks at the other nodes and the resets
                # A chunk of up to max_partition_fetch_bytes is now buffered per partition;
                # those below it (every one, for an answer short of it) ask for more.
                tps = self._plan_fetches(continuing=node)[0].get(node, [])
        finally:
            self._in_flight.discard(node)
            self._wakeup.set()

    async def _fetch_once(self, node: int, tps: list[TopicPartition]) -> dict[str, Any] | None:
        """One Fetch of ``tps`` from ``node``, its answer buffered; returns the answer
        (None: nothing was asked, or it failed and was backed off from)."""
        # A rebalance may have taken partitions away since this fetch was planned.
        tps = [tp for tp in tps if tp in self._states]
        if not tps:
            return None
        generations = {tp: self._states[tp].generation for tp in tps}
        topics: dict[str, list[dict[str, Any]]] = {}
        for tp in tps:
            topics.setdefault(tp[0], []).append(
                {
                    "partition": tp[1],
                    "current_leader_epoch": -1,
                    "fetch_offset": self._states[tp].fetch_offset,
                    "last_fetched_epoch": -1,
                    "log_start_offset": -1,
                    "partition_max_bytes": self.max_partition_fetch_bytes,
                }
            )
        body = {
            "replica_id": -1,
            "max_wait_ms": self.fetch_max_wait_ms,
            "min_bytes": self.fetch_min_bytes,
            "max_bytes": FETCH_MAX_BYTES,
            "isolation_level": self.isolation_level,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
        }
        try:
            timeout = self.request_timeout_s + self.fetch_max_wait_ms / 1000
            response: dict[str, Any] = await self.cluster.request(
                node, ApiKey.FETCH, body, timeout=timeout
            )
        except KafkaError:
            self.cluster.request_update()
            await trio.sleep(RETRY_BACKOFF_S)
            return None
        self._handle_fetch(response, generations)
        return response

    def _handle_fetch(
        self, response: dict[str, Any], generations: dict[TopicPartition, int]
    ) -> None:
        arrived = False
        for topic in response.get("topics", ()):
            for part in topic["partitions"]:
                tp = (topic["topic"], part["partition_index"])
                state = self._states.get(tp)
                if state is None or generations.get(tp) != state.generation:
                    continue  # unassigned or sought meanwhile: this answer is stale
                code = part.get("error_code", 0)
                if code:
                    self._partition_error(tp, state, error_for_code(code))
                    continue
                state.high_watermark = part.get("high_watermark", -1)
                raw = part.get("records") or b""
                next_offset = None
                for _, header in iter_headers(raw):
                    next_offset = header.next_offset
                if next_offset is not None and next_offset > (state.fetch_offset or 0):
                    state.fetch_offset = next_offset
                    if needs_filtering(raw):
                        aborted = part.get("aborted_transactions") or ()
                        raw = kept_batches(
                            raw,
                            [(a["producer_id"], a["first_offset"]) for a in aborted],
                            read_committed=self.isolation_level == READ_COMMITTED,
                        )
                    state.buffered.append(Fetched(bytes(raw), state.generation, next_offset))
                    state.buffered_bytes += len(raw)
                    arrived = True
        if arrived:
            self._data.set()

    def _partition_error(
        self, tp: TopicPartition, state: TopicPartitionState, error: type[KafkaError]
    ) -> None:
        if error is OffsetOutOfRangeError and self.auto_offset_reset != "none":
            state.position = state.fetch_offset = None  # the manager resets it
            state.buffered.clear()
            state.buffered_bytes = 0
            state.generation = next(self._generations)
        elif error.retriable:
            self.cluster.request_update()
        else:
            state.error = wire_error(
                error.code, f"{tp[0]}-{tp[1]}", f"fetching offset {state.fetch_offset}"
            )
            self._data.set()

    async def _list_offsets(
        self, timestamps: dict[TopicPartition, int]
    ) -> dict[TopicPartition, tuple[int, int]]:
        return await list_offsets(
            self.cluster,
            timestamps,
            timeout_s=self.request_timeout_s,
            isolation_level=self.isolation_level,
        )

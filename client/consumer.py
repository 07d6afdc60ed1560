"""Consumer: assign partitions, seek, and read records with ``poll`` or ``async for``.

How this works. The application owns positions (no consumer groups): ``assign`` sets
the partitions, ``seek*`` sets where each one reads next. A fetch manager task keeps
ONE Fetch in flight per broker, covering every assigned partition that broker leads
whose buffered bytes are below ``max_partition_fetch_bytes``, so the next response is
already on its way while the application processes the previous one (pre-fetching;
client/consumer_fetch.py, which also follows leader changes and resets out-of-range
positions). Responses are buffered as raw RecordBatch bytes and decoded by ``poll``, a
batch at a time, only as far as ``max_records`` needs; ``poll_batches`` hands them out
instead as checked ``BatchView``s (protocol/records/view.py) whose values are slices of
those bytes.

Each partition has a *position* (next offset the application gets) and a *fetch
offset* (next offset to ask the broker for; ahead of the position by what is
buffered). A seek bumps the partition's generation, which drops its buffered data and
makes the answer of an in-flight fetch for it be ignored. Nothing is returned twice or
skipped because the position only moves when ``poll`` hands records out.

With a ``group_id``, ``subscribe`` makes the consumer a member of a consumer group
instead: the group's coordinator and its leader decide which partitions it reads
(client/consumer_group.py), positions start at the group's committed offsets, and
``commit`` (or auto-commit) stores them.
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import TypeVar, Unpack

import trio

from minibroker.client.background import BackgroundTasks
from minibroker.client.consumer_fetch import (
    EARLIEST,
    LATEST,
    RESETTING,
    FetchMethods,
    TopicPartition,
    TopicPartitionState,
)
from minibroker.client.consumer_group import ConsumerGroup, GroupMethods, GroupOptions
from minibroker.client.errors import with_context
from minibroker.client.metadata import ClusterClient
from minibroker.client.security import SecurityOptions, client_security
from minibroker.client.transactions import GroupMetadata
from minibroker.net.security import ClientSecurity
from minibroker.protocol.errors import (
    CorruptMessageError,
    MinibrokerError,
)
from minibroker.protocol.heap import keep_freed_memory
from minibroker.protocol.records import (
    ConsumerRecord as ConsumerRecord,  # the client's public record
)
from minibroker.protocol.records import decode_consumer_records, iter_headers
from minibroker.protocol.records.view import BatchView, batch_views

ISOLATION_LEVELS = {"read_uncommitted": 0, "read_committed": 1}
"""Kafka's isolation.level values and their wire numbers."""

FETCH_MAX_WAIT_MS = 500  # Kafka's fetch.max.wait.ms: long-poll time on an idle partition


_T = TypeVar("_T")


class Consumer(FetchMethods, GroupMethods):
    """A Trio-native consumer of assigned partitions; see the module docstring."""

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        auto_offset_reset: str = "latest",
        max_partition_fetch_bytes: int = 1_048_576,
        fetch_max_wait_ms: int = FETCH_MAX_WAIT_MS,
        fetch_min_bytes: int = 1,
        request_timeout_ms: float = 30_000,
        check_crcs: bool = True,
        client_id: str = "minibroker-consumer",
        group_id: str | None = None,
        enable_auto_commit: bool = True,
        auto_commit_interval_ms: int = 5_000,
        session_timeout_ms: int = 45_000,
        heartbeat_interval_ms: int = 3_000,
        max_poll_interval_ms: int = 300_000,
        partition_assignment_strategy: str | Sequence[str] = ("range", "cooperative-sticky"),
        group_instance_id: str | None = None,
        metadata_max_age_ms: int = 300_000,
        isolation_level: str = "read_uncommitted",
        config: Mapping[str, str] | ClientSecurity | None = None,
        **security: Unpack[SecurityOptions],
    ) -> None:
        """``config`` / ``security``: TLS and SASL, as Kafka's client properties
        (client/security.py). ``isolation_level`` "read_committed": only committed
        transactions' records, below the last stable offset (the default is Kafka's
        Java client's, "read_uncommitted"; control batches are never records)."""
        if auto_offset_reset not in ("earliest", "latest", "none"):
            raise MinibrokerError("auto_offset_reset must be earliest, latest or none")
        if isolation_level not in ISOLATION_LEVELS:
            raise MinibrokerError("isolation_level must be read_committed or read_uncommitted")
        self.isolation_level = ISOLATION_LEVELS[isolation_level]
        self.auto_offset_reset = auto_offset_reset
        self.max_partition_fetch_bytes = max_partition_fetch_bytes
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.fetch_min_bytes = fetch_min_bytes
        self.check_crcs = check_crcs
        keep_freed_memory()  # multi-MB fetch responses: see protocol/heap.py
        self.request_timeout_s = request_timeout_ms / 1000
        self.cluster = ClusterClient(
            bootstrap_servers,
            security=client_security(config, **security),
            client_id=client_id,
            request_timeout_s=self.request_timeout_s,
        )
        self._states: dict[TopicPartition, TopicPartitionState] = {}
        # Decoded records not yet handed out, with the fetched bytes they came from (so
        # that poll_batches can hand out the rest as views).
        # Decoded, not yet handed out: (partition, records, their raw batches, chunk end).
        self._ready: deque[tuple[TopicPartition, list[ConsumerRecord], bytes, int]] = deque()
        self._iter_buffer: deque[ConsumerRecord] = deque()
        self._generations = itertools.count(1)  # see TopicPartitionState.generation
        self._in_flight: set[int] = set()
        self._turn = 0  # round-robin start of _next_fetched
        self._wakeup = trio.Event()  # fetch manager: something changed
        self._data = trio.Event()  # poll: data (or an error) arrived
        self._tasks = BackgroundTasks()
        self._group: ConsumerGroup | None = None
        if group_id is not None:
            strategies = (
                (partition_assignment_strategy,)
                if isinstance(partition_assignment_strategy, str)
                else tuple(partition_assignment_strategy)
            )
            options = GroupOptions(
                group_id=group_id,
                enable_auto_commit=enable_auto_commit,
                auto_commit_interval_ms=auto_commit_interval_ms,
                session_timeout_ms=session_timeout_ms,
                heartbeat_interval_ms=heartbeat_interval_ms,
                max_poll_interval_ms=max_poll_interval_ms,
                partition_assignment_strategy=strategies,
                group_instance_id=group_instance_id,
                metadata_max_age_ms=metadata_max_age_ms,
                request_timeout_s=self.request_timeout_s,
            )
            self._group = ConsumerGroup(options, self.cluster, self)
            self._group.member.on_fatal = self._data_arrived

    # --- lifecycle -------------------------------------------------------------------

    async def __aenter__(self) -> Consumer:
        nursery = await self._tasks.open()
        try:
            await nursery.start(self.cluster.run)
        except BaseException:
            await self._tasks.close()
            raise
        nursery.start_soon(self._fetch_manager, nursery)
        if self._group is not None and self._group.subscribed:
            await nursery.start(self._group.run)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        try:
            if self._group is not None and self._tasks.nursery:
                with trio.CancelScope(shield=True):
                    await self._group.stop()
        finally:
            await self._tasks.close()
        return None

    # --- assignment and positions ----------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Read exactly these partitions (replaces the previous assignment)."""
        if self._group is not None and self._group.subscribed:
            raise MinibrokerError("assign() and subscribe() exclude each other")
        self.set_assignment(partitions)

    def set_assignment(self, partitions: Iterable[TopicPartition]) -> None:
        """``assign`` without the check: how the group side applies a rebalance."""
        wanted = [(t, int(p)) for t, p in partitions]
        # A partition assigned again gets a generation never used before, so the answer
        # to a fetch sent before it was taken away is not mistaken for a current one.
        self._states = {
            tp: self._states.get(tp) or TopicPartitionState(generation=next(self._generations))
            for tp in wanted
        }
        self._ready = deque(entry for entry in self._ready if entry[0] in self._states)
        self._iter_buffer = deque(
            r for r in self._iter_buffer if (r.topic, r.partition) in self._states
        )
        self.cluster.topics.update(t for t, _ in wanted)
        self.cluster.request_update()
        self._wakeup.set()

    def group_metadata(self) -> GroupMetadata:
        """This consumer's group membership, for ``Producer.send_offsets_to_transaction``
        (KIP-447: the coordinator refuses offsets of a member that lost its generation)."""
        if self._group is None:
            raise MinibrokerError("group_metadata needs a group_id")
        member = self._group.member
        return GroupMetadata(
            self._group.link.group_id,
            member.generation_id,
            member.member_id,
            member.settings.group_instance_id,
        )

    def assignment(self) -> list[TopicPartition]:
        return list(self._states)

    def seek(self, topic: str, partition: int, offset: int) -> None:
        """The next record returned for the partition is the one at ``offset``."""
        state = self._state((topic, partition))
        state.position = state.fetch_offset = offset
        state.generation = next(self._generations)
        state.buffered.clear()
        state.buffered_bytes = 0
        state.error = None
        self._ready = deque(entry for entry in self._ready if entry[0] != (topic, partition))
        self._iter_buffer = deque(
            r for r in self._iter_buffer if (r.topic, r.partition) != (topic, partition)
        )
        self._wakeup.set()

    def position(self, topic: str, partition: int) -> int | None:
        """The offset of the next record the application gets, from ``poll`` or ``async
        for`` (None until it is known): what a commit stores."""
        position = self._state((topic, partition)).position
        for record in self._iter_buffer:  # taken from the buffers, not yet handed out
            if record.partition == partition and record.topic == topic:
                return record.offset
        return None if position == RESETTING else position

    def high_watermark(self, topic: str, partition: int) -> int:
        """The partition's high watermark as of the last fetch (-1 before any)."""
        return self._state((topic, partition)).high_watermark

    async def seek_to_beginning(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        await self._seek_to(EARLIEST, partitions)

    async def seek_to_end(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        await self._seek_to(LATEST, partitions)

    async def _seek_to(self, timestamp: int, partitions: Iterable[TopicPartition] | None) -> None:
        tps = list(partitions) if partitions is not None else list(self._states)
        offsets = await self._list_offsets({tp: timestamp for tp in tps})
        for tp, (offset, _) in offsets.items():
            self.seek(tp[0], tp[1], offset)

    async def offsets_for_times(
        self, timestamps: dict[TopicPartition, int]
    ) -> dict[TopicPartition, tuple[int, int] | None]:
        """Per partition the first (offset, timestamp) at or after the timestamp, or None."""
        found = await self._list_offsets(timestamps)
        return {tp: (found[tp] if found[tp][0] >= 0 else None) for tp in timestamps}

    async def beginning_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {
            tp: o for tp, (o, _) in (await self._list_offsets(dict.fromkeys(tps, EARLIEST))).items()
        }

    async def end_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {
            tp: o for tp, (o, _) in (await self._list_offsets(dict.fromkeys(tps, LATEST))).items()
        }

    def _state(self, tp: TopicPartition) -> TopicPartitionState:
        state = self._states.get(tp)
        if state is None:
            raise MinibrokerError(f"{tp[0]}-{tp[1]} is not assigned to this consumer")
        return state

    # --- reading ---------------------------------------------------------------------

    async def poll(self, timeout_ms: float = 0, max_records: int = 500) -> list[ConsumerRecord]:
        """Up to ``max_records`` records, waiting at most ``timeout_ms`` for the first."""
        return await self._polled(lambda: self._take(max_records), timeout_ms)

    async def poll_batches(self, timeout_ms: float = 0) -> list[BatchView]:
        """The zero-object ``poll``: views of the batches of one partition's fetched
        data, waiting at most ``timeout_ms`` for some.

        Each ``BatchView`` has been checked (CRC-32C of the whole batch when
        ``check_crcs``, then its records' structure) but builds no record objects:
        ``values()`` and ``keys()`` are memoryview slices of the fetched bytes,
        ``offsets()``, ``timestamps()`` and ``headers(i)`` are read when asked for, and
        ``records()`` gives the ConsumerRecords ``poll`` would have. The position moves
        past the last batch returned; records before the position are not in the views.
        It mixes freely with ``poll``: neither returns what the other did.
        """
        return await self._polled(self._take_views, timeout_ms)

    async def _polled(self, take: Callable[[], list[_T]], timeout_ms: float) -> list[_T]:
        """``_wait_for``, counted by the group (if any) as one poll of the application."""
        if self._group is None:
            return await self._wait_for(take, timeout_ms)
        self._group.poll_started()
        try:
            return await self._wait_for(take, timeout_ms)
        finally:
            self._group.poll_ended()

    async def _wait_for(self, take: Callable[[], list[_T]], timeout_ms: float) -> list[_T]:
        """What ``take`` hands out, as soon as it hands out anything, or [] after
        ``timeout_ms``; a partition's pending error is raised first."""
        deadline = trio.current_time() + timeout_ms / 1000
        while True:
            taken = take()
            if taken:
                return taken
            self._raise_partition_error()
            if trio.current_time() >= deadline:
                return []
            self._data = trio.Event()
            with trio.move_on_at(deadline):
                await self._data.wait()

    def __aiter__(self) -> AsyncIterator[ConsumerRecord]:
        return self

    async def __anext__(self) -> ConsumerRecord:
        while not self._iter_buffer:
            records = await self.poll(math.inf, 10_000)
            self._iter_buffer.extend(records)  # after the await: seek may replace the deque
        return self._iter_buffer.popleft()

    def _raise_partition_error(self) -> None:
        if self._group is not None and self._group.member.fatal is not None:
            raise self._group.member.fatal
        for (topic, partition), state in self._states.items():
            if state.error is not None:
                error, state.error = state.error, None
                raise with_context(error, f"{topic}-{partition}")

    def _take(self, max_records: int) -> list[ConsumerRecord]:
        out: list[ConsumerRecord] = []
        while len(out) < max_records:
            if not self._ready and not self._decode_next():
                break
            tp, records, raw, end = self._ready[0]
            want = max_records - len(out)
            if len(records) <= want:
                self._ready.popleft()
                out += records
                self._states[tp].position = max(out[-1].offset + 1, end)
            else:
                out += records[:want]
                self._ready[0] = (tp, records[want:], raw, end)
                self._states[tp].position = out[-1].offset + 1
        return out

    def _decode_next(self) -> bool:
        """Decode one buffered fetch of one partition into ``_ready``; False if none."""
        for tp, position, raw, end in self._next_fetched():
            with self._corruption_reported(tp, position):
                records = self._decode(tp, raw, position)
            if records:
                self._ready.append((tp, records, raw, end))
                return True
            # Only control or aborted batches: nothing to hand out, nothing before them
            # left (chunks are taken in order and nothing is ready), so step past them.
            self._states[tp].position = max(position, end)
        return False

    def _next_fetched(self) -> Iterator[tuple[TopicPartition, int, bytes, int]]:
        """Each buffered fetch still wanted, as (partition, position, raw batches, the
        chunk's end offset), taken off its buffer as it is yielded.

        Partitions take turns (the scan starts after the last one served), so one busy
        partition cannot starve the others.
        """
        order = list(self._states.items())
        start = self._turn % len(order) if order else 0
        self._turn += 1
        for tp, state in order[start:] + order[:start]:
            while state.buffered:
                raw, generation, end = state.buffered.popleft()
                state.buffered_bytes -= len(raw)
                self._wakeup.set()  # buffer space freed: fetch more
                if generation != state.generation or state.position is None:
                    continue
                yield tp, state.position, raw, end

    @contextmanager
    def _corruption_reported(self, tp: TopicPartition, position: int) -> Iterator[None]:
        """Never skip past bad data: on CorruptMessageError drop what is buffered and
        fetch again from the position, so every poll reports it until the app seeks."""
        try:
            yield
        except CorruptMessageError as exc:
            self.seek(tp[0], tp[1], position)
            raise with_context(exc, f"{tp[0]}-{tp[1]} at offset {position}") from exc

    def _take_views(self) -> list[BatchView]:
        fetched: Iterable[tuple[TopicPartition, int, bytes, int]]
        if self._ready:  # what a poll decoded but did not hand out comes first
            tp, _, raw, end = self._ready.popleft()
            fetched = [(tp, self._states[tp].position or 0, raw, end)]
        else:
            fetched = self._next_fetched()
        for tp, position, raw, end in fetched:
            with self._corruption_reported(tp, position):
                views = batch_views(raw, tp[0], tp[1], position, verify_crc=self.check_crcs)
            views = [view for view in views if len(view)]
            self._states[tp].position = max(views[-1].next_offset if views else position, end)
            if views:
                return views
        return []

    def _decode(self, tp: TopicPartition, raw: bytes, position: int) -> list[ConsumerRecord]:
        out: list[ConsumerRecord] = []
        for pos, header in iter_headers(raw):
            if header.next_offset <= position:
                continue  # the first batch may start before the fetch offset
            # The consumer's hot loop: records are decoded straight into ConsumerRecords.
            _, decoded = decode_consumer_records(raw, pos, tp[0], tp[1], verify_crc=self.check_crcs)
            if header.base_offset < position:
                decoded = [r for r in decoded if r.offset >= position]
            out += decoded
        return out

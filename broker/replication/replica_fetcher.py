"""Replica fetchers: follower partitions pull their leader's log (Kafka's
ReplicaFetcherManager / ReplicaFetcherThread, as Trio tasks).

How this works. ``ReplicaFetcherManager`` keeps one ``ReplicaFetcher`` per (leader
broker, fetcher index); ``num.replica.fetchers`` indexes per leader spread the leader's
partitions by a stable hash. LeaderAndIsr adds a partition when this broker starts
following a (new) leader and removes it when it leads, stops, or follows someone else;
a fetcher left without partitions ends.

Each partition in a fetcher is first *truncating*, then *fetching*:

- truncating: ask the leader (OffsetForLeaderEpoch) where our latest leader epoch ends
  on its log, and cut ours there (broker/replication/truncation.py: KIP-101 with KIP-279's rounds),
  never blindly to the HW. A change of leader epoch seen later truncates again.
- fetching: one long-polling Fetch (``replica_id`` = our id, ``current_leader_epoch``
  fencing, ``replica.fetch.wait.max.ms`` / ``replica.fetch.min.bytes`` /
  ``replica.fetch.max.bytes``) covers every fetching partition of the fetcher, at
  offset = our LEO; a fetcher of more than ``request.max.partitions`` (which the leader
  refuses in one request) sends them in turns. Batches are appended as they are
  (``append_as_follower`` keeps offsets and epochs); then our HW = min(leader HW, our
  LEO) and our log start follows the leader's.

The replication throttle (broker/quotas/replication_quota.py): a partition listed in its
topic's ``follower.replication.throttled.replicas`` for this broker, and not caught up
with the leader's HW, asks for no more than the follower quota's allowance and is left
out of the Fetch while there is none; the bytes received for listed partitions are
recorded. The other partitions of the
fetcher keep flowing: a request that leaves some out waits no longer than the quota
needs to free up, so the throttled ones rejoin on time.

Errors per partition: OFFSET_OUT_OF_RANGE means our LEO is above the leader's end (an
unclean election: cut to the leader's end) or below its log start (retention removed
what we miss: empty our log and restart at the leader's start); fencing and leadership
errors pause the partition for ``replica.fetch.backoff.ms`` (the controller's next
LeaderAndIsr sorts it out), except the answers of a leader that has yet to apply the
LeaderAndIsr we have (UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER,
UNKNOWN_LEADER_EPOCH): the controller sends it to every replica at once and a follower
often hears first, so those are asked again after 50 ms, doubling while they last, up to
the back-off; a network error pauses the whole fetcher and reconnects.

Everything runs on the broker's Trio thread; a response is applied with no await
between checking the partition is still ours at the offset we asked for and appending,
so a concurrent LeaderAndIsr can never interleave with an append.

A fetcher owns its partitions' states (broker/replication/fetch_state.py), its
connection and their pauses, and a ``FetcherTruncation``
(broker/replication/fetcher_truncation.py) that cuts their logs; here are the loop and
the fetching, the path every fetched batch takes.
"""

from __future__ import annotations

import logging
import math
import zlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import trio

from minibroker.broker.quotas.replication_quota import (
    FetchBudget,
    ReplicationQuota,
    is_listed,
)
from minibroker.broker.replication.fetch_state import (
    LEADER_BEHIND_CODES,
    REQUEST_TIMEOUT_S,
    UNKNOWN_EPOCH_RETRY_S,
    FetcherHost,
    FetchState,
)
from minibroker.broker.replication.fetcher_truncation import FetcherTruncation, truncate_follower
from minibroker.broker.replication.partition import Partition
from minibroker.broker.replication.summaries import some_of
from minibroker.broker.security.security import inter_broker_security
from minibroker.net.connection import Connection
from minibroker.net.security import ClientSecurity
from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import (
    NONE,
    KafkaError,
    NetworkError,
    OffsetOutOfRangeError,
    error_for_code,
)
from minibroker.protocol.records import read_header
from minibroker.protocol.topic_partition import TopicPartition

log = logging.getLogger(__name__)

THROTTLE_RETRY_MIN_S = 0.005
"""Shortest wait for the follower quota to free up (no spinning on a full quota)."""


def fetcher_index(tp: TopicPartition, fetchers: int) -> int:
    """Which of a leader's fetchers serves ``tp`` (stable across runs, unlike hash())."""
    return (zlib.crc32(tp.topic.encode()) * 31 + tp.partition) % fetchers


class ReplicaFetcher:
    """Fetches every partition this broker follows from one leader (one connection);
    its ``truncation`` cuts their logs where the leader's say."""

    def __init__(self, manager: FetcherHost, source_id: int, index: int) -> None:
        self.manager = manager
        self.source_id = source_id
        self.index = index
        self.states: dict[TopicPartition, FetchState] = {}
        self.cancel_scope = trio.CancelScope()
        self._changed = trio.Event()
        self._in_flight: trio.CancelScope | None = None
        self._conn: Connection | None = None
        self._held: set[TopicPartition] = set()  # left out of the last fetch by the throttle
        self._next_turn = 0  # where the next fetch of a fetcher over the partition cap starts
        self._throttle_wake = math.inf  # when the follower quota frees up for them
        self.truncation = FetcherTruncation(manager, source_id, self.states, self._pause)

    def __repr__(self) -> str:
        return f"<ReplicaFetcher leader={self.source_id}#{self.index} {sorted(self.states)}>"

    def add(self, partition: Partition) -> None:
        self.states[partition.tp] = FetchState(partition, partition.leader_epoch)
        self._poke()

    def remove(self, tp: TopicPartition) -> None:
        self.states.pop(tp, None)

    def _poke(self) -> None:
        """Stop a long poll in flight so new partitions start now, not after it."""
        self._changed.set()
        if self._in_flight is not None:
            self._in_flight.cancel()

    async def _connection(self) -> Connection:
        if self._conn is not None and self._conn.is_usable:
            return self._conn
        await self._drop_connection()
        address = self.manager.address_of(self.source_id)
        if address is None:
            raise NetworkError(f"no address known for broker {self.source_id}")
        conn = Connection(
            address[0],
            address[1],
            client_id=f"replica-fetcher-{self.manager.broker_id}",
            security=self.manager.security,
        )
        await conn.connect()
        self._conn = conn
        return conn

    async def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.aclose()

    def _pause(self, state: FetchState, code: int = NONE) -> None:
        backoff = self.manager.config.replica_fetch_backoff_ms / 1000
        if code in LEADER_BEHIND_CODES:
            # The leader has yet to apply the LeaderAndIsr we already have; it is in
            # flight, so ask again soon rather than a whole back-off later (the first
            # fetch of a new topic's followers lands here). Doubling: a leader that
            # stays behind is not asked 20 times a second.
            early = UNKNOWN_EPOCH_RETRY_S * 2 ** min(state.leader_behind, 16)
            backoff = min(backoff, early)
            state.leader_behind += 1
        state.delayed_until = trio.current_time() + backoff

    async def run(self) -> None:
        config = self.manager.config
        backoff = config.replica_fetch_backoff_ms / 1000
        with self.cancel_scope:
            try:
                while True:
                    try:
                        conn = await self._connection()
                        await self.truncation.truncate(conn)
                        if not await self._fetch(conn):
                            await self._idle()
                    except (NetworkError, KafkaError, OSError) as exc:
                        log.info("fetcher from broker %d: %s", self.source_id, exc)
                        await self._drop_connection()
                        await trio.sleep(backoff)
            finally:
                with trio.CancelScope(shield=True):
                    await self._drop_connection()

    async def _idle(self) -> None:
        """Nothing to fetch now: wait for a change or the earliest paused partition."""
        now = trio.current_time()
        wake = min(
            (s.delayed_until for tp, s in self.states.items() if tp not in self._held),
            default=now + 1.0,
        )
        wake = min(wake, self._throttle_wake)
        self._changed = trio.Event()
        with trio.move_on_at(max(wake, now + 0.001)):
            await self._changed.wait()

    # -- fetching ---------------------------------------------------------------------

    async def _fetch(self, conn: Connection) -> bool:
        """One Fetch round; False when no partition was ready to fetch."""
        config = self.manager.config
        now = trio.current_time()
        asked: dict[TopicPartition, tuple[FetchState, int]] = {}
        topics: dict[str, list[dict[str, Any]]] = {}
        self._held.clear()
        quota = self.manager.quota
        budget = FetchBudget(quota)
        for tp, state in self._next_partitions(now, config.request_max_partitions):
            partition = state.partition
            max_bytes = config.replica_fetch_max_bytes
            if self._throttles(state):
                max_bytes = budget.take(max_bytes)
                if not max_bytes:
                    self._held.add(tp)
                    continue
            offset = partition.log_end_offset
            asked[tp] = (state, offset)
            topics.setdefault(tp.topic, []).append(
                {
                    "partition": tp.partition,
                    "current_leader_epoch": partition.leader_epoch,
                    "fetch_offset": offset,
                    "log_start_offset": partition.log_start_offset,
                    "partition_max_bytes": max_bytes,
                }
            )
        self._throttle_wake = math.inf
        if self._held:
            pause = max(quota.throttle_time_s(), THROTTLE_RETRY_MIN_S)
            self._throttle_wake = now + pause
        if not asked:
            return False
        wait_ms = config.replica_fetch_wait_max_ms
        if self._held:  # answer in time for the held partitions to rejoin
            wait_ms = min(wait_ms, math.ceil((self._throttle_wake - now) * 1000))
        paused = [state.delayed_until for state in self.states.values() if not state.ready(now)]
        if paused:  # nor keep a paused partition waiting past its pause (a leader behind)
            wait_ms = min(wait_ms, max(0, math.ceil((min(paused) - now) * 1000)))
        body = {
            "replica_id": self.manager.broker_id,
            "max_wait_ms": wait_ms,
            "min_bytes": config.replica_fetch_min_bytes,
            "max_bytes": config.replica_fetch_response_max_bytes,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
        }
        self._changed = trio.Event()
        with trio.CancelScope() as scope:
            self._in_flight = scope
            try:
                response = await conn.request(
                    ApiKey.FETCH, body, timeout=wait_ms / 1000 + REQUEST_TIMEOUT_S
                )
            finally:
                self._in_flight = None
        if scope.cancelled_caught:
            # Given up for new partitions: but the leader answers a connection's requests
            # in order, and the long poll stays parked there for replica.fetch.wait.max.ms;
            # the next fetch on this connection would wait behind it (a new topic's first
            # acks=all send waited so). A fresh connection ends the parked one.
            await self._drop_connection()
            return True
        refused: dict[int, list[TopicPartition]] = {}
        for topic in response["topics"]:
            for answer in topic["partitions"]:
                tp = TopicPartition(topic["topic"], answer["partition_index"])
                entry = asked.get(tp)
                if entry is None or self.states.get(tp) is not entry[0]:
                    continue
                state, offset = entry
                if state.partition.log_end_offset != offset or state.partition.is_leader:
                    continue  # truncated or promoted while the fetch was out
                code = await self._process(conn, state, answer)
                if code is not None:
                    refused.setdefault(code, []).append(tp)
        for code, tps in refused.items():  # one line per error, not one per partition
            log.info(
                "fetch from %d: %s for %d partitions (%s)",
                self.source_id,
                error_for_code(code).name,
                len(tps),
                some_of(map(str, tps), len(tps)),
            )
        return True

    def _next_partitions(self, now: float, cap: int) -> list[tuple[TopicPartition, FetchState]]:
        """The partitions ready to fetch, at most ``cap`` of them (the leader refuses a
        Fetch naming more than its request.max.partitions): a fetcher holding more
        takes turns, each round starting where the last one stopped."""
        ready = [
            (tp, state)
            for tp, state in self.states.items()
            if not state.truncating
            and state.ready(now)
            and state.partition.leader_epoch == state.epoch
        ]
        if len(ready) <= cap:
            return ready
        start = self._next_turn % len(ready)
        self._next_turn = start + cap
        return (ready[start:] + ready[:start])[:cap]

    def _throttled_here(self, partition: Partition) -> bool:
        """Is ``partition`` listed in its topic's follower throttle for this broker?"""
        listed = partition.config.follower_replication_throttled_replicas
        return is_listed(listed, self.manager.broker_id, partition.tp.partition)

    def _throttles(self, state: FetchState) -> bool:
        """Is ``state``'s partition a throttled copy here (listed, not caught up)?"""
        return not state.caught_up and self._throttled_here(state.partition)

    async def _process(
        self, conn: Connection, state: FetchState, answer: dict[str, Any]
    ) -> int | None:
        """Apply one partition's answer; the error code it was paused for, if any."""
        partition = state.partition
        code = answer["error_code"]
        if code == NONE:
            state.leader_behind = 0
            records = answer["records"]
            if records:
                try:
                    first = read_header(records).base_offset
                    if first < partition.log_end_offset:
                        # The leader's batch straddles our end (our batches were cut
                        # differently); from its base on, the leader's copy is the truth.
                        truncate_follower(partition, first)
                    partition.log.append_as_follower(records)
                except (KafkaError, OSError) as exc:
                    log.error("%s: cannot append fetched data: %s", partition.tp, exc)
                    self._pause(state)
                    return None
                self.manager.on_follower_append(partition)
                if self._throttled_here(partition):
                    self.manager.quota.record(len(records))
            partition.update_follower_high_watermark(answer["high_watermark"])
            state.lag = max(0, answer["high_watermark"] - partition.log_end_offset)
            state.caught_up = state.lag == 0
            leader_start = answer["log_start_offset"]
            if leader_start > partition.log_start_offset:
                partition.log.maybe_increment_log_start_offset(
                    min(leader_start, partition.log_end_offset)
                )
            return None
        if code == OffsetOutOfRangeError.code:
            await self.truncation.handle_offset_out_of_range(conn, partition)
            return None
        self._pause(state, code)
        return int(code)


class ReplicaFetcherManager:
    """The fetchers of one broker (the ReplicaManager's ``FetcherHook``)."""

    def __init__(
        self,
        config: Any,
        *,
        address_of: Callable[[int], tuple[str, int] | None],
        on_follower_append: Callable[[Partition], None] = lambda partition: None,
        quota: ReplicationQuota | None = None,
        security: ClientSecurity | None = None,
    ) -> None:
        """``security``: how connections to leaders secure and prove themselves (the
        broker's ``inter_broker_security``); default: the config's, with no proof."""
        self.config = config
        # The follower side of the replication throttle (rate set by broker_configs.py).
        self.quota = quota if quota is not None else ReplicationQuota()
        self.broker_id: int = config.broker_id
        self.security = security if security is not None else inter_broker_security(config)
        """TLS / SASL / identity proof of the connections to leaders."""
        self.address_of = address_of
        self.on_follower_append = on_follower_append
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self._nursery: trio.Nursery | None = None
        self._waiting: list[ReplicaFetcher] = []

    def max_lag(self) -> int:
        """The largest lag (leader HW minus our LEO at its last answer) over every
        partition this broker follows; 0 when it follows none."""
        return max(
            (state.lag for fetcher in self.fetchers.values() for state in fetcher.states.values()),
            default=0,
        )

    def add_partitions(self, partitions: Sequence[Partition]) -> None:
        for partition in partitions:
            if partition.is_leader or partition.leader_id < 0:
                continue
            key = (
                partition.leader_id,
                fetcher_index(partition.tp, self.config.num_replica_fetchers),
            )
            fetcher = self.fetchers.get(key)
            if fetcher is None:
                fetcher = self.fetchers[key] = ReplicaFetcher(self, *key)
                self._start(fetcher)
            fetcher.add(partition)

    def remove_partitions(self, tps: Iterable[TopicPartition]) -> None:
        tps = set(tps)
        for key, fetcher in list(self.fetchers.items()):
            for tp in tps & fetcher.states.keys():
                fetcher.remove(tp)
            if not fetcher.states:
                fetcher.cancel_scope.cancel()
                del self.fetchers[key]

    def _start(self, fetcher: ReplicaFetcher) -> None:
        if self._nursery is None:
            self._waiting.append(fetcher)
        else:
            self._nursery.start_soon(fetcher.run)

    def shutdown(self) -> None:
        for fetcher in self.fetchers.values():
            fetcher.cancel_scope.cancel()
        self.fetchers.clear()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            for fetcher in self._waiting:
                nursery.start_soon(fetcher.run)
            self._waiting.clear()
            task_status.started()
            await trio.sleep_forever()

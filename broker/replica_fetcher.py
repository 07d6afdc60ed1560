"""Replica fetchers: follower partitions pull their leader's log (Kafka's
ReplicaFetcherManager / ReplicaFetcherThread, as Trio tasks).

How this works. ``ReplicaFetcherManager`` keeps one ``ReplicaFetcher`` per (leader
broker, fetcher index); ``num.replica.fetchers`` indexes per leader spread the leader's
partitions by a stable hash. LeaderAndIsr adds a partition when this broker starts
following a (new) leader and removes it when it leads, stops, or follows someone else;
a fetcher left without partitions ends.

Each partition in a fetcher is first *truncating*, then *fetching*:

- truncating: ask the leader (OffsetForLeaderEpoch) where our latest leader epoch ends
  on its log, and cut ours there (broker/truncation.py: KIP-101 with KIP-279's rounds),
  never blindly to the HW. A change of leader epoch seen later truncates again.
- fetching: one long-polling Fetch (``replica_id`` = our id, ``current_leader_epoch``
  fencing, ``replica.fetch.wait.max.ms`` / ``replica.fetch.min.bytes`` /
  ``replica.fetch.max.bytes``) covers every fetching partition of the fetcher, at
  offset = our LEO. Batches are appended as they are (``append_as_follower`` keeps
  offsets and epochs); then our HW = min(leader HW, our LEO) and our log start follows
  the leader's.

The replication throttle (broker/replication_quota.py): a partition listed in its
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
LeaderAndIsr sorts it out); a network error pauses the whole fetcher and reconnects.

Everything runs on the broker's Trio thread; a response is applied with no await
between checking the partition is still ours at the offset we asked for and appending,
so a concurrent LeaderAndIsr can never interleave with an append.
"""

from __future__ import annotations

import logging
import math
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import trio

from minibroker.broker.partition import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, Partition
from minibroker.broker.replication_quota import (
    FetchBudget,
    ReplicationQuota,
    is_listed,
)
from minibroker.broker.security import inter_broker_security
from minibroker.broker.truncation import decide_truncation
from minibroker.net.connection import Connection
from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import (
    NONE,
    KafkaError,
    NetworkError,
    OffsetOutOfRangeError,
    UnknownLeaderEpochError,
    error_for_code,
)
from minibroker.protocol.records import read_header
from minibroker.storage.leader_epoch import UNDEFINED_EPOCH
from minibroker.storage.names import TopicPartition

log = logging.getLogger(__name__)

MAX_TRUNCATION_ROUNDS = 16
"""KIP-279 rounds per attempt; each lowers our latest epoch, so real logs need few."""
UNKNOWN_EPOCH_RETRY_S = 0.05
"""Retry delay when the leader has not yet seen our (newer) leader epoch: milliseconds
away, unlike the errors replica.fetch.backoff.ms is for."""
REQUEST_TIMEOUT_S = 30.0
"""Kafka's request.timeout.ms default, added on top of a long poll's own wait."""
THROTTLE_RETRY_MIN_S = 0.005
"""Shortest wait for the follower quota to free up (no spinning on a full quota)."""


@dataclass(slots=True)
class FetchState:
    """One follower partition inside a fetcher."""

    partition: Partition
    epoch: int  # the leader epoch this state was truncated for
    truncating: bool = True
    delayed_until: float = 0.0
    lag: int = 0  # leader HW - our LEO at the last answer (the fetcher max-lag metric)
    # Lag was 0 at the last answer: not throttled (Kafka's isReplicaInSync).
    caught_up: bool = False

    def ready(self, now: float) -> bool:
        return now >= self.delayed_until


def fetcher_index(tp: TopicPartition, fetchers: int) -> int:
    """Which of a leader's fetchers serves ``tp`` (stable across runs, unlike hash())."""
    return (zlib.crc32(tp.topic.encode()) * 31 + tp.partition) % fetchers


def truncate_follower(partition: Partition, offset: int) -> None:
    """Cut the follower's log (and its epoch cache: an epoch may start at the LEO with
    no data yet) to ``offset``, keeping HW <= LEO."""
    log_ = partition.log
    if offset < log_.log_end_offset:
        log.info("%s: truncating from %d to %d", partition.tp, log_.log_end_offset, offset)
        log_.truncate_to(offset)
    log_.leader_epoch_cache.truncate_from_end(log_.log_end_offset)
    partition.high_watermark = min(partition.high_watermark, log_.log_end_offset)


class ReplicaFetcher:
    """Fetches every partition this broker follows from one leader (one connection)."""

    def __init__(self, manager: ReplicaFetcherManager, source_id: int, index: int) -> None:
        self.manager = manager
        self.source_id = source_id
        self.index = index
        self.states: dict[TopicPartition, FetchState] = {}
        self.cancel_scope = trio.CancelScope()
        self._changed = trio.Event()
        self._in_flight: trio.CancelScope | None = None
        self._conn: Connection | None = None
        self._held: set[TopicPartition] = set()  # left out of the last fetch by the throttle
        self._throttle_wake = math.inf  # when the follower quota frees up for them

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

    # -- the loop ---------------------------------------------------------------------

    async def run(self) -> None:
        config = self.manager.config
        backoff = config.replica_fetch_backoff_ms / 1000
        with self.cancel_scope:
            try:
                while True:
                    try:
                        conn = await self._connection()
                        await self._truncate(conn)
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
        if code == UnknownLeaderEpochError.code:
            # The leader has yet to apply the LeaderAndIsr we already have; it is in
            # flight, so ask again soon rather than a whole back-off later.
            backoff = min(backoff, UNKNOWN_EPOCH_RETRY_S)
        state.delayed_until = trio.current_time() + backoff

    # -- truncation -------------------------------------------------------------------

    async def _truncate(self, conn: Connection) -> None:
        now = trio.current_time()
        for tp, state in list(self.states.items()):
            partition = state.partition
            if partition.leader_epoch != state.epoch:
                state.epoch, state.truncating = partition.leader_epoch, True
            if not state.truncating or not state.ready(now):
                continue
            for _ in range(MAX_TRUNCATION_ROUNDS):
                latest = partition.log.leader_epoch_cache.latest_epoch
                if latest == UNDEFINED_EPOCH:
                    # No epoch history at all: the HW is the only bound we have.
                    truncate_follower(
                        partition, min(partition.high_watermark, partition.log_end_offset)
                    )
                    state.truncating = False
                    break
                answer = await self._offset_for_leader_epoch(conn, partition, latest)
                if self.states.get(tp) is not state or partition.leader_epoch != state.epoch:
                    break  # LeaderAndIsr moved on while we asked
                code = answer["error_code"]
                if code != NONE:
                    log.info("%s: OffsetForLeaderEpoch: %s", tp, error_for_code(code).name)
                    self._pause(state, code)
                    break
                step = decide_truncation(
                    answer["leader_epoch"],
                    answer["end_offset"],
                    follower_cache=partition.log.leader_epoch_cache,
                    follower_log_end_offset=partition.log_end_offset,
                    follower_high_watermark=partition.high_watermark,
                )
                truncate_follower(partition, step.offset)
                if step.complete:
                    state.truncating = False
                    break

    async def _offset_for_leader_epoch(
        self, conn: Connection, partition: Partition, epoch: int
    ) -> dict[str, Any]:
        body = {
            "replica_id": self.manager.broker_id,
            "topics": [
                {
                    "topic": partition.tp.topic,
                    "partitions": [
                        {
                            "partition": partition.tp.partition,
                            "current_leader_epoch": partition.leader_epoch,
                            "leader_epoch": epoch,
                        }
                    ],
                }
            ],
        }
        response = await conn.request(
            ApiKey.OFFSET_FOR_LEADER_EPOCH, body, timeout=REQUEST_TIMEOUT_S
        )
        answer: dict[str, Any] = response["topics"][0]["partitions"][0]
        return answer

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
        for tp, state in self.states.items():
            partition = state.partition
            if state.truncating or not state.ready(now) or partition.leader_epoch != state.epoch:
                continue
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
            return True
        for topic in response["topics"]:
            for answer in topic["partitions"]:
                tp = TopicPartition(topic["topic"], answer["partition_index"])
                entry = asked.get(tp)
                if entry is None or self.states.get(tp) is not entry[0]:
                    continue
                state, offset = entry
                if state.partition.log_end_offset != offset or state.partition.is_leader:
                    continue  # truncated or promoted while the fetch was out
                await self._process(conn, state, answer)
        return True

    def _throttled_here(self, partition: Partition) -> bool:
        """Is ``partition`` listed in its topic's follower throttle for this broker?"""
        listed = partition.config.follower_replication_throttled_replicas
        return is_listed(listed, self.manager.broker_id, partition.tp.partition)

    def _throttles(self, state: FetchState) -> bool:
        """Is ``state``'s partition a throttled copy here (listed, not caught up)?"""
        return not state.caught_up and self._throttled_here(state.partition)

    async def _process(self, conn: Connection, state: FetchState, answer: dict[str, Any]) -> None:
        partition = state.partition
        code = answer["error_code"]
        if code == NONE:
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
                    return
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
            return
        if code == OffsetOutOfRangeError.code:
            await self._handle_offset_out_of_range(conn, partition)
            return
        log.info("%s: fetch from %d: %s", partition.tp, self.source_id, error_for_code(code).name)
        self._pause(state, code)

    async def _handle_offset_out_of_range(self, conn: Connection, partition: Partition) -> None:
        """Our LEO is outside the leader's [log start, LEO]: see the module docstring."""
        epoch = partition.leader_epoch
        leader_end = await self._list_offset(conn, partition, LATEST_TIMESTAMP)
        if partition.leader_epoch != epoch or partition.is_leader:
            return
        leo = partition.log_end_offset
        if 0 <= leader_end < leo:
            log.warning(
                "%s: leader %d ends at %d, below our %d (unclean election?): truncating",
                partition.tp,
                self.source_id,
                leader_end,
                leo,
            )
            truncate_follower(partition, leader_end)
            return
        leader_start = await self._list_offset(conn, partition, EARLIEST_TIMESTAMP)
        if partition.leader_epoch != epoch or partition.is_leader:
            return
        if leader_start > partition.log_end_offset:
            log.warning(
                "%s: leader %d starts at %d, past our end %d: restarting our log there",
                partition.tp,
                self.source_id,
                leader_start,
                partition.log_end_offset,
            )
            partition.log.truncate_fully_and_start_at(leader_start)
            partition.high_watermark = leader_start

    async def _list_offset(self, conn: Connection, partition: Partition, timestamp: int) -> int:
        body = {
            "replica_id": self.manager.broker_id,
            "topics": [
                {
                    "name": partition.tp.topic,
                    "partitions": [
                        {
                            "partition_index": partition.tp.partition,
                            "current_leader_epoch": partition.leader_epoch,
                            "timestamp": timestamp,
                        }
                    ],
                }
            ],
        }
        response = await conn.request(ApiKey.LIST_OFFSETS, body, timeout=REQUEST_TIMEOUT_S)
        answer = response["topics"][0]["partitions"][0]
        if answer["error_code"] != NONE:
            raise error_for_code(answer["error_code"])(f"ListOffsets for {partition.tp}")
        offset: int = answer["offset"]
        return offset


class ReplicaFetcherManager:
    """The fetchers of one broker (the ReplicaManager's ``FetcherHook``)."""

    def __init__(
        self,
        config: Any,
        *,
        address_of: Callable[[int], tuple[str, int] | None],
        on_follower_append: Callable[[Partition], None] = lambda partition: None,
        quota: ReplicationQuota | None = None,
    ) -> None:
        self.config = config
        # The follower side of the replication throttle (rate set by broker_configs.py).
        self.quota = quota if quota is not None else ReplicationQuota()
        self.broker_id: int = config.broker_id
        self.security = inter_broker_security(config)
        """TLS / SASL of the connections to leaders (the inter-broker listener's)."""
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

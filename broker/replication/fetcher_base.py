"""What a replica fetcher holds: its follower partitions, its connection to the leader,
and the pauses of partitions the leader refused (broker/replication/replica_fetcher.py
explains the fetcher; broker/replication/fetcher_truncation.py and
broker/replication/replica_fetcher.py add to this class what it does)."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import trio

from minibroker.broker.quotas.replication_quota import ReplicationQuota
from minibroker.broker.replication.partition import Partition
from minibroker.net.connection import Connection
from minibroker.net.security import ClientSecurity
from minibroker.protocol.errors import (
    NONE,
    NetworkError,
    NotLeaderOrFollowerError,
    UnknownLeaderEpochError,
    UnknownTopicOrPartitionError,
)
from minibroker.protocol.topic_partition import TopicPartition

log = logging.getLogger(__name__)

UNKNOWN_EPOCH_RETRY_S = 0.05
"""First retry delay when the leader has not yet applied the LeaderAndIsr we already
have (it is in flight, milliseconds away, unlike the errors replica.fetch.backoff.ms is
for); it doubles with each such answer in a row, up to replica.fetch.backoff.ms."""
LEADER_BEHIND_CODES = frozenset(
    e.code
    for e in (UnknownLeaderEpochError, UnknownTopicOrPartitionError, NotLeaderOrFollowerError)
)
"""What a leader answers before it has applied the LeaderAndIsr naming it leader: it does
not know our epoch, does not host the partition yet (a topic just created: the controller
tells every replica at once, and followers often hear first), or still follows."""
REQUEST_TIMEOUT_S = 30.0
"""Kafka's request.timeout.ms default, added on top of a long poll's own wait."""


class FetcherHost(Protocol):
    """What a fetcher reads from its ReplicaFetcherManager."""

    config: Any
    quota: ReplicationQuota
    broker_id: int
    security: ClientSecurity | None
    address_of: Callable[[int], tuple[str, int] | None]
    on_follower_append: Callable[[Partition], None]


@dataclass(slots=True)
class FetchState:
    """One follower partition inside a fetcher."""

    partition: Partition
    epoch: int  # the leader epoch this state was truncated for
    truncating: bool = True
    delayed_until: float = 0.0
    leader_behind: int = 0  # answers in a row that the leader has yet to lead
    lag: int = 0  # leader HW - our LEO at the last answer (the fetcher max-lag metric)
    # Lag was 0 at the last answer: not throttled (Kafka's isReplicaInSync).
    caught_up: bool = False

    def ready(self, now: float) -> bool:
        return now >= self.delayed_until


class FetcherBase:
    """The state of one fetcher: every partition this broker follows from one leader,
    over one connection."""

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

"""What a replica fetcher keeps per follower partition (``FetchState``: its epoch,
whether it must truncate, its pause after a refusal) and what it asks of the broker
that runs it (``FetcherHost``); broker/replication/replica_fetcher.py explains the
fetcher."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from minibroker.broker.quotas.replication_quota import ReplicationQuota
from minibroker.broker.replication.partition import Partition
from minibroker.net.security import ClientSecurity
from minibroker.protocol.errors import (
    NotLeaderOrFollowerError,
    UnknownLeaderEpochError,
    UnknownTopicOrPartitionError,
)

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

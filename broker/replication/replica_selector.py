"""Follower fetching (KIP-392): which replica a consumer should read a partition from.

A consumer sending Fetch v11+ names its rack (``client.rack``; ``rack_id``). When the
broker sets ``replica.selector.class`` to Kafka's
``org.apache.kafka.common.replica.RackAwareReplicaSelector``, the leader answers such a
fetch, when a replica in the consumer's rack is better placed than itself, with no
records and that replica's id as ``preferred_read_replica``; the consumer then fetches
from it, and any broker hosting a replica serves consumers up to its own high watermark
(broker/replication/fetch_reader.py, ``Partition.read``).

Kafka's rules, as RackAwareReplicaSelector and ReplicaManager.findPreferredReadReplica
apply them: only the leader picks; the candidates are the leader and the in-sync
followers whose log already holds the fetch offset; a consumer without a rack, or with
no candidate in its rack, reads from the leader; the leader itself if it is in the
consumer's rack; else the most caught-up candidate there (largest log end offset, then
the most recently caught up).
"""

from __future__ import annotations

from collections.abc import Callable

from minibroker.broker.replication.partition import Partition


class RackAwareReplicaSelector:
    def __init__(self, local_broker_id: int, rack_of: Callable[[int], str | None]) -> None:
        """``rack_of`` gives a broker's ``broker.rack`` (None: unknown or none)."""
        self.local_broker_id = local_broker_id
        self.rack_of = rack_of

    def preferred_read_replica(
        self, partition: Partition, client_rack: str, fetch_offset: int
    ) -> int | None:
        """The follower this leader's consumer in ``client_rack`` should fetch from, or
        None to keep reading from the leader."""
        if not client_rack or self.rack_of(self.local_broker_id) == client_rack:
            return None
        best: tuple[int, int, int] | None = None  # (log end, last caught up, broker id)
        for replica in partition.remote_replicas.values():
            if (
                replica.broker_id not in partition.isr
                or replica.log_end_offset < fetch_offset
                or self.rack_of(replica.broker_id) != client_rack
            ):
                continue
            candidate = (replica.log_end_offset, replica.last_caught_up_time_ms, replica.broker_id)
            if best is None or candidate > best:
                best = candidate
        return None if best is None else best[2]

"""ListOffsets for a set of partitions, each asked of its current leader.

Used by the consumer for ``seek_to_beginning`` / ``seek_to_end``, ``offsets_for_times``
and position resets. Timestamps follow Kafka: -2 earliest (the log start offset), -1
latest (the high watermark, for consumers), otherwise the first offset whose record
timestamp is >= the timestamp. A partition whose leader moved (NOT_LEADER_OR_FOLLOWER,
an unreachable broker, no leader yet) is asked again after a metadata refresh until
``timeout_s``; non-retriable errors are raised naming the partition.
"""

from __future__ import annotations

from typing import Any

import trio

from minibroker.client.errors import wire_error
from minibroker.client.metadata import ClusterClient
from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import LeaderNotAvailableError, NetworkError

TopicPartition = tuple[str, int]
RETRY_BACKOFF_S = 0.1  # between rounds while some partition has no reachable leader


async def list_offsets(
    cluster: ClusterClient,
    timestamps: dict[TopicPartition, int],
    *,
    timeout_s: float,
    isolation_level: int = 0,
) -> dict[TopicPartition, tuple[int, int]]:
    """Per partition (offset, timestamp) found; (-1, -1) when no record qualifies.
    ``isolation_level`` 1 (read_committed): the latest offset is the last stable one."""
    pending = dict(timestamps)
    found: dict[TopicPartition, tuple[int, int]] = {}
    with trio.move_on_after(timeout_s):
        while pending:
            meta = await cluster.refresh({t for t, _ in pending})
            by_node: dict[int, list[TopicPartition]] = {}
            for tp in pending:
                info = meta.topics.get(tp[0])
                if info is not None and info.error_code == 0:
                    if tp[1] >= len(info.partitions):
                        raise wire_error(3, f"{tp[0]}-{tp[1]}", "no such partition")
                elif info is not None:
                    error = wire_error(info.error_code, f"{tp[0]}-{tp[1]}")
                    if not error.retriable:
                        raise error
                by_node.setdefault(meta.leader(*tp), []).append(tp)
            for node, tps in by_node.items():
                if node >= 0:
                    await _ask(cluster, node, tps, pending, found, isolation_level)
            if pending:
                cluster.request_update()
                await trio.sleep(RETRY_BACKOFF_S)
        return found
    where = ", ".join(f"{t}-{p}" for t, p in sorted(pending))
    raise LeaderNotAvailableError(
        f"{where}: LEADER_NOT_AVAILABLE (no leader answered ListOffsets in {timeout_s:g} s)"
    )


async def _ask(
    cluster: ClusterClient,
    node: int,
    tps: list[TopicPartition],
    pending: dict[TopicPartition, int],
    found: dict[TopicPartition, tuple[int, int]],
    isolation_level: int = 0,
) -> None:
    topics: dict[str, list[dict[str, Any]]] = {}
    for tp in tps:
        topics.setdefault(tp[0], []).append(
            {"partition_index": tp[1], "current_leader_epoch": -1, "timestamp": pending[tp]}
        )
    body = {
        "replica_id": -1,
        "isolation_level": isolation_level,
        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
    }
    try:
        response = await cluster.request(node, ApiKey.LIST_OFFSETS, body)
    except NetworkError:
        return  # the next round asks the leader the refreshed metadata names
    for topic in response.get("topics", ()):
        for part in topic["partitions"]:
            tp = (topic["name"], part["partition_index"])
            code = part.get("error_code", 0)
            if code:
                error = wire_error(code, f"{tp[0]}-{tp[1]}", "listing offsets")
                if not error.retriable:
                    raise error
                continue
            if tp in pending:
                del pending[tp]
                found[tp] = (part.get("offset", -1), part.get("timestamp", -1))

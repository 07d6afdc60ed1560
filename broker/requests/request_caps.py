"""RequestCaps: how many items (topics, partitions, groups, resources) one request of
each API may name, checked by the dispatcher before its handler does any per-item work.

Each handler runs on the event loop every client shares, so its work must be bounded by
something smaller than the frame: ``request.max.partitions`` (``limit``) bounds what one
request names. Produce, Fetch, ListOffsets, OffsetForLeaderEpoch and Metadata count
their own in their handlers (broker/apis.py's ``check_partition_count``: their hot path
needs no second pass); this table holds every other API that names items, and counts
with one pass over the request's top-level lists (a sum of list lengths: no per-item
Python work beyond a length). More than ``limit`` is INVALID_REQUEST for the whole
request, with the API and the limit in the message, before anything is looked at.

The controller's own requests (LeaderAndIsr, UpdateMetadata, StopReplica) are not
capped here: they carry the whole cluster's state and only the proven controller gets
past their fence (broker/security/controller_fence.py); the decoder's element budget
(protocol/api.py's ``MAX_REQUEST_ELEMENTS``) bounds them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from minibroker.protocol.api import ApiKey, Body
from minibroker.protocol.errors import InvalidRequestError

Counter = Callable[[Body], int]


def _items(key: str) -> Counter:
    """The length of the list ``key`` (None counts 0: "all", answered from the
    broker's own state, which the broker bounds)."""

    def count(body: Body) -> int:
        return len(body[key] or ())

    return count


def _nested(key: str, inner: str) -> Counter:
    """The entries of ``key`` plus the lengths of each entry's ``inner`` list."""

    def count(body: Body) -> int:
        outer = body[key] or ()
        return len(outer) + sum(len(item[inner] or ()) for item in outer)

    return count


def _offset_fetch(body: Body) -> int:
    groups: list[Any] = body["groups"] or []
    count = len(groups) + _nested("topics", "partition_indexes")(body)
    for group in groups:
        count += _nested("topics", "partition_indexes")(group)
    return count


def _create_topics(body: Body) -> int:
    """Topics, plus the partitions they would have (``num_partitions`` is one number
    that costs per-partition work: assignment, ZooKeeper state, LeaderAndIsr)."""
    topics: list[Any] = body["topics"]
    count = len(topics)
    for t in topics:
        count += max(int(t["num_partitions"]), len(t["assignments"])) + len(t["configs"])
    return count


def _alter_replica_log_dirs(body: Body) -> int:
    return sum(_nested("topics", "partitions")(d) for d in body["dirs"])


def _write_txn_markers(body: Body) -> int:
    return sum(_nested("topics", "partition_indexes")(m) for m in body["markers"])


COUNTERS: Final[dict[int, Counter]] = {
    ApiKey.OFFSET_COMMIT: _nested("topics", "partitions"),
    ApiKey.OFFSET_FETCH: _offset_fetch,
    ApiKey.OFFSET_DELETE: _nested("topics", "partitions"),
    ApiKey.DESCRIBE_GROUPS: _items("groups"),
    ApiKey.DELETE_GROUPS: _items("groups_names"),
    ApiKey.CREATE_TOPICS: _create_topics,
    ApiKey.DELETE_TOPICS: lambda body: _items("topic_names")(body) + _items("topics")(body),
    ApiKey.CREATE_PARTITIONS: _items("topics"),  # the handler caps the partitions added
    ApiKey.DELETE_RECORDS: _nested("topics", "partitions"),
    ApiKey.DESCRIBE_CONFIGS: _nested("resources", "configuration_keys"),
    ApiKey.ALTER_CONFIGS: _nested("resources", "configs"),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: _nested("resources", "configs"),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: _items("users"),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: _items("components"),
    ApiKey.ALTER_CLIENT_QUOTAS: _nested("entries", "ops"),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: lambda b: len(b["deletions"]) + len(b["upsertions"]),
    ApiKey.CREATE_ACLS: _items("creations"),
    ApiKey.DELETE_ACLS: _items("filters"),
    ApiKey.ELECT_LEADERS: _nested("topic_partitions", "partitions"),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: _nested("topics", "partitions"),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: _nested("topics", "partition_indexes"),
    ApiKey.DESCRIBE_LOG_DIRS: _nested("topics", "partitions"),
    ApiKey.ALTER_REPLICA_LOG_DIRS: _alter_replica_log_dirs,
    ApiKey.ADD_PARTITIONS_TO_TXN: _nested("topics", "partitions"),
    ApiKey.TXN_OFFSET_COMMIT: _nested("topics", "partitions"),
    ApiKey.WRITE_TXN_MARKERS: _write_txn_markers,
    ApiKey.DESCRIBE_PRODUCERS: _nested("topics", "partition_indexes"),
    ApiKey.DESCRIBE_TRANSACTIONS: _items("transactional_ids"),
}
"""API key -> the number of items a request names."""


class RequestCaps:
    def __init__(self, limit: int) -> None:
        self.limit = limit

    def check(self, api_key: int, body: Body) -> int:
        """How many items the request names (0 for an API not in the table); raise
        INVALID_REQUEST if more than ``limit``."""
        counter = COUNTERS.get(api_key)
        if counter is None:
            return 0
        count = counter(body)
        if count > self.limit:
            raise InvalidRequestError(
                f"{ApiKey(api_key).name} names {count} items (topics, partitions, groups,"
                f" resources), more than request.max.partitions ({self.limit})"
            )
        return count

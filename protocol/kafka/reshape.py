"""Older versions' bodies in the newest version's shape, and back.

Handlers read one shape per API: the newest version's. A few APIs changed shape, not
just fields, between versions; their declarations (groups.py, offsets.py) say how each
version is on the wire, and this module converts:

    API               old versions                      newest shape
    FindCoordinator   v0-3: key -> error_code, node_id,  v4: coordinator_keys ->
                      host, port, error_message          coordinators (one per key)
    LeaveGroup        v0-2: member_id -> error_code      v3+: members -> members
                                                         (one error code each)
    OffsetFetch       v1-7: group_id, topics ->          v8: groups -> groups (topics
                      topics, error_code (v2+)           and error_code per group)
    Fetch             v4-14: replica_id                  v15+: replica_state.replica_id,
                                                         read as replica_id (the one
                                                         key handlers and metrics read)

``request_to_newest`` runs after decoding, ``response_from_newest`` before encoding
(with the request in the newest shape, which some old answers are built from). The
old-shape request keys stay in the body at the values the msgpack schemas
(protocol/messages/groups.py) give them when absent (``key`` "", ``member_id`` "",
OffsetFetch's top-level ``group_id`` and ``topics`` None), so a handler sees the same
body from both listeners. JoinGroup gains ``require_known_member_id``, which Kafka
derives from the version. Every other API passes through unchanged.

How old answers carry what the newest shape says per item, as Kafka's broker does:
a FindCoordinator v0-3 answer is the one coordinator asked for; a LeaveGroup v0-2
answer's error is the top-level one, else the first member's; an OffsetFetch v1 answer
has no group-level error, so a group error is given on every partition asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from minibroker.protocol.api import Body
from minibroker.protocol.messages.data import FETCH
from minibroker.protocol.messages.groups import FIND_COORDINATOR, JOIN_GROUP, LEAVE_GROUP
from minibroker.protocol.messages.offsets import OFFSET_FETCH

FIND_COORDINATOR_BATCHED: Final = 4
LEAVE_GROUP_BATCHED: Final = 3
OFFSET_FETCH_BATCHED: Final = 8
"""The first versions of FindCoordinator, LeaveGroup and OffsetFetch in the newest shape."""

OFFSET_FETCH_GROUP_ERRORS: Final = 2
"""OffsetFetch versions below this have no group-level error code."""

FETCH_REPLICA_STATE: Final = 15
"""Fetch versions from this one on carry the follower's id in ``replica_state`` (KIP-903)."""

JOIN_GROUP_MEMBER_ID_REQUIRED: Final = 4
"""JoinGroup versions from this one on get MEMBER_ID_REQUIRED on a first join (KIP-394):
older clients do not know the error, they are given a member id at once."""


def _find_coordinator_request(version: int, body: Body) -> Body:
    if version < FIND_COORDINATOR_BATCHED:
        body["coordinator_keys"] = [body["key"]]
    body["key"] = ""
    return body


def _find_coordinator_response(version: int, request: Body, body: Body) -> Body:
    coordinators = body.get("coordinators") or [{}]
    first = coordinators[0]
    return {
        "throttle_time_ms": body.get("throttle_time_ms", 0),
        "error_code": first.get("error_code", body.get("error_code", 0)),
        "error_message": first.get("error_message", body.get("error_message")),
        "node_id": first.get("node_id", -1),
        "host": first.get("host", ""),
        "port": first.get("port", -1),
    }


def _fetch_request(version: int, body: Body) -> Body:
    if version >= FETCH_REPLICA_STATE and body["replica_state"] is not None:
        body["replica_id"] = body["replica_state"]["replica_id"]
    return body


def _join_group_request(version: int, body: Body) -> Body:
    body["require_known_member_id"] = version >= JOIN_GROUP_MEMBER_ID_REQUIRED
    return body


def _leave_group_request(version: int, body: Body) -> Body:
    if version < LEAVE_GROUP_BATCHED:
        body["members"] = [{"member_id": body["member_id"], "group_instance_id": None}]
    body["member_id"] = ""
    return body


def _leave_group_response(version: int, request: Body, body: Body) -> Body:
    error_code = body.get("error_code", 0)
    if not error_code:
        member_errors = (m.get("error_code", 0) for m in body.get("members") or ())
        error_code = next((code for code in member_errors if code), 0)
    return {"throttle_time_ms": body.get("throttle_time_ms", 0), "error_code": error_code}


def _offset_fetch_request(version: int, body: Body) -> Body:
    if version < OFFSET_FETCH_BATCHED:
        body["groups"] = [{"group_id": body["group_id"], "topics": body["topics"]}]
    body["group_id"] = body["topics"] = None
    return body


def _offset_fetch_response(version: int, request: Body, body: Body) -> Body:
    groups = body.get("groups") or [{}]
    group = groups[0]
    error_code = group.get("error_code", 0)
    topics = group.get("topics") or []
    if error_code and version < OFFSET_FETCH_GROUP_ERRORS:
        asked = (request.get("groups") or [{}])[0].get("topics") or ()
        topics = [
            {
                "name": topic["name"],
                "partitions": [
                    {"partition_index": p, "committed_offset": -1, "error_code": error_code}
                    for p in topic["partition_indexes"]
                ],
            }
            for topic in asked
        ]
    return {
        "throttle_time_ms": body.get("throttle_time_ms", 0),
        "topics": topics,
        "error_code": error_code,
    }


_REQUESTS: Final[dict[int, Callable[[int, Body], Body]]] = {
    FETCH.api_key: _fetch_request,
    FIND_COORDINATOR.api_key: _find_coordinator_request,
    JOIN_GROUP.api_key: _join_group_request,
    LEAVE_GROUP.api_key: _leave_group_request,
    OFFSET_FETCH.api_key: _offset_fetch_request,
}

_RESPONSES: Final[dict[int, tuple[int, Callable[[int, Body, Body], Body]]]] = {
    FIND_COORDINATOR.api_key: (FIND_COORDINATOR_BATCHED, _find_coordinator_response),
    LEAVE_GROUP.api_key: (LEAVE_GROUP_BATCHED, _leave_group_response),
    OFFSET_FETCH.api_key: (OFFSET_FETCH_BATCHED, _offset_fetch_response),
}
"""Per reshaped API key: the first version answered in the newest shape, and how older
versions are answered."""


def request_to_newest(api_key: int, version: int, body: Body) -> Body:
    """A decoded request of ``version`` in the shape of the newest version."""
    reshape = _REQUESTS.get(api_key)
    return body if reshape is None else reshape(version, body)


def response_from_newest(api_key: int, version: int, request: Body, body: Body) -> Body:
    """A response body in the newest shape as ``version`` carries it; ``request`` is
    the request it answers, in the newest shape."""
    reshaped = _RESPONSES.get(api_key)
    if reshaped is None or version >= reshaped[0]:
        return body
    return reshaped[1](version, request, body)

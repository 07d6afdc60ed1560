"""The group coordinator's APIs through the Kafka listener's codec: handlers see every
version in the newest version's shape (protocol/kafka/reshape.py), clients get answers
in the version they asked for (checked with kafka-python's decoder), whole-request
failures answer every group, key or partition the request named, and ApiVersions
advertises each group API once a handler serves it."""

from __future__ import annotations

from typing import Any

import pytest
from kafka.protocol.admin import DeleteGroupsResponse, DescribeGroupsResponse
from kafka.protocol.consumer import LeaveGroupResponse, OffsetCommitResponse, OffsetFetchResponse
from kafka.protocol.metadata import ApiVersionsResponse, FindCoordinatorResponse

from minibroker.broker.metrics import BrokerMetrics
from minibroker.broker.network.kafka_codec import KafkaCodec
from minibroker.broker.requests.dispatcher import Handler, RequestDispatcher
from minibroker.protocol.api import ApiKey, Body
from minibroker.protocol.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    NotCoordinatorError,
)
from minibroker.protocol.messages.bodies import Route
from tests.unit.broker.network.test_kafka_codec import answer, frame_of

OFFSET_COMMIT = ApiKey.OFFSET_COMMIT
OFFSET_FETCH = ApiKey.OFFSET_FETCH
FIND_COORDINATOR = ApiKey.FIND_COORDINATOR
JOIN_GROUP = ApiKey.JOIN_GROUP
LEAVE_GROUP = ApiKey.LEAVE_GROUP
DESCRIBE_GROUPS = ApiKey.DESCRIBE_GROUPS
DELETE_GROUPS = ApiKey.DELETE_GROUPS
GROUP_APIS = [
    ApiKey.OFFSET_COMMIT,
    ApiKey.OFFSET_FETCH,
    ApiKey.FIND_COORDINATOR,
    ApiKey.JOIN_GROUP,
    ApiKey.HEARTBEAT,
    ApiKey.LEAVE_GROUP,
    ApiKey.SYNC_GROUP,
    ApiKey.DESCRIBE_GROUPS,
    ApiKey.LIST_GROUPS,
    ApiKey.DELETE_GROUPS,
    ApiKey.OFFSET_DELETE,
]

UNKNOWN_MEMBER_ID = 25
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
COORDINATOR_LOAD_IN_PROGRESS = 14


def codec_serving(handlers: dict[int, Handler]) -> KafkaCodec:
    dispatcher = RequestDispatcher(BrokerMetrics())
    for api_key, handler in handlers.items():
        dispatcher.register(Route(api_key), handler)
    return KafkaCodec(dispatcher)


class Recorder:
    """A handler that keeps the bodies it was given and answers ``reply``."""

    def __init__(self, reply: Body) -> None:
        self.reply = reply
        self.seen: list[Body] = []

    def __call__(self, header: Any, body: Body) -> Body:
        self.seen.append(body)
        return self.reply


def refusing(error: Exception) -> Handler:
    def handler(header: Any, body: Body) -> Body:
        raise error

    return handler


COORDINATOR = {
    "key": "g1",
    "node_id": 2,
    "host": "msgpack-host",
    "port": 9093,
    "error_code": 0,
    "error_message": None,
    "kafka_host": "127.0.0.1",
    "kafka_port": 19093,
}


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_find_coordinator_before_v4_reaches_the_handler_as_one_coordinator_key(
    version: int,
) -> None:
    handler = Recorder({"throttle_time_ms": 0, "coordinators": [COORDINATOR]})
    codec = codec_serving({FIND_COORDINATOR: handler})
    reply = codec.handle(frame_of(FIND_COORDINATOR, version, {"key": "g1", "key_type": 0}))

    [seen] = handler.seen
    assert seen == {"key": "", "key_type": 0, "coordinator_keys": ["g1"]}
    response = FindCoordinatorResponse[version].decode(answer(reply), header=True, framed=True)
    assert (response.error_code, response.node_id, response.host, response.port) == (
        0,
        2,
        "127.0.0.1",
        19093,
    )


def test_find_coordinator_v4_passes_every_key_and_every_coordinator_through() -> None:
    other = {**COORDINATOR, "key": "g2", "node_id": 3, "kafka_port": 19094}
    handler = Recorder({"coordinators": [COORDINATOR, other]})
    codec = codec_serving({FIND_COORDINATOR: handler})
    request = {"key_type": 0, "coordinator_keys": ["g1", "g2"]}
    reply = codec.handle(frame_of(FIND_COORDINATOR, 4, request))

    assert handler.seen == [{**request, "key": ""}]
    response = FindCoordinatorResponse[4].decode(answer(reply), header=True, framed=True)
    assert [(c.key, c.node_id, c.port) for c in response.coordinators] == [
        ("g1", 2, 19093),
        ("g2", 3, 19094),
    ]


@pytest.mark.parametrize("version", [1, 4])
def test_a_coordinator_without_a_kafka_listener_is_not_available_on_it(version: int) -> None:
    unreachable = {**COORDINATOR, "kafka_host": None, "kafka_port": None}
    codec = codec_serving({FIND_COORDINATOR: Recorder({"coordinators": [unreachable]})})
    request = {"key": "g1", "coordinator_keys": ["g1"]}
    reply = codec.handle(frame_of(FIND_COORDINATOR, version, request))

    response = FindCoordinatorResponse[version].decode(answer(reply), header=True, framed=True)
    found = response if version < 4 else response.coordinators[0]
    assert (found.error_code, found.node_id, found.host) == (COORDINATOR_NOT_AVAILABLE, -1, "")


@pytest.mark.parametrize("version", [0, 3, 4, 7])
def test_join_group_asks_for_the_member_id_round_trip_from_v4_on(version: int) -> None:
    """v0 has no rebalance timeout: -1 tells the coordinator to use the session's."""
    handler = Recorder({"error_code": 0, "member_id": "m-1", "generation_id": 1})
    codec = codec_serving({JOIN_GROUP: handler})
    request = {
        "group_id": "g",
        "session_timeout_ms": 10_000,
        "rebalance_timeout_ms": 30_000,
        "member_id": "",
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b"subscription"}],
    }
    codec.handle(frame_of(JOIN_GROUP, version, request))

    [seen] = handler.seen
    assert seen["require_known_member_id"] is (version >= 4)
    assert seen["rebalance_timeout_ms"] == (-1 if version == 0 else 30_000)


@pytest.mark.parametrize("version", [0, 2, 4])
def test_find_coordinator_refused_as_a_whole_answers_the_error_for_each_key(version: int) -> None:
    codec = codec_serving({FIND_COORDINATOR: refusing(CoordinatorNotAvailableError("loading"))})
    request = {"key": "g1", "coordinator_keys": ["g1"]}
    reply = codec.handle(frame_of(FIND_COORDINATOR, version, request))

    response = FindCoordinatorResponse[version].decode(answer(reply), header=True, framed=True)
    if version < 4:
        assert (response.error_code, response.node_id) == (COORDINATOR_NOT_AVAILABLE, -1)
    else:
        assert [(c.key, c.error_code) for c in response.coordinators] == [
            ("g1", COORDINATOR_NOT_AVAILABLE)
        ]


@pytest.mark.parametrize("version", [0, 1, 2])
def test_leave_group_before_v3_is_one_member_and_answers_that_members_error(
    version: int,
) -> None:
    reply_body = {
        "error_code": 0,
        "members": [{"member_id": "m-1", "group_instance_id": None, "error_code": 25}],
    }
    handler = Recorder(reply_body)
    codec = codec_serving({LEAVE_GROUP: handler})
    reply = codec.handle(frame_of(LEAVE_GROUP, version, {"group_id": "g", "member_id": "m-1"}))

    assert handler.seen == [
        {
            "group_id": "g",
            "member_id": "",
            "members": [{"member_id": "m-1", "group_instance_id": None}],
        }
    ]
    response = LeaveGroupResponse[version].decode(answer(reply), header=True, framed=True)
    assert response.error_code == UNKNOWN_MEMBER_ID


def test_leave_group_v3_passes_static_members_through_with_their_own_errors() -> None:
    members = [
        {"member_id": "", "group_instance_id": "i-1", "error_code": 0},
        {"member_id": "m-2", "group_instance_id": None, "error_code": UNKNOWN_MEMBER_ID},
    ]
    handler = Recorder({"error_code": 0, "members": members})
    codec = codec_serving({LEAVE_GROUP: handler})
    request = {
        "group_id": "g",
        "members": [
            {"member_id": "", "group_instance_id": "i-1"},
            {"member_id": "m-2", "group_instance_id": None},
        ],
    }
    reply = codec.handle(frame_of(LEAVE_GROUP, 4, request))

    assert handler.seen == [{**request, "member_id": ""}]
    response = LeaveGroupResponse[4].decode(answer(reply), header=True, framed=True)
    assert response.error_code == 0
    assert [(m.group_instance_id, m.error_code) for m in response.members] == [
        ("i-1", 0),
        (None, UNKNOWN_MEMBER_ID),
    ]


OFFSETS_OF_T = {
    "name": "t",
    "partitions": [
        {
            "partition_index": 0,
            "committed_offset": 42,
            "committed_leader_epoch": 3,
            "metadata": "m",
            "error_code": 0,
        },
        {
            "partition_index": 1,
            "committed_offset": -1,
            "committed_leader_epoch": -1,
            "metadata": None,
            "error_code": 0,
        },
    ],
}


@pytest.mark.parametrize("version", [1, 2, 5, 7])
def test_offset_fetch_before_v8_is_one_group_and_answers_its_offsets_at_top_level(
    version: int,
) -> None:
    handler = Recorder({"groups": [{"group_id": "g", "topics": [OFFSETS_OF_T], "error_code": 0}]})
    codec = codec_serving({OFFSET_FETCH: handler})
    asked = [{"name": "t", "partition_indexes": [0, 1]}]
    reply = codec.handle(
        frame_of(OFFSET_FETCH, version, {"group_id": "g", "topics": asked, "require_stable": True})
    )

    assert handler.seen == [
        {
            "group_id": None,
            "topics": None,
            "groups": [{"group_id": "g", "topics": asked}],
            "require_stable": version >= 7,
        }
    ]
    response = OffsetFetchResponse[version].decode(answer(reply), header=True, framed=True)
    [topic] = response.topics
    assert [(p.partition_index, p.committed_offset, p.metadata) for p in topic.partitions] == [
        (0, 42, "m"),
        (1, -1, None),
    ]
    if version >= 5:
        assert topic.partitions[0].committed_leader_epoch == 3


def test_offset_fetch_v2_null_topics_asks_for_every_committed_partition() -> None:
    handler = Recorder({"groups": [{"group_id": "g", "topics": [], "error_code": 0}]})
    codec = codec_serving({OFFSET_FETCH: handler})
    codec.handle(frame_of(OFFSET_FETCH, 2, {"group_id": "g", "topics": None}))
    assert handler.seen[0]["groups"] == [{"group_id": "g", "topics": None}]


@pytest.mark.parametrize("version", [1, 3, 8])
def test_offset_fetch_group_error_reaches_clients_of_every_version(version: int) -> None:
    handler = Recorder(
        {"groups": [{"group_id": "g", "topics": [], "error_code": COORDINATOR_LOAD_IN_PROGRESS}]}
    )
    codec = codec_serving({OFFSET_FETCH: handler})
    asked = [{"name": "t", "partition_indexes": [0, 1]}]
    request = {"group_id": "g", "topics": asked, "groups": [{"group_id": "g", "topics": asked}]}
    reply = codec.handle(frame_of(OFFSET_FETCH, version, request))

    response = OffsetFetchResponse[version].decode(answer(reply), header=True, framed=True)
    if version == 1:  # no group-level error yet: every partition asked carries it
        [topic] = response.topics
        assert [(p.partition_index, p.error_code) for p in topic.partitions] == [
            (0, COORDINATOR_LOAD_IN_PROGRESS),
            (1, COORDINATOR_LOAD_IN_PROGRESS),
        ]
    elif version < 8:
        assert (response.error_code, response.topics) == (COORDINATOR_LOAD_IN_PROGRESS, [])
    else:
        assert [(g.group_id, g.error_code) for g in response.groups] == [
            ("g", COORDINATOR_LOAD_IN_PROGRESS)
        ]


def test_offset_fetch_v8_refused_as_a_whole_answers_the_error_for_each_group() -> None:
    codec = codec_serving({OFFSET_FETCH: refusing(NotCoordinatorError("moved"))})
    request = {"groups": [{"group_id": "a", "topics": None}, {"group_id": "b", "topics": None}]}
    reply = codec.handle(frame_of(OFFSET_FETCH, 8, request))
    response = OffsetFetchResponse[8].decode(answer(reply), header=True, framed=True)
    assert [(g.group_id, g.error_code) for g in response.groups] == [
        ("a", NOT_COORDINATOR),
        ("b", NOT_COORDINATOR),
    ]


@pytest.mark.parametrize("version", [2, 8])
def test_offset_commit_refused_as_a_whole_answers_the_error_on_every_partition(
    version: int,
) -> None:
    codec = codec_serving({OFFSET_COMMIT: refusing(NotCoordinatorError("moved"))})
    request = {
        "group_id": "g",
        "generation_id_or_member_epoch": 1,
        "member_id": "m",
        "topics": [
            {
                "name": "t",
                "partitions": [
                    {"partition_index": 0, "committed_offset": 5, "committed_metadata": None},
                    {"partition_index": 3, "committed_offset": 9, "committed_metadata": ""},
                ],
            }
        ],
    }
    reply = codec.handle(frame_of(OFFSET_COMMIT, version, request))
    response = OffsetCommitResponse[version].decode(answer(reply), header=True, framed=True)
    [topic] = response.topics
    assert (topic.name, [(p.partition_index, p.error_code) for p in topic.partitions]) == (
        "t",
        [(0, NOT_COORDINATOR), (3, NOT_COORDINATOR)],
    )


def test_describe_and_delete_groups_refused_as_a_whole_answer_each_group() -> None:
    codec = codec_serving(
        {
            DESCRIBE_GROUPS: refusing(CoordinatorLoadInProgressError("loading")),
            DELETE_GROUPS: refusing(NotCoordinatorError("moved")),
        }
    )
    described = DescribeGroupsResponse[5].decode(
        answer(codec.handle(frame_of(DESCRIBE_GROUPS, 5, {"groups": ["a", "b"]}))),
        header=True,
        framed=True,
    )
    assert [(g.group_id, g.error_code) for g in described.groups] == [
        ("a", COORDINATOR_LOAD_IN_PROGRESS),
        ("b", COORDINATOR_LOAD_IN_PROGRESS),
    ]
    deleted = DeleteGroupsResponse[2].decode(
        answer(codec.handle(frame_of(DELETE_GROUPS, 2, {"groups_names": ["a"]}))),
        header=True,
        framed=True,
    )
    assert [(r.group_id, r.error_code) for r in deleted.results] == [("a", NOT_COORDINATOR)]


def test_api_versions_advertises_the_group_apis_once_a_handler_serves_them() -> None:
    before = codec_serving({})
    after = codec_serving({api: Recorder({}) for api in GROUP_APIS})

    def advertised(codec: KafkaCodec) -> dict[int, tuple[int, int]]:
        reply = codec.handle(frame_of(ApiKey.API_VERSIONS, 3, {}))
        response = ApiVersionsResponse[3].decode(answer(reply), header=True, framed=True)
        return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}

    assert set(advertised(before)) == {ApiKey.API_VERSIONS}
    assert advertised(after) == {
        ApiKey.OFFSET_COMMIT: (2, 8),
        ApiKey.OFFSET_FETCH: (1, 8),
        ApiKey.FIND_COORDINATOR: (0, 4),
        ApiKey.JOIN_GROUP: (0, 7),
        ApiKey.HEARTBEAT: (0, 4),
        ApiKey.LEAVE_GROUP: (0, 4),
        ApiKey.SYNC_GROUP: (0, 5),
        ApiKey.DESCRIBE_GROUPS: (0, 5),
        ApiKey.LIST_GROUPS: (0, 4),
        ApiKey.DELETE_GROUPS: (0, 2),
        ApiKey.OFFSET_DELETE: (0, 0),
        ApiKey.API_VERSIONS: (0, 3),
    }

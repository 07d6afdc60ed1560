"""Answers the Kafka listener builds itself: whole-request errors and request fix-ups.

``error_response(api_key, request, error)`` is what Kafka's ``getErrorResponse`` gives:
the API's own response shape with ``error`` on every topic, partition or resource the
request named (a client reads errors where it expects them, not in a generic body).
``normalize_request`` turns the few Kafka-only request conventions into what the
handlers expect (Metadata v0's empty topic list means every topic).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from minibroker.protocol.api import Body
from minibroker.protocol.errors import CorruptMessageError, KafkaError


def _per_partition(
    request: Body,
    *,
    topic_key: str,
    partition_in: str,
    partition_out: str,
    extra: Body,
    error: KafkaError,
) -> list[Body]:
    return [
        {
            topic_key: topic[topic_key],
            "partitions": [
                {partition_out: p[partition_in], "error_code": error.code, **extra}
                for p in topic["partitions"]
            ],
        }
        for topic in request.get("topics") or ()
    ]


def _produce(request: Body, error: KafkaError) -> Body:
    topics = _per_partition(
        request,
        topic_key="name",
        partition_in="index",
        partition_out="index",
        extra={"base_offset": -1, "error_message": error.message},
        error=error,
    )
    return {"topics": topics, "throttle_time_ms": 0}


def _fetch(request: Body, error: KafkaError) -> Body:
    topics = _per_partition(
        request,
        topic_key="topic",
        partition_in="partition",
        partition_out="partition_index",
        extra={"high_watermark": -1, "records": None},
        error=error,
    )
    for topic, asked in zip(topics, request.get("topics") or (), strict=True):
        if "topic_id" in asked:  # v13+ answer by id
            topic["topic_id"] = asked["topic_id"]
    return {"error_code": error.code, "topics": topics}


def _list_offsets(request: Body, error: KafkaError) -> Body:
    topics = _per_partition(
        request,
        topic_key="name",
        partition_in="partition_index",
        partition_out="partition_index",
        extra={},
        error=error,
    )
    return {"topics": topics}


def _offset_for_leader_epoch(request: Body, error: KafkaError) -> Body:
    topics = _per_partition(
        request,
        topic_key="topic",
        partition_in="partition",
        partition_out="partition",
        extra={},
        error=error,
    )
    return {"topics": topics}


def _metadata(request: Body, error: KafkaError) -> Body:
    names = [t["name"] for t in request.get("topics") or ()]
    return {"topics": [{"error_code": error.code, "name": n} for n in names]}


def _create_topics(request: Body, error: KafkaError) -> Body:
    return {
        "topics": [
            {"name": t["name"], "error_code": error.code, "error_message": error.message}
            for t in request["topics"]
        ]
    }


def _delete_topics(request: Body, error: KafkaError) -> Body:
    return {
        "topics": [
            {"name": name, "error_code": error.code, "error_message": error.message}
            for name in request["topic_names"]
        ]
    }


def _resources(key: str) -> Callable[[Body, KafkaError], Body]:
    def answer(request: Body, error: KafkaError) -> Body:
        return {
            key: [
                {
                    "error_code": error.code,
                    "error_message": error.message,
                    "resource_type": r["resource_type"],
                    "resource_name": r["resource_name"],
                }
                for r in request["resources"]
            ]
        }

    return answer


def _alter_replica_log_dirs(request: Body, error: KafkaError) -> Body:
    return {
        "results": [
            {
                "topic_name": topic["name"],
                "partitions": [
                    {"partition_index": p, "error_code": error.code} for p in topic["partitions"]
                ],
            }
            for entry in request["dirs"]
            for topic in entry["topics"]
        ]
    }


def _create_acls(request: Body, error: KafkaError) -> Body:
    results = [{"error_code": error.code, "error_message": error.message}]
    return {"results": results * len(request["creations"])}


def _delete_acls(request: Body, error: KafkaError) -> Body:
    result = {"error_code": error.code, "error_message": error.message, "matching_acls": []}
    return {"filter_results": [dict(result) for _ in request["filters"]]}


def _offset_commit(request: Body, error: KafkaError) -> Body:
    return {
        "topics": [
            {
                "name": topic["name"],
                "partitions": [
                    {"partition_index": p["partition_index"], "error_code": error.code}
                    for p in topic["partitions"]
                ],
            }
            for topic in request["topics"]
        ]
    }


def _offset_fetch(request: Body, error: KafkaError) -> Body:
    return {
        "groups": [
            {"group_id": g["group_id"], "topics": [], "error_code": error.code}
            for g in request["groups"]
        ]
    }


def _find_coordinator(request: Body, error: KafkaError) -> Body:
    return {
        "coordinators": [
            {
                "key": key,
                "node_id": -1,
                "host": "",
                "port": -1,
                "error_code": error.code,
                "error_message": error.message,
            }
            for key in request["coordinator_keys"]
        ]
    }


def _describe_groups(request: Body, error: KafkaError) -> Body:
    return {"groups": [{"group_id": g, "error_code": error.code} for g in request["groups"]]}


def _delete_groups(request: Body, error: KafkaError) -> Body:
    return {"results": [{"group_id": g, "error_code": error.code} for g in request["groups_names"]]}


def _add_partitions_to_txn(request: Body, error: KafkaError) -> Body:
    """Every partition answers the error (v0-3); the brokers' form carries it on top."""
    return {
        "error_code": error.code,
        "results_by_transaction": [],
        "results": [
            {
                "name": topic["name"],
                "results": [
                    {"partition_index": p, "partition_error_code": error.code}
                    for p in topic["partitions"]
                ],
            }
            for topic in request.get("topics") or ()
        ],
    }


_ERROR_RESPONSES: Final[dict[int, Callable[[Body, KafkaError], Body]]] = {
    0: _produce,
    1: _fetch,
    2: _list_offsets,
    3: _metadata,
    8: _offset_commit,
    9: _offset_fetch,
    10: _find_coordinator,
    15: _describe_groups,
    19: _create_topics,
    20: _delete_topics,
    23: _offset_for_leader_epoch,
    24: _add_partitions_to_txn,
    28: _offset_commit,  # TxnOffsetCommit answers in the same shape
    30: _create_acls,
    31: _delete_acls,
    32: _resources("results"),
    33: _resources("responses"),
    34: _alter_replica_log_dirs,
    42: _delete_groups,
}


def error_response(api_key: int, request: Body, error: KafkaError) -> Body:
    """The response refusing ``request`` (in the newest version's shape, protocol/kafka/
    reshape.py) as a whole; APIs without per-item errors (ApiVersions, DescribeCluster,
    JoinGroup, Heartbeat ...) carry it in their top-level ``error_code``."""
    build = _ERROR_RESPONSES.get(api_key)
    if build is None:
        return {"error_code": error.code, "error_message": error.message}
    return build(request, error)


def normalize_request(api_key: int, api_version: int, body: Body) -> Body:
    """Kafka-only request conventions in the handlers' terms; raises the KafkaError that
    refuses the whole request when it has none (Produce with null records)."""
    if api_key == 3 and api_version == 0 and not body["topics"]:
        body["topics"] = None  # Metadata v0 asks for every topic with an empty list
    elif api_key == 0:
        for topic in body["topics"]:
            for partition in topic["partitions"]:
                if partition["records"] is None:
                    raise CorruptMessageError(
                        f"null records for {topic['name']}-{partition['index']}"
                    )
    return body

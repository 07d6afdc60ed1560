"""LastEncoded and the memoised encoders: the same bytes as encoding afresh, reused
only for the very same body object."""

from __future__ import annotations

from typing import Any

import pytest

from minibroker.protocol.answer_memo import MIN_KEPT, LastEncoded
from minibroker.protocol.api import (
    ApiKey,
    RequestHeader,
    encode_memoised_response,
    encode_packed_response,
)
from minibroker.protocol.kafka import codec as kafka
from minibroker.protocol.kafka.reshape import _RESPONSES


def _metadata(partitions: int, leader: int = 1) -> dict[str, Any]:
    return {
        "throttle_time_ms": 0,
        "brokers": [{"node_id": 1, "host": "h", "port": 9092, "rack": None}],
        "cluster_id": "c",
        "controller_id": 1,
        "topics": [
            {
                "error_code": 0,
                "name": "t",
                "topic_id": bytes(16),
                "is_internal": False,
                "partitions": [
                    {
                        "error_code": 0,
                        "partition_index": p,
                        "leader_id": leader,
                        "leader_epoch": 0,
                        "replica_nodes": [1, 2, 3],
                        "isr_nodes": [1, 2, 3],
                        "offline_replicas": [],
                    }
                    for p in range(partitions)
                ],
                "topic_authorized_operations": -2147483648,
            }
        ],
        "cluster_authorized_operations": -2147483648,
    }


def _counting(encode: Any) -> tuple[list[int], Any]:
    calls: list[int] = []

    def counted(body: Any) -> bytes:
        calls.append(1)
        return bytes(encode(body))

    return calls, counted


@pytest.mark.timeout(10)
def test_a_large_encoding_is_reused_for_the_same_object_and_key_only() -> None:
    memo = LastEncoded()
    calls, encode = _counting(lambda body: b"x" * body["size"])
    big = {"size": MIN_KEPT}
    assert memo.encoded(big, 1, encode) == b"x" * MIN_KEPT
    assert memo.encoded(big, 1, encode) == b"x" * MIN_KEPT
    assert len(calls) == 1
    memo.encoded(big, 2, encode)  # another version: encoded again
    memo.encoded({"size": MIN_KEPT}, 2, encode)  # an equal but new object: again
    assert len(calls) == 3


@pytest.mark.timeout(10)
def test_small_encodings_are_not_kept_and_do_not_evict_the_large_one() -> None:
    memo = LastEncoded()
    calls, encode = _counting(lambda body: b"x" * body["size"])
    big, small = {"size": MIN_KEPT}, {"size": 10}
    memo.encoded(big, None, encode)
    memo.encoded(small, None, encode)
    memo.encoded(small, None, encode)
    memo.encoded(big, None, encode)
    assert len(calls) == 3


@pytest.mark.timeout(10)
def test_the_memoised_msgpack_answer_is_the_plain_one_with_its_own_correlation_id() -> None:
    memo, body = LastEncoded(), _metadata(5000)
    for correlation_id in (1, 300, 70_000):
        assert encode_memoised_response(correlation_id, body, memo) == encode_packed_response(
            correlation_id, body
        )


@pytest.mark.timeout(10)
@pytest.mark.parametrize("version", [1, 8, 9, 12])
def test_the_memoised_kafka_answer_is_the_plain_one_at_every_version(version: int) -> None:
    memo = LastEncoded()
    first, second = _metadata(5000), _metadata(5000, leader=2)
    for correlation_id, body in ((7, first), (8, first), (9, second)):
        header = RequestHeader(ApiKey.METADATA, version, correlation_id, "c")
        assert b"".join(kafka.encode_memoised_response(header, body, memo, dict)) == b"".join(
            kafka.encode_response(header, body)
        )


def test_metadata_answers_have_no_older_shape_the_memo_would_skip() -> None:
    # The Kafka listener's memo encodes the newest shape at the asked version; a reshape
    # of Metadata answers (which could depend on the request) would have to join it.
    assert ApiKey.METADATA not in _RESPONSES

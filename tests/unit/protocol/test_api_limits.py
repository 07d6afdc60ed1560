"""decode_request's bounds: a request too big to decode cheaply is refused, quickly, as
INVALID_REQUEST to its own correlation id, saying which limit it broke."""

from __future__ import annotations

import time
from typing import Any

import msgpack
import pytest

from minibroker.protocol.api import (
    MAX_CLIENT_REQUEST_ELEMENTS,
    MAX_MAP_KEYS,
    MAX_STRING_BYTES,
    ApiKey,
    InvalidRequestBody,
    decode_request,
    encode_request,
)

QUICK_S = 0.05
"""A refused request may not cost more than this to decode (several times the worst
measured case, for a loaded machine)."""


def fetch(partitions: list[dict[str, Any]], topics: int = 1) -> bytes:
    body = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": 1 << 20,
        "topics": [{"topic": f"t{i}", "partitions": partitions} for i in range(topics)],
    }
    return encode_request(ApiKey.FETCH, 0, 7, "c", body)


def partition(index: int) -> dict[str, Any]:
    return {"partition": index, "fetch_offset": 0, "partition_max_bytes": 1 << 20}


def refused(payload: bytes) -> tuple[InvalidRequestBody, float]:
    started = time.perf_counter()
    with pytest.raises(InvalidRequestBody) as info:
        decode_request(payload)
    return info.value, time.perf_counter() - started


def test_one_partition_named_300000_times_is_refused_before_it_is_decoded() -> None:
    error, took = refused(fetch([partition(0)] * 300_000))
    assert error.header.correlation_id == 7
    assert "too large to decode" in error.message
    assert f"max_array_len({MAX_CLIENT_REQUEST_ELEMENTS})" in error.message
    assert took < QUICK_S


def test_arrays_each_within_bounds_but_too_many_elements_in_all_are_refused() -> None:
    per_topic = [partition(i) for i in range(1000)]
    error, _ = refused(fetch(per_topic, topics=MAX_CLIENT_REQUEST_ELEMENTS // 1000 + 1))
    assert f"more than {MAX_CLIENT_REQUEST_ELEMENTS} array elements" in error.message


def test_only_the_controllers_requests_get_the_large_element_budget() -> None:
    state = {
        "topic_name": "t",
        "partition_index": 0,
        "controller_epoch": 1,
        "leader": 1,
        "leader_epoch": 0,
        "isr": [1],
        "zk_version": 0,
        "replicas": [1],
    }
    states = [state | {"partition_index": i} for i in range(MAX_CLIENT_REQUEST_ELEMENTS)]
    body = {
        "controller_id": 1,
        "controller_epoch": 1,
        "partition_states": states,
        "live_brokers": [],
    }
    _, decoded = decode_request(encode_request(ApiKey.UPDATE_METADATA, 0, 1, "c", body))
    assert len(decoded["partition_states"]) == MAX_CLIENT_REQUEST_ELEMENTS
    topics = [{"name": f"t{i}"} for i in range(MAX_CLIENT_REQUEST_ELEMENTS + 1)]
    error, _ = refused(encode_request(ApiKey.METADATA, 0, 2, "c", {"topics": topics}))
    assert f"max_array_len({MAX_CLIENT_REQUEST_ELEMENTS})" in error.message


def test_a_map_of_millions_of_keys_is_refused_from_its_header_alone() -> None:
    keys = 8_000_000
    head = msgpack.packb([ApiKey.METADATA, 0, 3, "c"])
    # The map's header promises 8M entries; only its first entry follows: a decoder
    # that does not check the count first would fail later, having built nothing.
    payload = b"\x95" + head[1:] + b"\xdf" + keys.to_bytes(4, "big") + b"\xa1k\xc0"
    error, took = refused(payload)
    assert error.header.correlation_id == 3
    assert f"max_map_len({MAX_MAP_KEYS})" in error.message
    assert took < QUICK_S


def test_a_string_longer_than_the_limit_is_refused() -> None:
    body = {"topics": [{"name": "x" * (MAX_STRING_BYTES + 1)}]}
    error, _ = refused(encode_request(ApiKey.METADATA, 0, 5, "c", body))
    assert error.header.correlation_id == 5
    assert "max_str_len" in error.message


def test_requests_within_the_limits_decode_as_before() -> None:
    header, body = decode_request(fetch([partition(i) for i in range(5000)], topics=2))
    assert header.correlation_id == 7
    assert len(body["topics"][1]["partitions"]) == 5000
    assert body["topics"][0]["partitions"][4999]["current_leader_epoch"] == -1

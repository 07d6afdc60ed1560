"""Requests built to be expensive are refused cheaply: a partition named more than once
in Produce, Fetch or ListOffsets is answered INVALID_REQUEST (the others in the request
are served), and a flood of bad requests writes a bounded number of log lines."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgpack
import pytest

from minibroker.broker.broker import Broker
from minibroker.broker.requests.log_limiter import DEFAULT_BURST
from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import InvalidRequestError, UnsupportedVersionError
from minibroker.protocol.frames import encode_frame
from tests.support.broker import (
    FakeController,
    WireClient,
    batch,
    broker_config,
    fetch_body,
    list_offset,
    running_broker,
)

pytestmark = pytest.mark.timeout(60)

MAX_PARTITIONS = 10


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    config = broker_config(tmp_path, request_max_partitions=MAX_PARTITIONS)
    async with running_broker(config) as broker:
        await FakeController(broker).lead("t", partitions=2)
        yield broker


def answers(response: dict[str, Any]) -> dict[int, list[int]]:
    """Error codes by partition index (a list: a partition may be answered twice)."""
    codes: dict[int, list[int]] = {}
    for topic in response["topics"]:
        for p in topic["partitions"]:
            index = p.get("index", p.get("partition_index"))
            codes.setdefault(index, []).append(p["error_code"])
    return codes


async def test_a_produce_naming_a_partition_twice_appends_neither_entry(broker: Broker) -> None:
    body = {
        "acks": 1,
        "timeout_ms": 5000,
        "topics": [
            {
                "name": "t",
                "partitions": [
                    {"index": 0, "records": batch(b"first")},
                    {"index": 1, "records": batch(b"other partition")},
                    {"index": 0, "records": batch(b"second")},
                ],
            }
        ],
    }
    async with await WireClient.connect(broker.port) as client:
        response = await client.request(ApiKey.PRODUCE, body)
        assert answers(response) == {0: [InvalidRequestError.code], 1: [0]}
        assert (await list_offset(client, "t", -1))["offset"] == 0  # partition 0: nothing


async def test_a_fetch_naming_a_partition_twice_is_refused_for_it_only(broker: Broker) -> None:
    body = fetch_body("t", {0: 0, 1: 0})
    partitions = body["topics"][0]["partitions"]
    partitions.append(dict(partitions[0]))
    async with await WireClient.connect(broker.port) as client:
        response = await client.request(ApiKey.FETCH, body)
    assert answers(response) == {0: [InvalidRequestError.code], 1: [0]}


async def test_list_offsets_answers_each_occurrence_of_a_repeated_partition(
    broker: Broker,
) -> None:
    query = {"partition_index": 0, "timestamp": -1}
    body = {
        "topics": [{"name": "t", "partitions": [query, {**query, "partition_index": 1}, query]}]
    }
    async with await WireClient.connect(broker.port) as client:
        response = await client.request(ApiKey.LIST_OFFSETS, body)
    assert answers(response) == {0: [InvalidRequestError.code] * 2, 1: [0]}


@pytest.mark.parametrize(
    ("api_key", "body"),
    [
        (ApiKey.FETCH, fetch_body("t", dict.fromkeys(range(MAX_PARTITIONS + 1), 0))),
        (
            ApiKey.LIST_OFFSETS,
            {
                "topics": [
                    {
                        "name": "t",
                        "partitions": [
                            {"partition_index": i, "timestamp": -1}
                            for i in range(MAX_PARTITIONS + 1)
                        ],
                    }
                ]
            },
        ),
        (ApiKey.METADATA, {"topics": [{"name": f"t{i}"} for i in range(MAX_PARTITIONS + 1)]}),
    ],
)
async def test_a_request_naming_more_partitions_than_the_limit_is_refused_whole(
    broker: Broker, api_key: ApiKey, body: dict[str, Any]
) -> None:
    async with await WireClient.connect(broker.port) as client:
        await client.send_request(api_key, body)
        _, response = await client.receive_response(ApiKey.API_VERSIONS)
    assert response["error_code"] == InvalidRequestError.code
    assert "request.max.partitions" in response["error_message"]


async def test_a_request_at_the_partition_limit_is_served(broker: Broker) -> None:
    body = fetch_body("t", dict.fromkeys(range(MAX_PARTITIONS), 0))
    async with await WireClient.connect(broker.port) as client:
        response = await client.request(ApiKey.FETCH, body)
    assert answers(response)[0] == [0]
    assert len(answers(response)) == MAX_PARTITIONS


async def test_thousands_of_rejected_requests_write_a_bounded_number_of_log_lines(
    broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    bad = encode_frame(msgpack.packb([int(ApiKey.METADATA), 99, 1, "c", {}]))
    count = 2000
    async with await WireClient.connect(broker.port) as client:
        await client.send_raw(bad * count)
        for _ in range(count):
            _, body = await client.receive_response(ApiKey.API_VERSIONS)
            assert body["error_code"] == UnsupportedVersionError.code
    rejected = [r for r in caplog.records if "rejected request" in r.getMessage()]
    assert len(rejected) <= DEFAULT_BURST  # per minute: earlier tests may have used some

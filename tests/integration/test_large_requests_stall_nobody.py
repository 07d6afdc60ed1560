"""The largest and the oversized requests of every kind leave other clients answered.

Recipe: a broker with a Kafka listener leads a topic of 1,000 partitions. For each case
a *load* client sends one kind of request back to back (pre-encoded: its own cost is
nothing) while a *probe* client does round trips on its open connection of a Metadata
naming a one-partition topic (costing next to nothing itself). Oversized requests -
naming more topics, partitions or groups than ``request.max.partitions``, or more
array elements than a request may hold, on either listener - are refused
(INVALID_REQUEST, or the Kafka connection closed) and the broker keeps working;
maximal ones are answered. The probe is answered throughout each case, never waiting
STALL_S, its p99 under P99_S (a bound for a loaded CI machine; the issue's 50 ms p99
bar is measured by bench/request_stall.py).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgpack
import pytest
import trio

from minibroker.broker.broker import Broker
from minibroker.net.connection import Connection
from minibroker.node.node import Node
from minibroker.protocol.api import ApiKey, RequestHeader, encode_request, latest_version
from minibroker.protocol.errors import InvalidRequestError
from minibroker.protocol.frames import FrameDecoder, encode_frame
from minibroker.protocol.kafka import codec as kafka_codec
from tests.support.broker import FakeController, batch, broker_config, fetch_body

pytestmark = pytest.mark.timeout(180)

TOPIC = "wide"
PARTITIONS = 1000
PROBE_TOPIC = "probe"
"""One partition: the probe's own round trip costs next to nothing (asking for TOPIC's
1,000 partitions would measure that answer's encoding, not the load's stall)."""
CASE_S = 1.0
STALL_S = 2.0
"""No probe round trip may take this long (a stall, not a latency bar)."""
P99_S = 0.5
"""The probe's p99 must stay under this: ten times the issue's 50 ms bar
(bench/request_stall.py measures that bar), room for a loaded 2-core CI machine."""


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    config = broker_config(tmp_path, kafka_listeners="127.0.0.1:0", offsets_topic_num_partitions=1)
    async with trio.open_nursery() as nursery:  # a Node: the group coordinator too
        broker: Broker = await nursery.start(Node(config).run)
        await FakeController(broker).lead(TOPIC, PARTITIONS)
        await FakeController(broker).lead(PROBE_TOPIC)
        await FakeController(broker).lead("__consumer_offsets")  # group "g" is served here
        yield broker
        nursery.cancel_scope.cancel()


def msgpack_frame(api_key: int, body: dict[str, Any]) -> bytes:
    return encode_frame(encode_request(api_key, latest_version(api_key), 1, "load", body))


def commit(partitions: int) -> dict[str, Any]:
    return {
        "group_id": "g",
        "generation_id": -1,
        "member_id": "",
        "topics": [
            {
                "name": TOPIC,
                "partitions": [
                    {"partition_index": p, "committed_offset": 0} for p in range(partitions)
                ],
            }
        ],
    }


OVERSIZED: dict[str, tuple[int, dict[str, Any]]] = {
    "metadata 99k topics": (
        ApiKey.METADATA,
        {"topics": [{"name": f"t{i}"} for i in range(99_000)]},
    ),
    "fetch 99k partitions": (ApiKey.FETCH, fetch_body(TOPIC, dict.fromkeys(range(99_000), 0))),
    "offset commit 300k": (ApiKey.OFFSET_COMMIT, commit(300_000)),
    "offset commit 6k": (ApiKey.OFFSET_COMMIT, commit(6_000)),
    "offset fetch 6k": (
        ApiKey.OFFSET_FETCH,
        {"group_id": "g", "topics": [{"name": TOPIC, "partition_indexes": list(range(6_000))}]},
    ),
    "create topics 30k validate only": (
        ApiKey.CREATE_TOPICS,
        {
            "topics": [
                {"name": f"t{i}", "num_partitions": 1, "replication_factor": 1}
                for i in range(30_000)
            ],
            "timeout_ms": 1000,
            "validate_only": True,
        },
    ),
    "create topics one of 10M partitions": (
        ApiKey.CREATE_TOPICS,
        {
            "topics": [{"name": "huge", "num_partitions": 10_000_000, "replication_factor": 1}],
            "timeout_ms": 1000,
            "validate_only": True,
        },
    ),
    "describe groups 6k": (ApiKey.DESCRIBE_GROUPS, {"groups": [f"g{i}" for i in range(6_000)]}),
    "delete topics 6k": (
        ApiKey.DELETE_TOPICS,
        {"topic_names": [f"t{i}" for i in range(6_000)], "timeout_ms": 0},
    ),
}

MAXIMAL: dict[str, tuple[int, dict[str, Any]]] = {
    "produce to every partition": (
        ApiKey.PRODUCE,
        {
            "acks": 1,
            "timeout_ms": 5000,
            "topics": [
                {
                    "name": TOPIC,
                    "partitions": [{"index": p, "records": batch(b"v")} for p in range(PARTITIONS)],
                }
            ],
        },
    ),
    "fetch every partition": (ApiKey.FETCH, fetch_body(TOPIC, dict.fromkeys(range(PARTITIONS), 0))),
    "metadata of everything": (ApiKey.METADATA, {"topics": None}),
    "list offsets of every partition": (
        ApiKey.LIST_OFFSETS,
        {
            "topics": [
                {
                    "name": TOPIC,
                    "partitions": [
                        {"partition_index": p, "timestamp": -1} for p in range(PARTITIONS)
                    ],
                }
            ]
        },
    ),
    "offset commit of every partition": (ApiKey.OFFSET_COMMIT, commit(PARTITIONS)),
    "offset fetch every partition": (
        ApiKey.OFFSET_FETCH,
        {
            "group_id": "g",
            "topics": [{"name": TOPIC, "partition_indexes": list(range(PARTITIONS))}],
        },
    ),
}

KAFKA_OVERSIZED: dict[str, tuple[int, int, dict[str, Any]]] = {
    "kafka metadata 99k topics": (
        ApiKey.METADATA,
        9,
        {"topics": [{"name": f"t{i}"} for i in range(99_000)], "allow_auto_topic_creation": False},
    ),
    "kafka offset commit 300k": (
        ApiKey.OFFSET_COMMIT,
        2,
        commit(300_000) | {"retention_time_ms": -1},
    ),
}


async def exchange(port: int, frame: bytes) -> bytes | None:
    """One request on a fresh connection: the answer frame, or None if it was closed."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    decoder = FrameDecoder(1 << 30)
    try:
        await stream.send_all(frame)
        while True:
            answer = decoder.next_frame()
            if isinstance(answer, bytes):
                return answer
            data = await stream.receive_some(1 << 20)
            if not data:
                return None
            decoder.feed(data)
    except trio.BrokenResourceError:
        return None
    finally:
        await stream.aclose()


async def under_load(broker: Broker, port: int, frame: bytes) -> tuple[list[bytes | None], float]:
    """Send ``frame`` back to back for CASE_S while probing; (answers, the probe's p99 s).
    Fails if any probe takes STALL_S."""
    answers: list[bytes | None] = []
    took: list[float] = []

    async def load() -> None:
        while True:
            answers.append(await exchange(port, frame))

    async with Connection("127.0.0.1", broker.port) as probe, trio.open_nursery() as nursery:
        nursery.start_soon(load)
        deadline = trio.current_time() + CASE_S
        while trio.current_time() < deadline or not answers:
            started = time.perf_counter()
            with trio.fail_after(STALL_S):
                await probe.request(ApiKey.METADATA, {"topics": [{"name": PROBE_TOPIC}]})
            took.append(time.perf_counter() - started)
            await trio.sleep(0.005)
        nursery.cancel_scope.cancel()
    took.sort()
    return answers, took[int(0.99 * (len(took) - 1))]


def msgpack_error(answer: bytes) -> int:
    """The top-level error code of a msgpack answer to a request refused as a whole."""
    body = msgpack.unpackb(answer)[-1]
    return int(body.get("error_code", 0))


async def test_oversized_requests_are_refused_and_stall_nobody(broker: Broker) -> None:
    for name, (api_key, body) in OVERSIZED.items():
        answers, p99 = await under_load(broker, broker.port, msgpack_frame(api_key, body))
        assert answers, name
        assert all(a is not None for a in answers), f"{name}: connection closed"
        assert {msgpack_error(a) for a in answers if a is not None} == {InvalidRequestError.code}, (
            name
        )
        assert p99 < P99_S, (name, p99)
    kafka = broker.kafka_address
    assert kafka is not None
    for name, (api_key, version, body) in KAFKA_OVERSIZED.items():
        frame = kafka_codec.encode_request(RequestHeader(api_key, version, 1, "load"), body)
        answers, p99 = await under_load(broker, kafka[1], frame)
        assert answers and all(a is None for a in answers), name  # closed, unread
        assert p99 < P99_S, (name, p99)


async def test_maximal_requests_are_answered_and_stall_nobody(broker: Broker) -> None:
    for name, (api_key, body) in MAXIMAL.items():
        answers, p99 = await under_load(broker, broker.port, msgpack_frame(api_key, body))
        assert answers and all(a is not None for a in answers), name
        assert p99 < P99_S, (name, p99)


async def test_a_produce_appended_in_turns_is_still_followed_by_the_next_request(
    broker: Broker,
) -> None:
    """A Produce of every partition is appended in turns; the same connection's next
    Produce, pipelined right behind it, still lands after it in the partition both
    name, and each gets its acknowledgement."""
    last = PARTITIONS - 1
    big = {
        "acks": 1,
        "timeout_ms": 5000,
        "topics": [
            {
                "name": TOPIC,
                "partitions": [{"index": p, "records": batch(b"first")} for p in range(PARTITIONS)],
            }
        ],
    }
    small = {
        "acks": 1,
        "timeout_ms": 5000,
        "topics": [{"name": TOPIC, "partitions": [{"index": last, "records": batch(b"second")}]}],
    }
    answers: dict[str, Any] = {}
    async with Connection("127.0.0.1", broker.port) as conn:

        async def send(name: str, body: dict[str, Any]) -> None:
            answers[name] = await conn.request(ApiKey.PRODUCE, body)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(send, "big", big)
            await trio.sleep(0)  # its frame goes out first
            nursery.start_soon(send, "small", small)
    codes = {p["error_code"] for p in answers["big"]["topics"][0]["partitions"]}
    assert codes == {0} and len(answers["big"]["topics"][0]["partitions"]) == PARTITIONS
    offsets = {p["index"]: p["base_offset"] for p in answers["big"]["topics"][0]["partitions"]}
    assert answers["small"]["topics"][0]["partitions"][0]["base_offset"] == offsets[last] + 1

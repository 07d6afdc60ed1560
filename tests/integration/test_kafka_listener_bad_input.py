"""Bad input on the Kafka listener never takes the broker down: the msgpack listener's
bad-input cases in Kafka's framing. A frame that cannot be answered closes only its
connection; a request that can be answered gets Kafka's error in the API's own shape.
After each abuse a good request on a NEW connection is answered."""

from __future__ import annotations

import struct
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from minibroker.broker.broker import Broker
from minibroker.protocol.api import ApiKey, RequestHeader
from minibroker.protocol.errors import (
    CorruptMessageError,
    InvalidProducerEpochError,
    InvalidRequiredAcksError,
    MessageTooLargeError,
    NotLeaderOrFollowerError,
    OutOfOrderSequenceNumberError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
)
from minibroker.protocol.kafka.codec import encode_request
from minibroker.protocol.records import Record, encode_batch
from tests.support.broker import (
    FakeController,
    batch,
    broker_config,
    partition_state,
    produce_body,
    running_broker,
)
from tests.support.broker import (
    KafkaWireClient as KafkaClient,
)

pytestmark = pytest.mark.timeout(60)

MAX_FRAME = 1 << 20
MESSAGE_MAX = 10_000
PRODUCE_VERSION = 9


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    config = broker_config(
        tmp_path,
        socket_request_max_bytes=MAX_FRAME,
        message_max_bytes=MESSAGE_MAX,
        kafka_listeners="127.0.0.1:0",
    )
    async with running_broker(config) as broker:
        await FakeController(broker).lead("t")
        yield broker


async def connect(broker: Broker) -> KafkaClient:
    assert broker.parts.kafka_server is not None
    return KafkaClient(await trio.open_tcp_stream("127.0.0.1", broker.parts.kafka_server.port))


async def assert_alive(broker: Broker) -> None:
    async with await connect(broker) as client:
        response = await client.kafka_request(ApiKey.API_VERSIONS, 3, {})
        assert response["error_code"] == 0


async def assert_closed_then_alive(broker: Broker, data: bytes) -> None:
    async with await connect(broker) as client:
        await client.send_raw(data)
        await client.assert_closed_by_peer()
    await assert_alive(broker)


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


async def test_garbage_bytes_close_only_that_connection(broker: Broker) -> None:
    await assert_closed_then_alive(broker, frame(b"\xc1\xff garbage \x00"))


async def test_negative_frame_length_closes_the_connection(broker: Broker) -> None:
    await assert_closed_then_alive(broker, struct.pack(">i", -5) + b"xxxx")


async def test_oversize_frame_length_closes_the_connection(broker: Broker) -> None:
    await assert_closed_then_alive(broker, struct.pack(">i", MAX_FRAME + 1))


async def test_frame_cut_short_then_disconnect_leaves_the_broker_alive(broker: Broker) -> None:
    async with await connect(broker) as client:
        await client.send_raw(struct.pack(">i", 100) + b"only ten b")
    await assert_alive(broker)


async def test_a_body_cut_short_closes_the_connection(broker: Broker) -> None:
    whole = encode_request(
        RequestHeader(ApiKey.PRODUCE, PRODUCE_VERSION, 1, "c"), produce_body("t", 0, batch(b"a"))
    )[4:]
    await assert_closed_then_alive(broker, frame(whole[:-9]))


async def test_unknown_api_key_and_unsupported_version_close_the_connection(
    broker: Broker,
) -> None:
    header = struct.pack(">hhih", 999, 0, 7, -1)
    await assert_closed_then_alive(broker, frame(header))
    metadata_v99 = struct.pack(">hhih", ApiKey.METADATA, 99, 8, -1) + b"\x00"
    await assert_closed_then_alive(broker, frame(metadata_v99))


async def produce_error(
    broker: Broker, records: bytes | None, acks: int = 1, topic: str = "t"
) -> int:
    async with await connect(broker) as client:
        body = produce_body(topic, 0, records, acks=acks)  # type: ignore[arg-type]
        response = await client.kafka_request(ApiKey.PRODUCE, PRODUCE_VERSION, body)
    code: int = response["topics"][0]["partitions"][0]["error_code"]
    return code


async def log_end(broker: Broker) -> int:
    async with await connect(broker) as client:
        body = {
            "replica_id": -1,
            "topics": [{"name": "t", "partitions": [{"partition_index": 0, "timestamp": -1}]}],
        }
        response = await client.kafka_request(ApiKey.LIST_OFFSETS, 6, body)
    offset: int = response["topics"][0]["partitions"][0]["offset"]
    return offset


async def test_produce_below_v3_is_answered_unsupported_version(broker: Broker) -> None:
    async with await connect(broker) as client:
        response = await client.kafka_request(
            ApiKey.PRODUCE, 2, produce_body("t", 0, batch(b"old"))
        )
    assert response["topics"][0]["partitions"][0]["error_code"] == UnsupportedVersionError.code
    assert await log_end(broker) == 0


async def test_batch_with_a_bad_crc_is_corrupt_and_nothing_is_appended(broker: Broker) -> None:
    bad = bytearray(batch(b"second"))
    bad[-1] ^= 0xFF
    assert await produce_error(broker, batch(b"first") + bytes(bad)) == CorruptMessageError.code
    assert await log_end(broker) == 0
    await assert_alive(broker)


async def test_null_or_trailing_garbage_records_are_corrupt(broker: Broker) -> None:
    assert await produce_error(broker, batch(b"a") + b"\x00" * 10) == CorruptMessageError.code
    assert await produce_error(broker, None) == CorruptMessageError.code
    assert await log_end(broker) == 0


async def test_batch_over_message_max_bytes_is_message_too_large(broker: Broker) -> None:
    big = batch(b"x" * (MESSAGE_MAX + 1))
    assert await produce_error(broker, big) == MessageTooLargeError.code
    assert await log_end(broker) == 0


async def test_produce_where_it_does_not_lead_or_to_no_topic(broker: Broker) -> None:
    me = broker.config.broker_id
    await FakeController(broker).leader_and_isr(
        [partition_state("f", 0, leader=me + 1, leader_epoch=0, replicas=[me + 1, me])]
    )
    assert await produce_error(broker, batch(b"a"), topic="f") == NotLeaderOrFollowerError.code
    assert await produce_error(broker, batch(b"a"), topic="nowhere") == (
        UnknownTopicOrPartitionError.code
    )
    await assert_alive(broker)


async def test_invalid_acks_is_refused_and_nothing_is_appended(broker: Broker) -> None:
    assert await produce_error(broker, batch(b"a"), acks=2) == InvalidRequiredAcksError.code
    assert await log_end(broker) == 0


async def test_a_good_produce_is_read_back_by_fetch(broker: Broker) -> None:
    assert await produce_error(broker, batch(b"a", b"b")) == 0
    async with await connect(broker) as client:
        body = {
            "max_wait_ms": 0,
            "min_bytes": 0,
            "topics": [
                {
                    "topic": "t",
                    "partitions": [
                        {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
                    ],
                }
            ],
        }
        response = await client.kafka_request(ApiKey.FETCH, 12, body)
    [partition] = response["topics"][0]["partitions"]
    assert (partition["error_code"], partition["high_watermark"]) == (0, 2)
    assert partition["records"] == batch(b"a", b"b")[:12] + partition["records"][12:]


def idempotent_batch(producer_id: int, epoch: int, sequence: int, *values: bytes) -> bytes:
    records = [Record(v, timestamp=1_000) for v in values]
    return encode_batch(
        records, producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence
    )


async def produce_answer(client: KafkaClient, records: bytes) -> tuple[int, int]:
    body = produce_body("t", 0, records, acks=-1)
    response = await client.kafka_request(ApiKey.PRODUCE, PRODUCE_VERSION, body)
    [partition] = response["topics"][0]["partitions"]
    return partition["error_code"], partition["base_offset"]


async def test_idempotent_produce_on_the_kafka_wire_dedups_and_refuses_gaps_and_old_epochs(
    broker: Broker,
) -> None:
    async with await connect(broker) as client:
        versions = await client.kafka_request(ApiKey.API_VERSIONS, 3, {})
        advertised = {
            k["api_key"]: (k["min_version"], k["max_version"]) for k in versions["api_keys"]
        }
        assert advertised[ApiKey.INIT_PRODUCER_ID] == (0, 4)

        new = {"transactional_id": None, "transaction_timeout_ms": 60_000}
        first = await client.kafka_request(ApiKey.INIT_PRODUCER_ID, 4, new)
        assert first["error_code"] == 0 and first["producer_id"] >= 0
        pid, epoch = first["producer_id"], first["producer_epoch"]

        assert await produce_answer(client, idempotent_batch(pid, epoch, 0, b"a", b"b")) == (0, 0)
        # the retry of a Produce whose answer was lost: the original offset, nothing appended
        assert await produce_answer(client, idempotent_batch(pid, epoch, 0, b"a", b"b")) == (0, 0)
        assert await produce_answer(client, idempotent_batch(pid, epoch, 2, b"c")) == (0, 2)
        gap = await produce_answer(client, idempotent_batch(pid, epoch, 9, b"z"))
        assert gap[0] == OutOfOrderSequenceNumberError.code

        bump = {**new, "producer_id": pid, "producer_epoch": epoch}
        bumped = await client.kafka_request(ApiKey.INIT_PRODUCER_ID, 3, bump)
        assert (bumped["producer_id"], bumped["producer_epoch"]) == (pid, epoch + 1)
        assert await produce_answer(client, idempotent_batch(pid, epoch + 1, 0, b"d")) == (0, 3)
        stale = await produce_answer(client, idempotent_batch(pid, epoch, 3, b"y"))
        assert stale[0] == InvalidProducerEpochError.code
    assert await log_end(broker) == 4

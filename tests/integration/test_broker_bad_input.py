"""Bad input never takes the broker down (docs/architecture.md, "Bad input"): after each
abuse, a good request on a NEW connection is answered."""

from __future__ import annotations

import resource
import struct
from collections.abc import AsyncIterator
from pathlib import Path

import msgpack
import pytest
import trio

from minibroker.broker.broker import Broker
from minibroker.protocol.api import ApiKey
from minibroker.protocol.crc32c import crc32c
from minibroker.protocol.errors import (
    CorruptMessageError,
    InvalidRecordError,
    InvalidRequestError,
    InvalidRequiredAcksError,
    InvalidTopicError,
    MessageTooLargeError,
    NotLeaderOrFollowerError,
    RecordListTooLargeError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
)
from minibroker.protocol.frames import encode_frame
from minibroker.protocol.records import Record, encode_batch
from tests.support.broker import (
    FakeController,
    WireClient,
    batch,
    broker_config,
    fetch_body,
    list_offset,
    partition_state,
    produce_body,
    produced,
    running_broker,
)

pytestmark = pytest.mark.timeout(60)

MAX_FRAME = 1 << 20
MESSAGE_MAX = 10_000


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    config = broker_config(
        tmp_path, socket_request_max_bytes=MAX_FRAME, message_max_bytes=MESSAGE_MAX
    )
    async with running_broker(config) as broker:
        await FakeController(broker).lead("t")
        yield broker


async def assert_alive(broker: Broker) -> None:
    """A good request on a fresh connection gets a good answer."""
    async with await WireClient.connect(broker.port) as client:
        response = await client.request(ApiKey.API_VERSIONS, {})
        assert response["error_code"] == 0


async def assert_closed_then_alive(broker: Broker, data: bytes) -> None:
    async with await WireClient.connect(broker.port) as client:
        await client.send_raw(data)
        await client.assert_closed_by_peer()
    await assert_alive(broker)


async def error_answer(broker: Broker, payload: bytes) -> tuple[int, dict[str, object]]:
    """Send one raw request payload; the broker must answer it (as an error)."""
    async with await WireClient.connect(broker.port) as client:
        await client.send_raw(encode_frame(payload))
        correlation_id, body = await client.receive_response(ApiKey.API_VERSIONS)
    return correlation_id, body


async def test_garbage_bytes_close_only_that_connection(broker: Broker) -> None:
    await assert_closed_then_alive(broker, encode_frame(b"\xc1\xff garbage \x00"))


async def test_negative_frame_length_closes_the_connection(broker: Broker) -> None:
    await assert_closed_then_alive(broker, struct.pack(">i", -5) + b"xxxx")


async def test_oversize_frame_length_closes_the_connection(broker: Broker) -> None:
    await assert_closed_then_alive(broker, struct.pack(">i", MAX_FRAME + 1))


async def test_frame_cut_short_then_disconnect_leaves_the_broker_alive(broker: Broker) -> None:
    async with await WireClient.connect(broker.port) as client:
        await client.send_raw(struct.pack(">i", 100) + b"only ten b")
    await assert_alive(broker)


async def test_msgpack_that_is_not_a_request_envelope_closes_the_connection(
    broker: Broker,
) -> None:
    await assert_closed_then_alive(broker, encode_frame(msgpack.packb({"api_key": 0})))
    await assert_closed_then_alive(broker, encode_frame(msgpack.packb(["a", 0, 1, None, {}])))


async def test_body_of_the_wrong_shape_is_answered_invalid_request(broker: Broker) -> None:
    payload = msgpack.packb([int(ApiKey.PRODUCE), 0, 41, "c", {"acks": "all"}])
    correlation_id, body = await error_answer(broker, payload)
    assert (correlation_id, body["error_code"]) == (41, InvalidRequestError.code)
    await assert_alive(broker)


async def test_unknown_api_key_is_answered_unsupported_version(broker: Broker) -> None:
    correlation_id, body = await error_answer(broker, msgpack.packb([999, 0, 7, "c", {}]))
    assert (correlation_id, body["error_code"]) == (7, UnsupportedVersionError.code)
    await assert_alive(broker)


async def test_unsupported_version_is_answered_unsupported_version(broker: Broker) -> None:
    payload = msgpack.packb([int(ApiKey.METADATA), 99, 8, "c", {}])
    correlation_id, body = await error_answer(broker, payload)
    assert (correlation_id, body["error_code"]) == (8, UnsupportedVersionError.code)
    await assert_alive(broker)


async def produce_error(broker: Broker, records: bytes, acks: int = 1, topic: str = "t") -> int:
    async with await WireClient.connect(broker.port) as client:
        response = await client.request(ApiKey.PRODUCE, produce_body(topic, 0, records, acks=acks))
    code: int = produced(response)["error_code"]
    return code


async def log_end(broker: Broker) -> int:
    async with await WireClient.connect(broker.port) as client:
        offset: int = (await list_offset(client, "t", -1))["offset"]
    return offset


async def test_batch_with_a_bad_crc_is_corrupt_and_nothing_is_appended(broker: Broker) -> None:
    good = batch(b"first")
    bad = bytearray(batch(b"second"))
    bad[-1] ^= 0xFF  # inside the CRC-covered records
    assert await produce_error(broker, good + bytes(bad)) == CorruptMessageError.code
    assert await log_end(broker) == 0
    await assert_alive(broker)


async def test_batch_whose_record_count_lies_is_invalid_record(broker: Broker) -> None:
    two = encode_batch([Record(b"a"), Record(b"b")])
    one = encode_batch([Record(b"a")])
    # Graft the two records of one batch under the header of a one-record batch: the
    # CRC is recomputed by encoding, so only the count walk can catch it.
    lying = bytearray(two)
    struct.pack_into(">i", lying, 57, 1)  # recordCount
    struct.pack_into(">i", lying, 23, 0)  # lastOffsetDelta
    struct.pack_into(">I", lying, 17, crc32c(memoryview(lying)[21:]))
    assert len(one) < len(lying)
    assert await produce_error(broker, bytes(lying)) == InvalidRecordError.code
    assert await log_end(broker) == 0


async def test_trailing_bytes_after_the_last_batch_are_corrupt(broker: Broker) -> None:
    assert await produce_error(broker, batch(b"a") + b"\x00" * 10) == CorruptMessageError.code
    assert await log_end(broker) == 0


async def test_batch_over_message_max_bytes_is_message_too_large(broker: Broker) -> None:
    big = batch(b"x" * (MESSAGE_MAX + 1))
    assert await produce_error(broker, big) == MessageTooLargeError.code
    assert await log_end(broker) == 0
    await assert_alive(broker)


async def test_produce_to_a_partition_it_does_not_lead(broker: Broker) -> None:
    me = broker.config.broker_id
    await FakeController(broker).leader_and_isr(
        [partition_state("f", 0, leader=me + 1, leader_epoch=0, replicas=[me + 1, me])]
    )
    code = await produce_error(broker, batch(b"a"), topic="f")
    assert code == NotLeaderOrFollowerError.code
    assert await produce_error(broker, batch(b"a"), topic="nowhere") == (
        UnknownTopicOrPartitionError.code
    )
    await assert_alive(broker)


async def test_invalid_acks_is_refused_and_nothing_is_appended(broker: Broker) -> None:
    assert await produce_error(broker, batch(b"a"), acks=2) == InvalidRequiredAcksError.code
    assert await log_end(broker) == 0


async def test_idle_connections_are_closed_after_connections_max_idle_ms(tmp_path: Path) -> None:
    config = broker_config(tmp_path, connections_max_idle_ms=300)
    async with running_broker(config) as broker, await WireClient.connect(broker.port) as client:
        await client.assert_closed_by_peer()
        await assert_alive(broker)


@pytest.mark.timeout(120)
async def test_thousands_of_idle_connections_do_not_stop_service(broker: Broker) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    count = 2000
    assert hard > 2 * count + 100, "the fd limit cannot hold both ends of the connections"
    idle: list[trio.SocketStream] = []
    try:
        for _ in range(count):
            idle.append(await trio.open_tcp_stream("127.0.0.1", broker.port))
        await assert_alive(broker)
        # An old idle connection still works too.
        client = WireClient(idle[0])
        assert (await client.request(ApiKey.API_VERSIONS, {}))["error_code"] == 0
        server = broker.parts.server
        assert server is not None
        while server.connections < count:  # accepted handlers may still be starting
            await trio.sleep(0.01)
    finally:
        for stream in idle:
            await stream.aclose()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


async def test_a_client_that_never_reads_does_not_stall_others(broker: Broker) -> None:
    async with await WireClient.connect(broker.port) as writer:
        await writer.request(ApiKey.PRODUCE, produce_body("t", 0, batch(b"y" * 9000)))
    # This client pipelines many fetches and never reads an answer.
    async with await WireClient.connect(broker.port) as hog:
        body = fetch_body("t", {0: 0})
        with trio.move_on_after(2):  # until its socket buffers fill up
            for _ in range(5000):
                await hog.send_request(ApiKey.FETCH, body)
        await assert_alive(broker)


async def test_leader_and_isr_for_an_illegal_topic_name_creates_nothing(
    broker: Broker, tmp_path: Path
) -> None:
    me = broker.config.broker_id
    response = await FakeController(broker).leader_and_isr(
        [partition_state("../escape", 0, leader=me, leader_epoch=0, replicas=[me])]
    )
    assert response["partition_errors"][0]["error_code"] == InvalidTopicError.code
    assert not (tmp_path.parent / "escape-0").exists()
    assert not any("escape" in p.name for p in tmp_path.iterdir())
    async with await WireClient.connect(broker.port) as client:
        answer = await client.request(ApiKey.METADATA, {"topics": [{"name": "bad/name"}]})
    assert answer["topics"][0]["error_code"] == InvalidTopicError.code


async def test_entry_larger_than_a_segment_is_record_list_too_large(tmp_path: Path) -> None:
    config = broker_config(tmp_path, log_segment_bytes=1024)
    async with running_broker(config) as broker:
        await FakeController(broker).lead("t")
        two = batch(b"x" * 600) + batch(b"y" * 600)
        assert await produce_error(broker, two) == RecordListTooLargeError.code
        assert await log_end(broker) == 0
        await assert_alive(broker)


async def test_a_parked_long_poll_is_not_idle(tmp_path: Path) -> None:
    config = broker_config(tmp_path, connections_max_idle_ms=200)
    async with running_broker(config) as broker:
        await FakeController(broker).lead("t")
        client = await WireClient.connect(broker.port)
        # The fetch waits 5 idle periods; its connection must stay open to answer it.
        body = fetch_body("t", {0: 0}, max_wait_ms=1000)
        response = await client.request(ApiKey.FETCH, body)
        assert response["topics"][0]["partitions"][0]["error_code"] == 0
        await client.assert_closed_by_peer()  # and once answered, idleness applies again
        await client.aclose()


async def test_a_failed_acks_zero_produce_closes_the_connection(broker: Broker) -> None:
    async with await WireClient.connect(broker.port) as client:
        await client.send_request(ApiKey.PRODUCE, produce_body("nowhere", 0, batch(b"a"), acks=0))
        await client.assert_closed_by_peer()
    await assert_alive(broker)

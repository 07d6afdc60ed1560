"""A batch that lies about its record count is refused over the wire: nothing is
appended and the high watermark does not move (Kafka's LogValidator checks)."""

from __future__ import annotations

import struct
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from minibroker.broker.broker import Broker
from minibroker.protocol.api import ApiKey
from minibroker.protocol.crc32c import crc32c
from minibroker.protocol.errors import InvalidRecordError
from minibroker.protocol.records import Compression, Record, encode_batch
from tests.support.broker import (
    FakeController,
    WireClient,
    batch,
    broker_config,
    fetch_body,
    fetched,
    produce_body,
    produced,
    running_broker,
)

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    async with running_broker(broker_config(tmp_path)) as broker:
        await FakeController(broker).lead("t")
        yield broker


def claiming(count: int, compression: Compression = Compression.NONE) -> bytes:
    """A one-record batch whose header claims ``count`` records, CRC recomputed."""
    buf = bytearray(encode_batch([Record(b"only", timestamp=1)], compression=compression))
    struct.pack_into(">i", buf, 57, count)
    struct.pack_into(">i", buf, 23, count - 1)
    struct.pack_into(">I", buf, 17, crc32c(memoryview(buf)[21:]))
    return bytes(buf)


async def produce(client: WireClient, records: bytes) -> dict[str, object]:
    return produced(await client.request(ApiKey.PRODUCE, produce_body("t", 0, records)))


async def high_watermark(client: WireClient) -> int:
    response = await client.request(ApiKey.FETCH, fetch_body("t", {0: 0}))
    hw: int = fetched(response)["high_watermark"]
    return hw


@pytest.mark.parametrize("compression", [Compression.NONE, Compression.GZIP])
async def test_a_batch_claiming_2_31_records_is_refused_and_the_hw_stays(
    broker: Broker, compression: Compression
) -> None:
    async with await WireClient.connect(broker.port) as client:
        assert (await produce(client, batch(b"a", b"b")))["error_code"] == 0
        assert await high_watermark(client) == 2
        answer = await produce(client, claiming(2**31 - 1, compression))
        assert answer["error_code"] == InvalidRecordError.code
        assert await high_watermark(client) == 2
        assert (await produce(client, batch(b"c")))["base_offset"] == 2


async def test_empty_produce_data_is_invalid_record(broker: Broker) -> None:
    async with await WireClient.connect(broker.port) as client:
        assert (await produce(client, b""))["error_code"] == InvalidRecordError.code
        assert await high_watermark(client) == 0

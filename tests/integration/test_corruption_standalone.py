"""A broker never serves a corrupt batch: a Fetch gets the good batches before it, then
KAFKA_STORAGE_ERROR; found by a read or by the scrubber, the corruption is counted and
(standalone, with no other replica to hand over to) the log is cut before it."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import trio

from minibroker.broker.broker import Broker
from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import KafkaStorageError
from minibroker.protocol.records import iter_headers
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.storage.log import Log
from tests.support.broker import (
    FakeController,
    WireClient,
    batch,
    broker_config,
    fetch_body,
    fetched,
    list_offset,
    produce_body,
    produced,
    running_broker,
    values_of,
)

pytestmark = pytest.mark.timeout(60)

BATCHES = 40
RECORDS_PER_BATCH = 5


async def fill(broker: Broker) -> None:
    async with await WireClient.connect(broker.port) as client:
        for i in range(BATCHES):
            values = [b"value-%04d-%d" % (i, j) + b"x" * 30 for j in range(RECORDS_PER_BATCH)]
            answer = produced(
                await client.request(ApiKey.PRODUCE, produce_body("t", 0, batch(*values)))
            )
            assert answer["error_code"] == 0


def the_log(broker: Broker) -> Log:
    log = broker.parts.log_manager.get_log(TopicPartition("t", 0))
    assert log is not None
    return log


def corrupt_first_segment(broker: Broker) -> int:
    """Flip 16 record bytes of the middle batch of the partition's first segment, as
    a disk would; returns the first offset of that batch."""
    log = the_log(broker)
    path = log.segments[0].log_path
    data = path.read_bytes()
    positions = [p for p, _ in iter_headers(data)]
    target = positions[len(positions) // 2]
    fd = os.open(path, os.O_RDWR)
    try:
        chunk = os.pread(fd, 16, target + 70)
        os.pwrite(fd, bytes(b ^ 0xFF for b in chunk), target + 70)
    finally:
        os.close(fd)
    return int.from_bytes(data[target : target + 8], "big")


def metric(broker: Broker, line_start: str) -> float:
    for line in broker.metrics.render().decode().splitlines():
        if line.startswith(line_start):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no metric {line_start}")


async def wait_for(condition: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    with trio.move_on_after(timeout):
        while not condition():
            await trio.sleep(0.02)
        return
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
async def broker(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Broker]:
    scrub: bool = getattr(request, "param", False)
    config = broker_config(
        tmp_path,
        log_segment_bytes=4096,
        log_scrubber_enable=str(scrub).lower(),
        log_scrubber_interval_ms=20,
        log_scrubber_io_max_bytes_per_second=100 * 1024 * 1024,
    )
    async with running_broker(config) as broker:
        await FakeController(broker).lead("t")
        yield broker


async def test_a_fetch_gets_the_good_batches_then_a_storage_error_never_the_corrupt_one(
    broker: Broker,
) -> None:
    await fill(broker)
    bad = corrupt_first_segment(broker)
    async with await WireClient.connect(broker.port) as client:
        first = fetched(await client.request(ApiKey.FETCH, fetch_body("t", {0: 0})))
        assert first["error_code"] == 0
        served = values_of(first)
        assert [offset for offset, _ in served] == list(range(bad))
        at_bad = fetched(await client.request(ApiKey.FETCH, fetch_body("t", {0: bad})))
        assert at_bad["error_code"] == KafkaStorageError.code
        assert at_bad["records"] in (b"", None)
        # Standalone, the log was cut before the corrupt batch: the partition serves
        # again from there, and new records take the offsets that were lost.
        assert (await list_offset(client, "t", -1))["offset"] == bad
        answer = produced(await client.request(ApiKey.PRODUCE, produce_body("t", 0, batch(b"new"))))
        assert answer["base_offset"] == bad
    assert metric(broker, 'kafka_log_logcorruption_corruptbatches_total{source="read"}') == 1
    assert metric(broker, "kafka_log_logcorruption_repairs_total") == 1
    assert metric(broker, "kafka_log_logcorruption_truncatedbytes_total") > 0


@pytest.mark.parametrize("broker", [True], indirect=True)
async def test_the_scrubber_finds_corruption_in_a_closed_segment_nobody_reads(
    broker: Broker,
) -> None:
    await fill(broker)
    log = the_log(broker)
    assert len(log.segments) > 2
    bad = corrupt_first_segment(broker)
    await wait_for(lambda: log.log_end_offset == bad, "the scrubber to find and cut it")
    assert metric(broker, 'kafka_log_logcorruption_corruptbatches_total{source="scrub"}') == 1
    assert metric(broker, 'kafka_log_logcorruption_corruptbatches_total{source="read"}') == 0

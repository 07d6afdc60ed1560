"""A log dir that fills up loses nothing that was acknowledged.

Recipe (root: a real filesystem that fills): the broker's only log dir is a 16 MiB
tmpfs, a filler file takes most of it, and a producer sends records acks=all (one
replica) until the disk is full and the broker refuses them (the log dir goes offline:
KAFKA_STORAGE_ERROR, or the producer's timeout). The filler is deleted, the broker
restarted on the same dir, and every record that was acknowledged is read back at its
offset (the durability checker), none twice.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from minibroker.net.connection import Connection
from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import KafkaError
from minibroker.protocol.records import decode_records
from tests.support.broker import FakeController, batch, broker_config, fetch_body, running_broker
from tests.support.durability import DurabilityChecker, ReadRecord

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root"),
]

TOPIC = "filling"
SIZE_MIB = 16
FILLER_MIB = 10
VALUE_BYTES = 2000


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={SIZE_MIB}m", "tmpfs", str(mount)], check=True
    )
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


async def produce_until_full(port: int, checker: DurabilityChecker) -> int:
    """Send records until the broker refuses them; returns how many were refused."""
    refused = 0
    async with Connection("127.0.0.1", port) as conn:
        for i in range(100_000):
            value = b"%06d-" % i + b"x" * VALUE_BYTES
            checker.attempted(value)
            body = {
                "acks": -1,
                "timeout_ms": 5000,
                "topics": [{"name": TOPIC, "partitions": [{"index": 0, "records": batch(value)}]}],
            }
            try:
                answer = await conn.request(ApiKey.PRODUCE, body, timeout=10)
            except KafkaError:
                return refused + 1
            part = answer["topics"][0]["partitions"][0]
            if part["error_code"]:
                refused += 1
                if refused >= 5:
                    return refused
                continue
            checker.acknowledged(value, TOPIC, 0, part["base_offset"])
    raise AssertionError("the disk never filled")


async def read_all(port: int) -> list[ReadRecord]:
    read: list[ReadRecord] = []
    offset = 0
    async with Connection("127.0.0.1", port) as conn:
        while True:
            body = fetch_body(TOPIC, {0: offset}, min_bytes=0, max_bytes=1 << 20)
            part = (await conn.request(ApiKey.FETCH, body))["topics"][0]["partitions"][0]
            assert part["error_code"] == 0, part
            records = [r for r in decode_records(part["records"]) if r.offset >= offset]
            if not records:
                return read
            read += [ReadRecord(TOPIC, 0, r.offset, r.value or b"") for r in records]
            offset = records[-1].offset + 1


async def test_after_a_full_disk_is_freed_every_acknowledged_record_is_there(
    small_disk: Path,
) -> None:
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * (FILLER_MIB << 20))
    log_dir = small_disk / "logs"
    checker = DurabilityChecker()
    config = broker_config(log_dir, log_segment_bytes=1 << 20)
    async with running_broker(config) as broker:
        await FakeController(broker).lead(TOPIC)
        refused = await produce_until_full(broker.port, checker)
    assert refused > 0 and checker.acknowledged_count > 0

    filler.unlink()
    async with running_broker(broker_config(log_dir, log_segment_bytes=1 << 20)) as broker:
        await FakeController(broker).lead(TOPIC, leader_epoch=1)
        with trio.fail_after(30):
            read = await read_all(broker.port)
    report = checker.check(read)
    assert report.ok, report.summary()

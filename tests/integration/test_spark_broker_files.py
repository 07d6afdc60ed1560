"""The minibroker data source on segment files written by a real broker.

A broker on 127.0.0.1 leads two partitions, takes produce requests (plain and gzip
batches, keys, null keys, headers) with small segments so it rolls, and stops cleanly;
Spark then reads its log dir and must find every acknowledged record at its offset.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from minibroker.protocol.api import ApiKey
from minibroker.protocol.records import Compression, Record, encode_batch
from tests.support.broker import (
    FakeController,
    WireClient,
    broker_config,
    produce_body,
    produced,
    running_broker,
)
from tests.support.spark import spark

__all__ = ["spark"]

T0 = 1_700_000_000_000


@pytest.mark.timeout(180)
async def test_data_source_reads_every_acknowledged_record_of_a_real_brokers_log_dir(
    spark: SparkSession, tmp_path: Path
) -> None:
    log_dir = tmp_path / "logs"
    config = broker_config(log_dir, broker_id=5, log_segment_bytes=1024)
    acked: dict[tuple[int, int], Record] = {}
    async with running_broker(config) as broker, await WireClient.connect(broker.port) as client:
        await FakeController(broker).lead("orders", 2, leader_epoch=3)
        for i in range(24):
            records = [
                Record(
                    f"value-{i}-{j}".encode() * 4,
                    None if j == 0 else f"key-{j}".encode(),
                    (("trace", f"{i}.{j}".encode()),) if j % 2 else (),
                    T0 + i * 1000 + j,
                )
                for j in range(4)
            ]
            compression = Compression.GZIP if i % 3 == 0 else Compression.NONE
            body = produce_body("orders", i % 2, encode_batch(records, compression=compression))
            answer = produced(await client.request(ApiKey.PRODUCE, body))
            assert answer["error_code"] == 0, answer
            for j, record in enumerate(records):
                acked[(i % 2, answer["base_offset"] + j)] = record

    df = spark.read.format("minibroker").load(str(log_dir))
    rows = df.collect()

    got = {
        (r.partition, r.offset): Record(
            bytes(r.value),
            None if r.key is None else bytes(r.key),
            tuple((h.key, bytes(h.value)) for h in r.headers),
            r.timestamp,
        )
        for r in rows
    }
    assert len(rows) == len(acked)
    assert got == acked
    assert {r.leader_epoch for r in rows} == {3}
    assert {r.broker_id for r in rows} <= {5, None}  # meta.properties if the broker writes it
    assert len({r.segment for r in rows}) > 2  # 1 KiB segments: the broker rolled

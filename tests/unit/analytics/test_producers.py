"""The producers report (analytics.producers) on hand-made batches: one row per producer
id, its epochs, sequence gaps, compression and transactions."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import SparkSession

from minibroker.analytics.producers import (
    producer_report,
    summarise_producers,
    transaction_report,
)
from tests.unit.analytics import frames

pytestmark = pytest.mark.timeout(120)

B = "/logs/b"


def _run(producer_id: int, epoch: int, sequences: list[int], start: int, **more: Any) -> list:
    """Batches of two records each at ``sequences``, from offset ``start`` on."""
    return [
        {"producer_id": producer_id, "producer_epoch": epoch, "base_sequence": sequence,
         "batch_base_offset": start + 2 * i, "record_count": 2, **more}
        for i, sequence in enumerate(sequences)
    ]  # fmt: skip


def _report(spark: SparkSession, rows: list[dict[str, Any]]) -> dict[int, Any]:
    batches = frames.batches(spark, rows)
    return {r.producer_id: r for r in producer_report(summarise_producers(batches)).collect()}


def test_a_batch_that_does_not_start_where_the_last_ended_is_a_sequence_gap(
    spark: SparkSession,
) -> None:
    rows = _run(7, 0, [0, 2, 4, 9], 0)  # 6..8 missing
    rows += _run(7, 1, [0, 2], 8)  # a new epoch starts again at 0: no gap
    rows += _run(7, 0, [0, 2, 4, 9], 0, log_dir=B)  # the same on a second copy: once

    (producer,) = _report(spark, rows).values()

    assert producer.sequence_gaps == 1
    assert (producer.first_epoch, producer.last_epoch, producer.epochs) == (0, 1, 2)
    assert (producer.batches, producer.records, producer.partitions) == (6, 12, 1)
    assert producer.idempotent is True


def test_sequences_wrap_to_zero_after_the_largest_int32(spark: SparkSession) -> None:
    rows = _run(7, 0, [(1 << 31) - 2, 0, 2], 0)

    assert _report(spark, rows)[7].sequence_gaps == 0


def test_producers_without_an_id_are_one_row_never_with_gaps(spark: SparkSession) -> None:
    rows = [{"batch_base_offset": i, "partition": i % 3} for i in range(6)]

    (plain,) = _report(spark, rows).values()

    assert plain.producer_id == -1 and plain.idempotent is False
    assert (plain.batches, plain.partitions, plain.sequence_gaps) == (6, 3, 0)


def test_compression_ratio_is_uncompressed_over_on_disk_bytes(spark: SparkSession) -> None:
    rows = _run(3, 0, [0, 2], 0, size=100, uncompressed_size=250, compression="zstd")

    producer = _report(spark, rows)[3]

    assert (producer.bytes, producer.uncompressed_bytes, producer.compression_ratio) == (
        200, 500, 2.5
    )  # fmt: skip


def test_transactions_are_committed_aborted_or_still_open_after_the_last_marker(
    spark: SparkSession,
) -> None:
    def marker(kind: str, offset: int, epoch: int = 0, partition: int = 0) -> dict[str, Any]:
        return {"producer_id": 5, "producer_epoch": epoch, "is_control": True,
                "is_transactional": True, "control_type": kind, "batch_base_offset": offset,
                "record_count": 1, "partition": partition}  # fmt: skip

    rows = [*_run(5, 0, [0], 0, is_transactional=True), marker("commit", 2)]
    rows += [*_run(5, 0, [2], 3, is_transactional=True), marker("abort", 5, epoch=1)]
    rows += _run(5, 1, [0], 6, is_transactional=True)  # no marker after it: open
    rows += [*_run(5, 0, [0], 0, is_transactional=True, partition=1), marker("commit", 2, 0, 1)]

    producer = _report(spark, rows)[5]

    assert (producer.committed, producer.aborted, producer.open_transactions) == (2, 1, 1)
    assert producer.transactional_batches == 4  # markers are not data batches
    assert producer.sequence_gaps == 0  # markers carry no sequence
    assert producer.partitions == 2

    per_partition = {
        r.partition: (r.transactional_producers, r.committed, r.aborted, r.open_transactions)
        for r in transaction_report(summarise_producers(frames.batches(spark, rows))).collect()
    }
    assert per_partition == {0: (1, 1, 1, 1), 1: (1, 1, 0, 0)}

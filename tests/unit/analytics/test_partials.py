"""The partials view: the scan view's rows with records folded into per-minute key groups,
batches into per-codec, per-epoch, per-minute summaries and per-producer-epoch ones."""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from minibroker.analytics import columns, partials
from minibroker.analytics.columns import scan_batches
from minibroker.analytics.layout import plan_slices
from minibroker.analytics.partials import PARTIALS_ARROW, partial_batches, replicated_partitions
from minibroker.analytics.producer_summaries import ProducerFigures
from minibroker.analytics.schema import (
    KIND_BATCH,
    KIND_BATCH_SUMMARY,
    KIND_CORRUPTION,
    KIND_GROUP,
    KIND_PRODUCER_SUMMARY,
    KIND_RECORD,
    MINUTE_MS,
)
from tests.unit.analytics.test_columns import log_dir

__all__ = ["log_dir"]  # the fixture: one partition with every kind of batch and damage

pytestmark = pytest.mark.timeout(60)

SPLITS = pytest.mark.parametrize("split", [1 << 40, 300], ids=["whole", "split"])


def _scan_rows(root: Path, split: int) -> list[dict[str, Any]]:
    return [
        row
        for piece in plan_slices([str(root)], split_bytes=split)
        for batch in scan_batches(piece)
        for row in batch.to_pylist()
    ]


def _partial_rows(root: Path, split: int, keep_records: bool) -> list[dict[str, Any]]:
    rows = []
    for piece in plan_slices([str(root)], split_bytes=split):
        for batch in partial_batches(piece, keep_records=keep_records):
            assert batch.schema == PARTIALS_ARROW
            rows.extend(batch.to_pylist())
    return rows


def _merged(groups: list[tuple[tuple[Any, ...], list[int]]]) -> dict[tuple[Any, ...], list[int]]:
    """records, value bytes, first/last offset, first/last timestamp per group key."""
    merged: dict[tuple[Any, ...], list[int]] = defaultdict(lambda: [0, 0, 1 << 63, -1, 1 << 63, -1])
    for key, (records, value_bytes, first, last, first_ts, last_ts) in groups:
        m = merged[key]
        m[0] += records
        m[1] += value_bytes
        m[2], m[3] = min(m[2], first), max(m[3], last)
        m[4], m[5] = min(m[4], first_ts), max(m[5], last_ts)
    return dict(merged)


@SPLITS
def test_partials_fold_every_record_into_its_key_and_minute_group(
    log_dir: Path, split: int
) -> None:
    scan = [r for r in _scan_rows(log_dir, split) if r["kind"] == KIND_RECORD]
    expected = _merged(
        [
            (
                (r["log_dir"], r["topic"], r["partition"], rec["key"],
                 math.floor(rec["timestamp"] / MINUTE_MS) * MINUTE_MS),
                [1, max(rec["value_size"], 0), rec["offset"], rec["offset"], rec["timestamp"],
                 rec["timestamp"]],
            )
            for r in scan
            for rec in [r["record"]]
        ]
    )  # fmt: skip

    partial = [r for r in _partial_rows(log_dir, split, False) if r["kind"] == KIND_GROUP]
    got = _merged(
        [
            (
                (r["log_dir"], r["topic"], r["partition"], g["key"], g["minute"]),
                [g["records"], g["value_bytes"], g["first_offset"], g["last_offset"],
                 g["first_timestamp"], g["last_timestamp"]],
            )
            for r in partial
            for g in [r["group"]]
        ]
    )  # fmt: skip

    assert got == expected
    assert len(partial) < len(scan)  # records of one key and minute share a row
    assert all(r["record"] is None and r["batch"] is None for r in partial)


def _summed_batches(
    summaries: list[tuple[tuple[Any, ...], list[int]]],
) -> dict[tuple[Any, ...], list[int]]:
    """batches, records, min/max records, bytes, max bytes, first/last offset and
    uncompressed bytes per key."""
    folds = (sum, sum, min, max, sum, max, min, max, sum)
    by_key: dict[tuple[Any, ...], list[list[int]]] = defaultdict(list)
    for key, figures in summaries:
        by_key[key].append(figures)
    return {
        key: [fold(column) for fold, column in zip(folds, zip(*rows, strict=True), strict=True)]
        for key, rows in by_key.items()
    }


@SPLITS
def test_partials_fold_every_batch_into_its_codec_epoch_and_minute_summary(
    log_dir: Path, split: int
) -> None:
    batches = [r for r in _scan_rows(log_dir, split) if r["kind"] == KIND_BATCH]
    expected = _summed_batches(
        [
            (
                (r["log_dir"], r["topic"], r["partition"], b["compression"], r["leader_epoch"],
                 math.floor(b["max_timestamp"] / MINUTE_MS) * MINUTE_MS),
                [1, b["record_count"], b["record_count"], b["record_count"], b["size"],
                 b["size"], r["batch_base_offset"], b["last_offset"], b["uncompressed_size"]],
            )
            for r in batches
            for b in [r["batch"]]
        ]
    )  # fmt: skip

    partial = [r for r in _partial_rows(log_dir, split, False) if r["kind"] == KIND_BATCH_SUMMARY]
    got = _summed_batches(
        [
            (
                (r["log_dir"], r["topic"], r["partition"], s["compression"], r["leader_epoch"],
                 s["minute"]),
                [s["batches"], s["records"], s["min_records"], s["max_records"], s["bytes"],
                 s["max_bytes"], s["first_offset"], s["last_offset"], s["uncompressed_bytes"]],
            )
            for r in partial
            for s in [r["batch_summary"]]
        ]
    )  # fmt: skip

    assert got == expected
    assert len(expected) > 2  # several codecs, epochs and minutes, some in one slice
    assert len(partial) < len(batches)  # batches of one codec, epoch and minute share a row
    assert all(f[8] == f[4] for key, f in got.items() if key[3] == "none")
    compressed = [f for key, f in got.items() if key[3] != "none"]
    assert compressed and all(f[8] != f[4] for f in compressed)  # sizes before the codec
    assert all(r["record"] is None and r["group"] is None for r in partial)


def _producer_figures(batches: list[dict[str, Any]]) -> ProducerFigures:
    """What a run of one producer epoch's batches (scan rows, in file order) adds up to,
    computed batch by batch."""
    figures = ProducerFigures(0, 0, 0, 0, 1 << 62, -1, None, None, 0, 0, 0, 0, None, None)
    for row in batches:
        b = row["batch"]
        figures.batches += 1
        figures.records += b["record_count"]
        figures.bytes += b["size"]
        figures.uncompressed_bytes += b["uncompressed_size"]
        figures.first_offset = min(figures.first_offset, row["batch_base_offset"])
        figures.last_offset = max(figures.last_offset, b["last_offset"])
        if b["is_control"]:
            figures.commits += b["control_type"] == "commit"
            figures.aborts += b["control_type"] == "abort"
            figures.last_marker_offset = row["batch_base_offset"]
            continue
        if b["is_transactional"]:
            figures.transactional_batches += 1
            figures.last_transactional_offset = b["last_offset"]
        if b["producer_id"] >= 0:
            if figures.next_sequence is not None:
                figures.sequence_gaps += figures.next_sequence != b["base_sequence"]
            if figures.first_sequence is None:
                figures.first_sequence = b["base_sequence"]
            figures.next_sequence = (b["base_sequence"] + b["record_count"]) % (1 << 31)
    return figures


@SPLITS
def test_partials_fold_every_batch_into_its_producer_epochs_summary(
    log_dir: Path, split: int
) -> None:
    runs: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for r in _scan_rows(log_dir, split):
        if r["kind"] == KIND_BATCH:
            b = r["batch"]
            runs[(r["topic"], r["partition"], b["producer_id"], b["producer_epoch"])].append(r)
    expected = {key: _producer_figures(rows) for key, rows in runs.items()}

    got: dict[tuple[Any, ...], ProducerFigures] = {}
    for r in _partial_rows(log_dir, split, False):  # slices in plan (file) order
        if r["kind"] == KIND_PRODUCER_SUMMARY:
            s = dict(r["producer_summary"])
            key = (r["topic"], r["partition"], s.pop("producer_id"), s.pop("producer_epoch"))
            figures = ProducerFigures(**s)
            got[key] = got[key].then(figures) if key in got else figures

    assert got == expected
    idempotent = expected[("orders", 0, 7, 0)]
    assert (idempotent.first_sequence, idempotent.next_sequence) == (0, 11)
    assert idempotent.sequence_gaps == 1  # 3 + 2 records, then a batch at sequence 9
    assert expected[("orders", 0, 42, 1)].aborts == 1
    committed_then_open = expected[("orders", 0, 8, 2)]
    assert committed_then_open.commits == 1 and committed_then_open.transactional_batches == 2
    assert committed_then_open.last_transactional_offset > committed_then_open.last_marker_offset


def test_producer_figures_of_two_runs_count_a_gap_at_the_seam() -> None:
    def run(first: int, after: int) -> ProducerFigures:
        return ProducerFigures(1, 1, 9, 9, first, first, first, after, 0, 0, 0, 0, None, None)

    assert run(0, 5).then(run(5, 7)).sequence_gaps == 0
    assert run(0, 5).then(run(6, 7)).sequence_gaps == 1
    assert run(0, 5).then(run(6, 7)).next_sequence == 7


@SPLITS
@pytest.mark.parametrize("keep_records", [False, True])
def test_partials_keep_corruption_rows_in_order_and_records_only_when_asked(
    log_dir: Path, split: int, keep_records: bool
) -> None:
    kept = {KIND_CORRUPTION, KIND_RECORD} if keep_records else {KIND_CORRUPTION}
    scan = _scan_rows(log_dir, split)
    nothing_summed = {"group": None, "batch_summary": None, "producer_summary": None}
    expected = [{**r, **nothing_summed} for r in scan if r["kind"] in kept]

    got = [
        r
        for r in _partial_rows(log_dir, split, keep_records)
        if r["kind"] not in (KIND_GROUP, KIND_BATCH_SUMMARY, KIND_PRODUCER_SUMMARY)
    ]

    assert got == expected
    assert any(r["kind"] == KIND_CORRUPTION for r in got)


def test_a_slice_read_in_many_chunks_folds_groups_and_batches_to_the_same_figures(
    log_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = _partial_rows(log_dir, 1 << 40, False)
    monkeypatch.setattr(partials, "MERGE_GROUP_ROWS", 1)
    monkeypatch.setattr(columns, "ARROW_BATCH_ROWS", 3)  # many chunks per slice

    folded = _partial_rows(log_dir, 1 << 40, False)

    def key(row: dict[str, Any]) -> tuple[Any, ...]:
        return (row["segment"], row["position"], row["kind"], repr(row["group"]),
                repr(row["batch_summary"]), repr(row["producer_summary"]),
                repr(row["leader_epoch"]))  # fmt: skip

    assert sorted(folded, key=key) == sorted(whole, key=key)


def test_only_partitions_found_in_two_log_dirs_are_replicated(tmp_path: Path) -> None:
    for name, topics in (("a", ["orders-0", "orders-1"]), ("b", ["orders-0", "events-0"])):
        for topic in topics:
            (tmp_path / name / topic).mkdir(parents=True)
            (tmp_path / name / topic / f"{0:020d}.log").write_bytes(b"")

    pieces = plan_slices([str(tmp_path / "a"), str(tmp_path / "b")])

    assert replicated_partitions(pieces) == {("orders", 0)}

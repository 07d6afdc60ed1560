"""The partials view: the scan view's rows with records folded into per-minute key groups."""

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
from minibroker.analytics.schema import KIND_GROUP, KIND_RECORD, MINUTE_MS
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


@SPLITS
@pytest.mark.parametrize("keep_records", [False, True])
def test_partials_keep_batch_and_corruption_rows_in_order_and_records_only_when_asked(
    log_dir: Path, split: int, keep_records: bool
) -> None:
    scan = _scan_rows(log_dir, split)
    expected = [{**r, "group": None} for r in scan if keep_records or r["kind"] != KIND_RECORD]

    got = [r for r in _partial_rows(log_dir, split, keep_records) if r["kind"] != KIND_GROUP]

    assert got == expected


def test_a_slice_holding_many_groups_folds_them_as_it_goes_to_the_same_figures(
    log_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = _partial_rows(log_dir, 1 << 40, False)
    monkeypatch.setattr(partials, "MERGE_GROUP_ROWS", 1)
    monkeypatch.setattr(columns, "ARROW_BATCH_ROWS", 3)  # many chunks per slice

    folded = _partial_rows(log_dir, 1 << 40, False)

    def key(row: dict[str, Any]) -> tuple[Any, ...]:
        return (row["segment"], row["position"], row["kind"], repr(row["group"]))

    assert sorted(folded, key=key) == sorted(whole, key=key)


def test_only_partitions_found_in_two_log_dirs_are_replicated(tmp_path: Path) -> None:
    for name, topics in (("a", ["orders-0", "orders-1"]), ("b", ["orders-0", "events-0"])):
        for topic in topics:
            (tmp_path / name / topic).mkdir(parents=True)
            (tmp_path / name / topic / f"{0:020d}.log").write_bytes(b"")

    pieces = plan_slices([str(tmp_path / "a"), str(tmp_path / "b")])

    assert replicated_partitions(pieces) == {("orders", 0)}

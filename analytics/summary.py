"""The human-readable summary printed at the end of the segment report job.

Pure formatting: it takes the (small) report tables already collected to the driver as
lists of dicts, keyed like ``analytics.report.build_reports``, and returns text. Long
lists are cut at ``MAX_LINES`` with a note saying how many were left out (the Parquet
output has them all).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

Rows = Sequence[Mapping[str, Any]]

MAX_LINES = 50
"""Lines per section: a screenful; everything is in the Parquet output anyway."""


@dataclass(frozen=True, slots=True)
class SegmentFileRead:
    """One segment file the job read, and how many of its bytes."""

    path: str
    size: int


def _read_section(read: Mapping[str, Sequence[SegmentFileRead]]) -> list[str]:
    """Every log dir read (never cut, so a missing one shows), then its segment files."""
    lines = ["Read:"]
    for log_dir, segments in read.items():
        partitions = {Path(s.path).parent.name for s in segments}
        size = human_bytes(sum(s.size for s in segments))
        lines.append(
            f"  {log_dir}: {len(segments)} segment file(s) of {len(partitions)} "
            f"partition(s), {size}"
            if segments
            else f"  {log_dir}: no segment files"
        )
    segment_lines = [
        f"  {Path(s.path).relative_to(log_dir)} ({human_bytes(s.size)}) in {log_dir}"
        for log_dir, segments in read.items()
        for s in segments
    ]
    return lines + _section("Segment files", segment_lines, "none")


def human_bytes(n: int | None) -> str:
    value = float(n or 0)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def human_time(ms: int | None) -> str:
    if ms is None:
        return "-"
    if ms < 0:
        return "no timestamp"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def show_key(key: bytes | None) -> str:
    """A key as text when it is printable UTF-8, else as hex."""
    if key is None:
        return "null"
    try:
        text = bytes(key).decode("utf-8")
    except UnicodeDecodeError:
        return "0x" + bytes(key).hex()
    return repr(text) if text.isprintable() else "0x" + bytes(key).hex()


def _replica(row: Mapping[str, Any]) -> str:
    broker = row.get("broker_id")
    where = row["log_dir"] if broker is None else f"broker {broker} ({row['log_dir']})"
    return f"{row['topic']}-{row['partition']} @ {where}"


def _section(title: str, lines: list[str], empty: str) -> list[str]:
    if not lines:
        return [f"{title}: {empty}"]
    shown = lines[:MAX_LINES]
    more = len(lines) - len(shown)
    return [f"{title}:", *shown, *([f"  ... and {more} more"] if more else [])]


def _sorted(rows: Rows, *keys: str) -> list[Mapping[str, Any]]:
    return sorted(rows, key=lambda r: tuple((r[k] is None, r[k]) for k in keys))


def format_summary(
    tables: Mapping[str, Rows],
    log_dirs: Sequence[str],
    read: Mapping[str, Sequence[SegmentFileRead]] | None = None,
    html: str | None = None,
) -> str:
    """The summary; ``read`` (log dir -> segment files read) adds what was read, and
    ``html`` (the HTML report's path) a last line naming it."""
    parts = tables.get("partitions", [])
    total_records = sum(r["records"] for r in parts)
    total_bytes = sum(r["bytes"] for r in parts)
    out = [
        f"minibroker segment report: {len(log_dirs)} log dir(s), {len(parts)} partition "
        f"replica(s), {total_records:,} records, {human_bytes(total_bytes)} in batches"
    ]
    if read is not None:
        out += _read_section(read)

    lines = []
    for r in _sorted(parts, "topic", "partition", "log_dir"):
        span = ""
        if r["records"]:
            span = (
                f"; offsets {r['first_offset']}..{r['last_offset']}; "
                f"{human_time(r['first_timestamp'])} .. {human_time(r['last_timestamp'])}; "
                f"{r['records_per_minute']} records/min; ~{r['approx_distinct_keys']} keys "
                f"({r['null_keys']} null)"
            )
        lines.append(
            f"  {_replica(r)}: {r['records']:,} records in {r['batches']:,} batches, "
            f"{human_bytes(r['bytes'])}{span}"
        )
    out += _section("Partitions", lines, "no segment files found")

    lines = [
        f"  {_replica(r)}: {r['compression']}: {r['batches']:,} batches, "
        f"{r['avg_records_per_batch']} records/batch "
        f"({r['min_records_per_batch']}..{r['max_records_per_batch']}), "
        f"{human_bytes(round(r['avg_batch_bytes']))}/batch avg"
        for r in _sorted(tables.get("batches", []), "topic", "partition", "log_dir", "compression")
    ]
    out += _section("Batches", lines, "none")

    epochs: dict[str, list[str]] = defaultdict(list)
    for r in _sorted(
        tables.get("leader_epochs", []), "topic", "partition", "log_dir", "start_offset"
    ):
        epochs[_replica(r)].append(f"epoch {r['leader_epoch']} from offset {r['start_offset']}")
    lines = [f"  {name}: {', '.join(items)}" for name, items in epochs.items()]
    out += _section("Leader epochs", lines, "none")

    keys: dict[str, list[str]] = defaultdict(list)
    for r in _sorted(tables.get("top_keys", []), "topic", "rank"):
        keys[r["topic"]].append(f"{show_key(r['key'])} x{r['records']:,}")
    lines = [f"  {topic}: {', '.join(items)}" for topic, items in keys.items()]
    out += _section("Top keys", lines, "no keyed records")

    lines = [
        f"  {r['topic']}-{r['partition']}: {r['committed']:,} committed, "
        f"{r['aborted']:,} aborted, {r['open_transactions']:,} open "
        f"({r['transactional_producers']:,} transactional producer(s))"
        for r in _sorted(tables.get("transactions", []), "topic", "partition")
    ]
    out += _section("Transactions", lines, "none")

    lines = [
        f"  {r['segment']} @ byte {r['position']}: {human_bytes(r['length'])} unreadable"
        + ("" if r["batch_base_offset"] is None else f" (batch at offset {r['batch_base_offset']})")
        + f": {r['reason']}"
        for r in _sorted(tables.get("corruption", []), "segment", "position")
    ]
    out += _section("Corruption", lines, "none found")

    lines = []
    for r in _sorted(tables.get("divergence", []), "topic", "partition"):
        replicas = ", ".join(r["replicas"])
        if r["agree"]:
            verdict = (
                f"agree on {r['compared_offsets']:,} offsets "
                f"[{r['common_start']}, {r['smallest_end']})"
            )
        else:
            verdict = (
                f"DIVERGE from offset {r['first_diverging_offset']} "
                f"({r['diverging_offsets']:,} of {r['compared_offsets']:,} offsets in "
                f"[{r['common_start']}, {r['smallest_end']}) differ or are missing)"
            )
        lines.append(f"  {r['topic']}-{r['partition']}: replicas {verdict}; {replicas}")
    out += _section("Replica divergence", lines, "no partition found in more than one log dir")
    if html is not None:
        out.append(f"HTML report: {html}")
    return "\n".join(out)

"""What the report page shows of batches, compression, producers and leader epochs,
from the job's report tables (see ``analytics.figures`` for how: one copy of each
partition, the first few by size, labels; no aggregation a report does not make).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from minibroker.analytics.charts import Chart, bar_chart, epoch_timeline
from minibroker.analytics.figures import (
    Replicas,
    Tables,
    number_field,
    one_copy_rows,
    text_field,
)
from minibroker.analytics.summary import human_bytes

BATCH_ROWS_SHOWN = 30  # topic and codec pairs
PRODUCERS_SHOWN = 15
EPOCH_PARTITIONS_SHOWN = 40


# --- batches and compression ---------------------------------------------------------


def batch_charts(tables: Tables, replicas: Replicas) -> list[Chart]:
    """Batch sizes and records per batch per topic and codec; compression by codec and
    by producer."""
    sums: dict[tuple[str, str], dict[str, Any]] = {}
    for r in one_copy_rows(tables.get("batches", []), replicas):
        key = (r["topic"], r["compression"])
        s = sums.setdefault(
            key,
            {
                "batches": 0,
                "records": 0,
                "bytes": 0,
                "uncompressed": 0,
                "min": r["min_records_per_batch"],
                "max": 0,
                "max_bytes": 0,
            },
        )
        s["batches"] += r["batches"]
        s["records"] += r["records"]
        s["bytes"] += r["bytes"]
        s["uncompressed"] += r["uncompressed_bytes"]
        s["min"] = min(s["min"], r["min_records_per_batch"])
        s["max"] = max(s["max"], r["max_records_per_batch"])
        s["max_bytes"] = max(s["max_bytes"], r["max_batch_bytes"])
    keys = sorted(sums, key=lambda k: (-sums[k]["bytes"], k))[:BATCH_ROWS_SHOWN]
    rows = [
        {
            "label": f"{topic} · {codec}",
            "topic": topic,
            "codec": codec,
            "avg_bytes": round(s["bytes"] / s["batches"], 1),
            "max_bytes": s["max_bytes"],
            "avg_records": round(s["records"] / s["batches"], 2),
            "min_records": s["min"],
            "max_records": s["max"],
            "batches": s["batches"],
        }
        for (topic, codec), s in ((k, sums[k]) for k in keys)
    ]
    charts = []
    if rows:
        common = [
            text_field("topic", "topic"),
            text_field("codec", "compression"),
            number_field("batches", "batches"),
        ]
        charts += [
            bar_chart(
                "batch-bytes",
                "Batch size",
                "Average bytes per batch on disk (bar) and the "
                "largest batch (tick), per topic and codec.",
                rows,
                label="label",
                value="avg_bytes",
                value_title="bytes",
                marker="max_bytes",
                tooltip=[
                    *common,
                    number_field("avg_bytes", "average bytes", ",.0f"),
                    number_field("max_bytes", "largest batch"),
                ],
            ),
            bar_chart(
                "batch-records",
                "Records per batch",
                "Average records per batch (bar) and "
                "the range from the smallest to the largest (line).",
                rows,
                label="label",
                value="avg_records",
                value_title="records per batch",
                value_format=",.0f",
                extent=("min_records", "max_records"),
                tooltip=[
                    *common,
                    number_field("avg_records", "average", ",.1f"),
                    number_field("min_records", "fewest"),
                    number_field("max_records", "most"),
                ],
            ),
        ]
    codecs: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for s_key, s in sums.items():
        figures = codecs[s_key[1]]
        figures[0] += s["bytes"]
        figures[1] += s["uncompressed"]
        figures[2] += s["batches"]
    by_codec = [
        {
            "codec": codec,
            "ratio": round(u / b, 3) if b else 1.0,
            "on_disk": human_bytes(b),
            "uncompressed": human_bytes(u),
            "batches": n,
        }
        for codec, (b, u, n) in sorted(codecs.items(), key=lambda kv: -kv[1][0])
    ]
    if by_codec:
        charts.append(
            _ratio_chart("compression-codec", "Compression ratio by codec",
                         "Uncompressed size over size on disk (1 = no saving).", by_codec,
                         "codec", number_field("batches", "batches"))
        )  # fmt: skip
    producers = sorted(tables.get("producers", []), key=lambda r: (-r["bytes"], r["producer_id"]))
    by_producer = [
        {
            "producer": producer_label(r),
            "ratio": r["compression_ratio"] or 1.0,
            "on_disk": human_bytes(r["bytes"]),
            "uncompressed": human_bytes(r["uncompressed_bytes"]),
        }
        for r in producers[:PRODUCERS_SHOWN]
    ]
    if by_producer:
        charts.append(
            _ratio_chart("compression-producer", "Compression ratio by producer",
                         f"The {len(by_producer)} producers with the most bytes on disk.",
                         by_producer, "producer")
        )  # fmt: skip
    return charts


def _ratio_chart(
    key: str, title: str, caption: str, rows: list[dict[str, Any]], label: str, *more: Any
) -> Chart:
    """Bars of compression ratios (``ratio``, with sizes ``on_disk`` and ``uncompressed``)."""
    tooltip = [
        text_field(label, label),
        number_field("ratio", "ratio", ".2f"),
        text_field("on_disk", "on disk"),
        text_field("uncompressed", "uncompressed"),
        *more,
    ]
    axis = "uncompressed ÷ on disk"
    return bar_chart(key, title, caption, rows, label=label, value="ratio", value_title=axis,
                     value_format="~g", tooltip=tooltip)  # fmt: skip


# --- producers and leader epochs -----------------------------------------------------


def producer_label(row: Mapping[str, Any]) -> str:
    pid = row["producer_id"]
    return "not idempotent" if pid < 0 else f"producer {pid}"


def producer_epochs(row: Mapping[str, Any]) -> str:
    """ "0..3", "2", or "-" for producers without an id (their batches carry no epoch)."""
    if row["producer_id"] < 0:
        return "-"
    first, last = row["first_epoch"], row["last_epoch"]
    return str(first) if first == last else f"{first}..{last}"


def producer_kind(row: Mapping[str, Any]) -> str:
    if row["producer_id"] < 0:
        return "not idempotent"
    return "transactional" if row["transactional_batches"] else "idempotent"


PRODUCER_KINDS = ["idempotent", "transactional", "not idempotent"]


def producer_charts(tables: Tables) -> list[Chart]:
    """Records per producer, by kind; transactions once any producer uses them."""
    producers = sorted(tables.get("producers", []), key=lambda r: (-r["records"], r["producer_id"]))
    shown = producers[:PRODUCERS_SHOWN]
    if not shown:
        return []
    rows = [
        {
            "producer": producer_label(r),
            "kind": producer_kind(r),
            "records": r["records"],
            "epochs": producer_epochs(r),
            "gaps": r["sequence_gaps"],
            "partitions": r["partitions"],
            "batches": r["batches"],
        }
        for r in shown
    ]
    tooltip = [
        text_field("producer", "producer"),
        text_field("kind", "kind"),
        number_field("records", "records"),
        number_field("batches", "batches"),
        number_field("partitions", "partitions"),
        text_field("epochs", "epochs"),
        number_field("gaps", "sequence gaps"),
    ]
    color = {
        "field": "kind",
        "type": "nominal",
        "title": "producer",
        "scale": {"domain": PRODUCER_KINDS, "range": ["#4c78a8", "#b279a2", "#bab0ac"]},
    }
    charts = [
        bar_chart(
            "producers",
            "Records by producer",
            f"The {len(rows)} producers with the most records (one copy of each partition).",
            rows,
            label="producer",
            value="records",
            value_title="records",
            tooltip=tooltip,
            color=color,
        )
    ]
    outcomes = [
        {"producer": producer_label(r), "outcome": outcome, "transactions": r[field]}
        for r in shown
        if r["transactional_batches"] or r["committed"] or r["aborted"]
        for outcome, field in (
            ("committed", "committed"),
            ("aborted", "aborted"),
            ("open", "open_transactions"),
        )
        if r[field]
    ]
    if outcomes:
        color = {
            "field": "outcome",
            "type": "nominal",
            "title": "transactions",
            "scale": {
                "domain": ["committed", "aborted", "open"],
                "range": ["#54a24b", "#e45756", "#eeca3b"],
            },
        }
        tooltip = [
            text_field("producer", "producer"),
            text_field("outcome", "outcome"),
            number_field("transactions", "transactions"),
        ]
        charts.append(
            bar_chart(
                "transactions",
                "Transactions by producer",
                "Commit and abort markers, and partitions whose last transactional batch "
                "has no marker after it (open).",
                outcomes,
                label="producer",
                value="transactions",
                value_title="transactions",
                tooltip=tooltip,
                color=color,
            )
        )
    return charts


def epoch_chart(tables: Tables, replicas: Replicas) -> Chart | None:
    """The leader epochs of the partitions that changed leader, as a timeline."""
    by_partition: dict[tuple[str, int], list[Mapping[str, Any]]] = defaultdict(list)
    for r in one_copy_rows(tables.get("leader_epochs", []), replicas):
        by_partition[(r["topic"], r["partition"])].append(r)
    changed = [key for key, epochs in by_partition.items() if len(epochs) > 1]
    changed.sort(key=lambda k: (-len(by_partition[k]), k))
    rows = [
        {
            "partition": f"{topic}-{partition}",
            "epoch": r["leader_epoch"],
            "t": r["first_minute"],
            "t_last": r["last_minute"],
            "end_offset": r["last_offset"] + 1,
            "start_offset": r["start_offset"],
            "last_offset": r["last_offset"],
            "batches": r["batches"],
        }
        for topic, partition in changed[:EPOCH_PARTITIONS_SHOWN]
        for r in sorted(by_partition[(topic, partition)], key=lambda r: r["start_offset"])
    ]
    if not rows:
        return None
    return Chart(
        "leader-epochs",
        "Leader epochs",
        f"The {min(len(changed), EPOCH_PARTITIONS_SHOWN)} partitions whose leader "
        "changed: a bar per epoch over the offsets its leader wrote.",
        epoch_timeline(rows),
        len(rows),
    )

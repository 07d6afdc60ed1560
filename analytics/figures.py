"""What each chart of the report page shows, from the job's report tables.

Pure Python over the rows the job already collected (``analytics.report``'s tables as
lists of dicts): no Spark, no aggregation a report does not already make. What is done
here is choosing and shaping for a picture: one copy of each partition (the replica
with the most records, as ``analytics.copies.one_copy`` chooses), the first few topics,
keys or producers by size (``*_SHOWN``), rates from counts per time bucket, labels.
Each function returns ``charts.Chart``s (none when there is nothing to draw). Traffic,
partitions and keys are here; batches, producers and leader epochs in
``analytics.batch_figures``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from minibroker.analytics.charts import (
    Chart,
    Rows,
    bar_chart,
    lines_over_time,
    ticks_per_group,
)
from minibroker.analytics.schema import MINUTE_MS
from minibroker.analytics.summary import human_bytes, show_key

SKEW_TOPICS_SHOWN = 20  # rows of ticks: more would not fit a screen
KEY_TOPICS_SHOWN = 8
KEYS_SHOWN = 5  # per topic (the job keeps --top-keys of each)
PARTITION_SERIES_SHOWN = 8  # lines in the busiest-partitions chart

Tables = Mapping[str, Rows]
Replicas = dict[tuple[str, int], str]


def chosen_replicas(tables: Tables) -> Replicas:
    """(topic, partition) -> the log dir of the replica with the most records."""
    best: dict[tuple[str, int], tuple[int, str]] = {}
    for r in tables.get("partitions", []):
        key = (r["topic"], r["partition"])
        held = best.get(key)
        if held is None or (-r["records"], r["log_dir"]) < (-held[0], held[1]):
            best[key] = (r["records"], r["log_dir"])
    return {key: log_dir for key, (_, log_dir) in best.items()}


def one_copy_rows(rows: Rows, replicas: Replicas) -> list[Mapping[str, Any]]:
    return [r for r in rows if replicas.get((r["topic"], r["partition"])) == r["log_dir"]]


def number_field(field: str, title: str, fmt: str = ",") -> dict[str, Any]:
    return {"field": field, "type": "quantitative", "title": title, "format": fmt}


def text_field(field: str, title: str) -> dict[str, Any]:
    return {"field": field, "type": "nominal", "title": title}


# --- traffic -------------------------------------------------------------------------


def _rates(rows: Rows, label: Any, count: str) -> list[dict[str, Any]]:
    """Per row: its series' label, the bucket's start ``t`` and ``count`` per second ``v``
    (4 significant digits: the page carries thousands of these)."""
    return [
        {"series": label(r), "t": r["bucket_start"],
         "v": float(f"{r[count] * 1000 / r['bucket_ms']:.4g}")}
        for r in sorted(rows, key=lambda r: (r.get("topic_rank", 0), r["bucket_start"]))
    ]  # fmt: skip


def traffic_charts(tables: Tables) -> list[Chart]:
    """Records/s and bytes/s per topic, and records/s of the busiest partitions."""
    rows = tables.get("traffic", [])
    whole = [r for r in rows if r["partition"] is None]
    if not whole:
        return []
    width = human_minutes(whole[0]["bucket_ms"])

    def topic(row: Mapping[str, Any]) -> str:
        return str(row["topic"])

    count = len({r["topic"] for r in whole})
    caption = f"Per {width}, from the batches' timestamps; the {count} busiest topics."
    charts = [
        Chart(
            "traffic-records",
            "Records per second by topic",
            caption,
            lines_over_time(
                _rates(whole, topic, "records"),
                "v",
                "records per second",
                series="series",
                series_title="topic",
            ),
            count,
        ),
        Chart(
            "traffic-bytes",
            "Bytes on disk per second by topic",
            caption,
            lines_over_time(
                _rates(whole, topic, "bytes"),
                "v",
                "bytes on disk per second",
                series="series",
                series_title="topic",
            ),
            count,
        ),
    ]
    parts = [r for r in rows if r["partition"] is not None]
    totals: dict[tuple[str, int], int] = defaultdict(int)
    for r in parts:
        totals[(r["topic"], r["partition"])] += r["records"]
    busiest = sorted(totals, key=lambda k: (-totals[k], k))[:PARTITION_SERIES_SHOWN]
    if busiest:
        picked = [r for r in parts if (r["topic"], r["partition"]) in set(busiest)]
        order = {key: i for i, key in enumerate(busiest)}
        picked.sort(key=lambda r: (order[(r["topic"], r["partition"])], r["bucket_start"]))
        series = _rates(picked, lambda r: f"{r['topic']}-{r['partition']}", "records")
        charts.append(
            Chart(
                "traffic-partitions",
                "Busiest partitions, records per second",
                f"The {len(busiest)} partitions with the most records, per {width}.",
                lines_over_time(
                    series,
                    "v",
                    "records per second",
                    series="series",
                    series_title="partition",
                ),
                len(busiest),
                wide=True,
            )
        )
    return charts


def human_minutes(ms: int) -> str:
    minutes = ms // MINUTE_MS
    if minutes % 1440 == 0:
        return "day" if minutes == 1440 else f"{minutes // 1440} days"
    if minutes % 60 == 0:
        return "hour" if minutes == 60 else f"{minutes // 60} hours"
    return "minute" if minutes == 1 else f"{minutes} minutes"


# --- partitions and keys -------------------------------------------------------------


def skew_charts(tables: Tables, replicas: Replicas) -> list[Chart]:
    """Records and bytes of every partition, a row of ticks per topic."""
    copies = one_copy_rows(tables.get("partitions", []), replicas)
    by_topic: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for r in copies:
        by_topic[r["topic"]].append(r)
    topics = sorted(by_topic, key=lambda t: (-sum(r["records"] for r in by_topic[t]), t))
    topics = topics[:SKEW_TOPICS_SHOWN]
    charts = []
    for field, title, unit in (("records", "Records", "records"), ("bytes", "Bytes", "bytes")):
        rows = []
        for topic in topics:
            mean = sum(r[field] for r in by_topic[topic]) / len(by_topic[topic]) or 1
            rows += [
                {
                    "topic": topic,
                    "partition": f"{topic}-{r['partition']}",
                    field: r[field],
                    "vs_mean": round(r[field] / mean, 3),
                    "size": human_bytes(r["bytes"]),
                    "records": r["records"],
                }
                for r in sorted(by_topic[topic], key=lambda r: r["partition"])
            ]
        if not rows:
            continue
        tooltip = [
            text_field("partition", "partition"),
            number_field("records", "records"),
            text_field("size", "bytes on disk"),
            number_field("vs_mean", "× topic mean", ".2f"),
        ]
        charts.append(
            Chart(
                f"skew-{field}",
                f"{title} per partition",
                f"One tick per partition ({unit}, one copy of each); the colour says how far "
                "it is from its topic's mean.",
                ticks_per_group(
                    rows, group="topic", value=field, value_title=unit, tooltip=tooltip
                ),
                len(rows),
            )
        )
    return charts


def key_charts(tables: Tables) -> list[Chart]:
    """Distinct keys per topic, and each topic's hottest keys."""
    charts = []
    topics = sorted(tables.get("topics", []), key=lambda r: (-r["records"], r["topic"]))
    rows = [
        {
            "topic": r["topic"],
            "keys": r["approx_distinct_keys"],
            "records": r["records"],
            "null_share": round(r["null_keys"] / r["records"], 3) if r["records"] else 0.0,
        }
        for r in topics[:SKEW_TOPICS_SHOWN]
    ]
    if rows:
        tooltip = [
            text_field("topic", "topic"),
            number_field("keys", "distinct keys (approx.)"),
            number_field("records", "records"),
            number_field("null_share", "records without a key", ".0%"),
        ]
        charts.append(
            bar_chart(
                "key-cardinality",
                "Key cardinality by topic",
                "Distinct keys per topic (a HyperLogLog estimate, within a few per cent).",
                rows,
                label="topic",
                value="keys",
                value_title="distinct keys",
                tooltip=tooltip,
                wide=True,
            )
        )
    ranked: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for r in sorted(tables.get("top_keys", []), key=lambda r: (r["topic"], r["rank"])):
        ranked[r["topic"]].append(r)
    order = [r["topic"] for r in topics if r["topic"] in ranked] or sorted(ranked)
    hot = [
        {
            "label": f"{topic} · {show_key(r['key'])}",
            "topic": topic,
            "key": show_key(r["key"]),
            "records": r["records"],
        }
        for topic in order[:KEY_TOPICS_SHOWN]
        for r in ranked[topic][:KEYS_SHOWN]
    ]
    if hot:
        tooltip = [
            text_field("topic", "topic"),
            text_field("key", "key"),
            number_field("records", "records"),
        ]
        color = {
            "field": "topic",
            "type": "nominal",
            "legend": None,
            "sort": order[:KEY_TOPICS_SHOWN],
        }
        charts.append(
            bar_chart(
                "hot-keys",
                "Hottest keys",
                f"The {KEYS_SHOWN} most frequent keys of each topic, by records.",
                hot,
                label="label",
                value="records",
                value_title="records",
                tooltip=tooltip,
                color=color,
                wide=True,
            )
        )
    return charts

"""``report.html``: the segment report as one page of charts and tables.

How this works: ``render_report`` takes the report tables the job collected (lists of
dicts, as ``analytics.summary`` does) and returns one HTML document: the charts of
``analytics.figures`` as Vega-Lite specs in JSON script blocks, the Vega bundle
(``analytics.vega_bundle``) inline, and a few lines of script that hand each spec to
vega-embed and note on the page when all are drawn (``data-render-ms`` on the root
element: ms from navigation start). Nothing is fetched: the page opens from disk with
no network, and everything it shows is in the file.

Order: what was found wrong (corrupt regions, replicas that disagree) comes first when
there is any, with the file and byte position of each; otherwise that section says all
is well and sits before "What was read", at the end. Tables are cut at ``TABLE_ROWS``
with a note; the Parquet output has every row.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from html import escape
from pathlib import Path
from typing import Any

from minibroker.analytics.batch_figures import (
    batch_charts,
    epoch_chart,
    producer_charts,
    producer_epochs,
    producer_label,
)
from minibroker.analytics.charts import MARKS_CLASS, Chart, Rows
from minibroker.analytics.figures import (
    chosen_replicas,
    key_charts,
    skew_charts,
    traffic_charts,
)
from minibroker.analytics.summary import SegmentFileRead, human_bytes, human_time
from minibroker.analytics.vega_bundle import vega_bundle

REPORT_FILE = "report.html"
TABLE_ROWS = 200
"""Rows per table on the page: plenty to read, bounded whatever the cluster's size."""
_SCRIPT_END = re.compile(r"</(script)", re.IGNORECASE)

STYLE = """
:root { --ink:#1e293b; --muted:#64748b; --line:#e2e8f0; --card:#fff; --bg:#f5f7fa;
  --bad:#c0392b; --bad-bg:#fdf0ee; --good:#2e7d4f; --good-bg:#eef7f1; }
* { box-sizing: border-box; }
body { margin:0; background:var(--bg); color:var(--ink); font:14px/1.45 system-ui,
  -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif; }
main { max-width:1240px; margin:0 auto; padding:28px 24px 48px; }
header h1 { margin:0 0 2px; font-size:22px; letter-spacing:-0.01em; }
header p { margin:0; color:var(--muted); }
.tiles { display:grid; grid-template-columns:repeat(auto-fit,minmax(150px,1fr)); gap:10px;
  margin:18px 0 8px; }
.tile { background:var(--card); border:1px solid var(--line); border-radius:8px;
  padding:10px 14px; }
.tile b { display:block; font-size:20px; font-weight:650; }
.tile span { color:var(--muted); font-size:12px; }
section { margin-top:26px; }
section > h2 { font-size:17px; margin:0 0 4px; }
section > p.lede { margin:0 0 12px; color:var(--muted); }
.grid { display:grid; grid-template-columns:repeat(auto-fit,minmax(520px,1fr)); gap:14px; }
figure.chart { margin:0; background:var(--card); border:1px solid var(--line);
  border-radius:8px; padding:12px 14px 8px; min-width:0; }
figure.chart h3 { margin:0; font-size:14px; }
figure.chart figcaption p { margin:2px 0 8px; color:var(--muted); font-size:12px; }
.vega { width:100%; }
figure.chart.wide { grid-column:1 / -1; }
td.nowrap { white-space:nowrap; }
.alert { border-radius:8px; padding:12px 16px; margin-bottom:12px; }
.alert.bad { background:var(--bad-bg); border:1px solid #f3c6bf; border-left:5px solid var(--bad); }
.alert.good { background:var(--good-bg); border:1px solid #cfe8d8;
  border-left:5px solid var(--good); }
.alert h2 { margin:0 0 6px; font-size:17px; }
.table-wrap { overflow-x:auto; background:var(--card); border:1px solid var(--line);
  border-radius:8px; margin-bottom:12px; }
table { border-collapse:collapse; width:100%; font-size:12.5px; }
th, td { text-align:left; padding:6px 10px; border-bottom:1px solid var(--line);
  vertical-align:top; }
th { background:#f8fafc; color:#334155; font-weight:600; white-space:nowrap; }
th.num { text-align:right; }
td.num { text-align:right; font-variant-numeric:tabular-nums; white-space:nowrap; }
td.path { font-family:ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
  font-size:12px; overflow-wrap:anywhere; min-width:18em; }
tr:last-child td { border-bottom:0; }
.note { color:var(--muted); font-size:12px; margin:4px 0 0; }
footer { margin-top:32px; color:var(--muted); font-size:12px; }
"""

EMBED = """
(function () {
  var figures = Array.prototype.slice.call(document.querySelectorAll("figure.chart"));
  var drawn = figures.map(function (figure) {
    var spec = JSON.parse(figure.querySelector("script.spec").textContent);
    var options = { renderer: "svg", actions: false, mode: "vega-lite" };
    return vegaEmbed(figure.querySelector(".vega"), spec, options).then(
      function () { figure.dataset.drawn = "yes"; },
      function (error) { figure.dataset.drawn = "error"; figure.dataset.error = String(error); }
    );
  });
  window.reportRendered = Promise.all(drawn).then(function () {
    document.documentElement.dataset.renderMs = String(Math.round(performance.now()));
    return figures.length;
  });
})();
"""
"""Hands each chart's spec to vega-embed (SVG, no action menu); notes when all are done."""

Tables = Mapping[str, Rows]
Cell = tuple[str, str]  # (text, css class)


def _cell(value: Any, kind: str = "") -> Cell:
    if isinstance(value, int | float) and not isinstance(value, bool) and not kind:
        return (f"{value:,}", "num")
    return ("" if value is None else str(value), kind)


def html_table(headers: Sequence[str], rows: Sequence[Sequence[Cell]], total: int) -> str:
    """A table of ``rows`` (each cell text and class), with a note when ``total`` is more."""
    kinds = [kind for _, kind in rows[0]] if rows else [""] * len(headers)
    head = "".join(
        f'<th class="num">{escape(h)}</th>' if kind == "num" else f"<th>{escape(h)}</th>"
        for h, kind in zip(headers, kinds, strict=True)
    )
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="{kind}">{escape(text)}</td>' if kind else f"<td>{escape(text)}</td>"
            for text, kind in row
        )
        + "</tr>"
        for row in rows[:TABLE_ROWS]
    )
    more = total - min(len(rows), TABLE_ROWS)
    note = f'<p class="note">... and {more:,} more in the Parquet output.</p>' if more > 0 else ""
    return f'<div class="table-wrap"><table><tr>{head}</tr>{body}</table></div>{note}'


def _broker(row: Mapping[str, Any]) -> str:
    """The replica's broker id (from its log dir's meta.properties), or "-" if none."""
    broker = row.get("broker_id")
    return "-" if broker is None else str(broker)


def chart_html(chart: Chart) -> str:
    spec = _SCRIPT_END.sub(
        r"<\\/\1", json.dumps(chart.spec, separators=(",", ":"), ensure_ascii=False)
    )
    return (
        f'<figure class="chart{" wide" if chart.wide else ""}" id="chart-{chart.key}" '
        f'data-marks="{chart.marks}" '
        f'data-mark-class="{MARKS_CLASS}"><figcaption><h3>{escape(chart.title)}</h3>'
        f"<p>{escape(chart.caption)}</p></figcaption>"
        f'<div class="vega" id="vega-{chart.key}"></div>'
        f'<script type="application/json" class="spec">{spec}</script></figure>'
    )


def _section(key: str, title: str, lede: str, body: str) -> str:
    return (
        f'<section id="{key}"><h2>{escape(title)}</h2><p class="lede">{escape(lede)}</p>'
        f"{body}</section>"
    )


def _charts(charts: Sequence[Chart | None]) -> str:
    return '<div class="grid">' + "".join(chart_html(c) for c in charts if c) + "</div>"


def integrity_section(tables: Tables) -> tuple[bool, str]:
    """(anything wrong, the section): corrupt regions and diverging replicas."""
    damage = sorted(tables.get("corruption", []), key=lambda r: (r["segment"], r["position"]))
    verdicts = tables.get("divergence", [])
    diverging = sorted(
        (r for r in verdicts if not r["agree"]), key=lambda r: (r["topic"], r["partition"])
    )
    if not damage and not diverging:
        compared = len(verdicts)
        text = (
            f"No corrupt bytes in any segment file read, and all {compared} partitions found "
            "in more than one log dir agree."
            if compared
            else "No corrupt bytes in any segment file read (no partition was found in more "
            "than one log dir, so there were no replicas to compare)."
        )
        return False, (
            f'<section id="integrity"><div class="alert good"><h2>Replicas and corruption'
            f"</h2><p>{escape(text)}</p></div></section>"
        )
    parts = []
    if damage:
        rows = [
            [
                _cell(f"{r['topic']}-{r['partition']}"),
                _cell(_broker(r), "nowrap"),
                _cell(r["segment"], "path"),
                _cell(r["position"]),
                _cell(human_bytes(r["length"]), "num"),
                _cell(r["batch_base_offset"]),
                _cell(r["reason"]),
            ]
            for r in damage
        ]
        parts.append(
            html_table(
                [
                    "partition",
                    "broker",
                    "segment file",
                    "byte position",
                    "unreadable",
                    "batch offset",
                    "reason",
                ],
                rows,
                len(damage),
            )
        )
    if diverging:
        rows = [
            [
                _cell(f"{r['topic']}-{r['partition']}"),
                _cell(r["first_diverging_offset"]),
                _cell(f"{r['diverging_offsets']:,} of {r['compared_offsets']:,}", "num"),
                _cell(f"[{r['common_start']:,}, {r['smallest_end']:,})"),
                _cell(", ".join(r["replicas"]), "path"),
            ]
            for r in diverging
        ]
        parts.append(
            html_table(
                [
                    "partition",
                    "first diverging offset",
                    "offsets differing or missing",
                    "compared range",
                    "replicas (log dirs)",
                ],
                rows,
                len(diverging),
            )
        )
    summary = []
    if damage:
        summary.append(f"{len(damage):,} corrupt region(s) in segment files")
    if diverging:
        summary.append(f"{len(diverging):,} partition(s) whose replicas disagree")
    return True, (
        '<section id="integrity"><div class="alert bad"><h2>Replicas and corruption: '
        f"{escape(' and '.join(summary))}</h2><p>Where each unreadable region sits (file and "
        "byte position; its records are left out of every figure below) and where replicas "
        "stop agreeing.</p></div>" + "".join(parts) + "</section>"
    )


def producer_table(tables: Tables) -> str:
    producers = sorted(tables.get("producers", []), key=lambda r: (-r["records"], r["producer_id"]))
    rows = [
        [
            _cell(producer_label(r)),
            _cell(producer_epochs(r)),
            _cell(r["partitions"]),
            _cell(r["batches"]),
            _cell(r["records"]),
            _cell(r["sequence_gaps"]),
            _cell(r["transactional_batches"]),
            _cell(r["committed"]),
            _cell(r["aborted"]),
            _cell(r["open_transactions"]),
        ]
        for r in producers
    ]
    headers = [
        "producer",
        "epochs",
        "partitions",
        "batches",
        "records",
        "sequence gaps",
        "transactional batches",
        "committed",
        "aborted",
        "open",
    ]
    table = html_table(headers, rows, len(producers)) if rows else ""
    if not any(r["transactional_batches"] or r["committed"] or r["aborted"] for r in producers):
        table += (
            '<p class="note">No transactional batches in these segments: committed, aborted '
            "and open transactions appear here once producers use transactions.</p>"
        )
    return table


def read_section(
    log_dirs: Sequence[str], read: Mapping[str, Sequence[SegmentFileRead]] | None
) -> str:
    rows = []
    for log_dir in read or {d: [] for d in log_dirs}:
        segments = (read or {}).get(log_dir, [])
        partitions = {Path(s.path).parent.name for s in segments}
        rows.append(
            [
                _cell(log_dir, "path"),
                _cell(len(partitions)),
                _cell(len(segments)),
                _cell(human_bytes(sum(s.size for s in segments)), "num"),
            ]
        )
    return html_table(["log dir", "partitions", "segment files", "bytes read"], rows, len(rows))


def _tiles(
    tables: Tables, log_dirs: Sequence[str], read: Mapping[str, Sequence[SegmentFileRead]] | None
) -> str:
    parts = tables.get("partitions", [])
    replicas = chosen_replicas(tables)
    copies = [r for r in parts if replicas.get((r["topic"], r["partition"])) == r["log_dir"]]
    first = [
        r["first_timestamp"]
        for r in copies
        if r["first_timestamp"] is not None and r["first_timestamp"] >= 0
    ]
    last = [
        r["last_timestamp"]
        for r in copies
        if r["last_timestamp"] is not None and r["last_timestamp"] >= 0
    ]
    segments = sum(len(s) for s in (read or {}).values())
    tiles = [
        (f"{len({r['topic'] for r in parts}):,}", "topics"),
        (f"{len(replicas):,}", "partitions"),
        (f"{len(parts):,}", "replicas read"),
        (f"{sum(r['records'] for r in copies):,}", "records (one copy)"),
        (human_bytes(sum(r["bytes"] for r in parts)), "on disk, all replicas"),
        (f"{segments:,}", f"segment files in {len(log_dirs)} log dir(s)"),
    ]
    span = (
        f"{human_time(min(first))} .. {human_time(max(last))}"
        if first and last
        else "no timestamps"
    )
    return (
        '<div class="tiles">'
        + "".join(
            f'<div class="tile"><b>{escape(v)}</b><span>{escape(k)}</span></div>' for v, k in tiles
        )
        + f'</div><p class="note">Records from {escape(span)}.</p>'
    )


def render_report(
    tables: Tables,
    log_dirs: Sequence[str],
    read: Mapping[str, Sequence[SegmentFileRead]] | None = None,
    *,
    out: str | None = None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    bundle: Callable[[], str] = vega_bundle,
) -> str:
    """The whole page (see the module docstring)."""
    replicas = chosen_replicas(tables)
    wrong, integrity = integrity_section(tables)
    epochs = epoch_chart(tables, replicas)
    sections = [
        _section(
            "traffic",
            "Traffic",
            "Where the records went over time: rates from the "
            "batches' own timestamps, one copy of each partition.",
            _charts(traffic_charts(tables)),
        ),
        _section(
            "partitions",
            "Partitions and keys",
            "How evenly records spread over partitions, and which keys dominate.",
            _charts([*skew_charts(tables, replicas), *key_charts(tables)]),
        ),
        _section(
            "batches",
            "Batches and compression",
            "How full batches are and how well each codec and producer compresses.",
            _charts(batch_charts(tables, replicas)),
        ),
        _section(
            "producers",
            "Producers",
            "Producer ids and epochs, sequence gaps (a batch "
            "that does not start where the one before ended; compaction removes batches, "
            "so compacted topics show some), idempotent or not, and transactions.",
            _charts(producer_charts(tables)) + producer_table(tables),
        ),
        _section(
            "epochs",
            "Leader changes",
            "Leader epochs as the batches record them.",
            _charts([epochs])
            if epochs
            else '<p class="note">No partition changed leader '
            "in the data read: every partition's batches carry one leader epoch.</p>",
        ),
    ]
    read_html = _section(
        "read",
        "What was read",
        "Every log dir, with its segment files.",
        read_section(log_dirs, read),
    )
    body = [integrity, *sections] if wrong else [*sections, integrity]
    where = f" Every figure in full: the Parquet tables in {out}." if out else ""
    script = _SCRIPT_END.sub(r"<\\/\1", bundle())
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        "<title>minibroker segment report</title>"
        f"<style>{STYLE}</style></head><body><main><header>"
        "<h1>minibroker segment report</h1>"
        f"<p>Generated {escape(now().strftime('%Y-%m-%d %H:%M:%S UTC'))} from "
        f"{len(log_dirs)} log dir(s).</p>{_tiles(tables, log_dirs, read)}</header>"
        + "".join(body)
        + read_html
        + f"<footer>Charts drawn by Vega-Lite in this page; hover a mark for its numbers."
        f"{escape(where)}</footer></main>"
        f"<script>{script}</script><script>{EMBED}</script></body></html>"
    )


def write_report(path: Path, html: str) -> None:
    """Write ``html`` to ``path``, creating its directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(html, encoding="utf-8")

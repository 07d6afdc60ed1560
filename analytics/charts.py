"""The report page's charts as Vega-Lite specifications (no Spark, no drawing here).

Each ``Chart`` is a Vega-Lite spec (data inline, already aggregated: a few hundred rows
at most, see ``analytics.figures``) that vega-embed draws in the browser as SVG, with a
tooltip on every mark. The marks that carry the data are named (``MARKS``): Vega puts
the name on their SVG group (``<g class="mark-line role-mark series_marks">``), which is
how a test counts what was drawn, and ``Chart.marks`` says how many there should be
(one path per line, one per bar or tick).

The look (fonts, greys, palette) is one Vega-Lite ``config`` shared by every chart.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Spec = dict[str, Any]
Rows = Sequence[Mapping[str, Any]]

MARKS = "series"
"""The name of every data-carrying layer: its SVG group gets the class ``series_marks``."""
MARKS_CLASS = f"{MARKS}_marks"
FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif"
PALETTE = [
    "#4c78a8",
    "#f58518",
    "#54a24b",
    "#e45756",
    "#72b7b2",
    "#b279a2",
    "#eeca3b",
    "#9d755d",
    "#ff9da6",
    "#bab0ac",
]
"""Vega's own ten categorical colours (tableau10), so legends match tooltips."""
BAR_STEP = 18  # px per bar or per row of ticks: room for an 11 px label
CHART_HEIGHT = 220  # px: line charts, so two fit a laptop screen
EPOCH_SWATCHES = 12  # leader epochs listed one by one in the timeline's legend
VISIBLE_POINTS = 60  # buckets per series up to which a line chart also draws its points

CONFIG: Spec = {
    "font": FONT,
    "background": None,
    "view": {"stroke": None},
    "axis": {
        "labelColor": "#475569",
        "titleColor": "#334155",
        "titleFontWeight": 600,
        "labelFontSize": 11,
        "titleFontSize": 11,
        "gridColor": "#e8edf3",
        "domainColor": "#cbd5e1",
        "tickColor": "#cbd5e1",
        "labelLimit": 260,
    },
    "legend": {
        "labelColor": "#334155",
        "titleColor": "#334155",
        "labelFontSize": 11,
        "titleFontSize": 11,
        "symbolType": "circle",
        "labelLimit": 220,
    },
    "range": {"category": PALETTE},
    "line": {"strokeWidth": 2},
    "bar": {"cornerRadiusEnd": 2},
}


@dataclass(frozen=True, slots=True)
class Chart:
    """One chart of the page: ``spec`` for vega-embed, ``marks`` it should draw."""

    key: str  # unique on the page; the element id
    title: str
    caption: str
    spec: Spec
    marks: int
    wide: bool = False  # the page's whole width, not half


def _spec(rows: Rows, layers: list[Spec], height: int | str, **more: Any) -> Spec:
    return {
        "width": "container",
        "height": height,
        "autosize": {"type": "fit-x", "contains": "padding"},
        "data": {"values": [dict(r) for r in rows]},
        "layer": layers,
        "config": CONFIG,
        **more,
    }


def _time_axis(title: str = "time (UTC)") -> Spec:
    return {
        "field": "t",
        "type": "temporal",
        "scale": {"type": "utc"},
        "title": title,
        "axis": {"format": "%b %d %H:%M", "labelOverlap": True},
    }


def _tooltip_time() -> Spec:
    return {
        "field": "t",
        "type": "temporal",
        "scale": {"type": "utc"},
        "title": "from",
        "format": "%Y-%m-%d %H:%M UTC",
        "formatType": "utc",
    }


def axis_format(largest: float) -> str:
    """SI prefixes (1.2k, 3M) for large values; plain decimals below 1,000, where SI
    would write 0.5 as 500m."""
    return "~s" if largest >= 1000 else ",.2~f"


def lines_over_time(rows: Rows, value: str, title: str, *, series: str, series_title: str) -> Spec:
    """One line per ``series`` of ``value`` over time ``t`` (ms), with points to hover."""
    y = {
        "field": value,
        "type": "quantitative",
        "title": title,
        "axis": {"format": axis_format(max((r[value] for r in rows), default=0))},
    }
    color = {
        "field": series,
        "type": "nominal",
        "title": series_title,
        "sort": list(dict.fromkeys(r[series] for r in rows)),
    }
    tooltip = [
        {"field": series, "type": "nominal", "title": series_title},
        _tooltip_time(),
        {"field": value, "type": "quantitative", "title": title, "format": ",.1f"},
    ]
    line = {
        "name": MARKS,
        "mark": {"type": "line"},
        "encoding": {"x": _time_axis(), "y": y, "color": color},
    }
    per_series = max(Counter(r[series] for r in rows).values(), default=0)
    # points drawn where lines are short (a line of one bucket is no line at all);
    # hidden but still hoverable where a series has many
    opacity = 1 if per_series <= VISIBLE_POINTS else 0
    points = {
        "mark": {"type": "point", "filled": True, "size": 28, "opacity": opacity},
        "encoding": {"x": _time_axis(), "y": y, "color": color, "tooltip": tooltip},
        "params": [
            {
                "name": f"hover_{value}",
                "select": {"type": "point", "on": "pointerover", "nearest": True},
            }
        ],
    }
    return _spec(rows, [line, points], CHART_HEIGHT)


def horizontal_bars(
    rows: Rows,
    *,
    label: str,
    value: str,
    value_title: str,
    tooltip: list[Spec],
    color: Spec | None = None,
    value_format: str = "~s",  # the axis's; tooltips format their own fields
    extent: tuple[str, str] | None = None,
    marker: str | None = None,
) -> Spec:
    """One bar per row (``label`` on the y axis, in row order) of ``value``; optionally
    a rule from ``extent``'s low to high field and a tick at ``marker`` (a maximum)."""
    order = [r[label] for r in rows]
    y = {"field": label, "type": "nominal", "sort": order, "title": None}
    x = {
        "field": value,
        "type": "quantitative",
        "title": value_title,
        "axis": {"format": value_format},
    }
    bar: Spec = {
        "name": MARKS,
        "mark": {"type": "bar", "height": {"band": 0.7}},
        "encoding": {"y": y, "x": x, "tooltip": tooltip},
    }
    bar["encoding"]["color"] = color or {"value": PALETTE[0]}
    layers = [bar]
    if extent is not None:
        low, high = extent
        layers.append(
            {
                "mark": {"type": "rule", "color": "#334155"},
                "encoding": {
                    "y": y,
                    "x": {"field": low, "type": "quantitative"},
                    "x2": {"field": high},
                    "tooltip": tooltip,
                },
            }
        )
    if marker is not None:
        layers.append(
            {
                "mark": {"type": "tick", "color": "#334155", "thickness": 2},
                "encoding": {
                    "y": y,
                    "x": {"field": marker, "type": "quantitative"},
                    "tooltip": tooltip,
                },
            }
        )
    return _spec(rows, layers, max(len(order), 1) * BAR_STEP)


def bar_chart(
    key: str, title: str, caption: str, rows: Rows, *, wide: bool = False, **bars: Any
) -> Chart:
    """A ``Chart`` of ``horizontal_bars(rows, **bars)``: one bar (one mark) per row."""
    return Chart(key, title, caption, horizontal_bars(rows, **bars), len(rows), wide)


def ticks_per_group(
    rows: Rows, *, group: str, value: str, value_title: str, tooltip: list[Spec]
) -> Spec:
    """A row per ``group`` (in row order), one tick per row at ``value``, coloured by
    how far it is from its group's mean (``vs_mean``: 1 is the mean)."""
    order = list(dict.fromkeys(r[group] for r in rows))
    tick = {
        "name": MARKS,
        "mark": {"type": "tick", "thickness": 3, "bandSize": 18},
        "encoding": {
            "y": {"field": group, "type": "nominal", "sort": order, "title": None},
            "x": {
                "field": value,
                "type": "quantitative",
                "title": value_title,
                "axis": {"format": "~s"},
            },
            "color": {
                "field": "vs_mean",
                "type": "quantitative",
                "title": "× topic mean",
                # below the mean blue, about it grey, above it orange: all visible on white
                "scale": {
                    "domain": [0.5, 1, 1.5],
                    "range": ["#1f6fb4", "#8795a5", "#e8590c"],
                    "clamp": True,
                },
            },
            "tooltip": tooltip,
        },
    }
    return _spec(rows, [tick], max(len(order), 1) * (BAR_STEP + 10))


def epoch_timeline(rows: Rows) -> Spec:
    """One row per partition, a bar per leader epoch over the offsets written in it
    (``start_offset`` to ``end_offset``): offsets, not time, since a leader can change
    many times a minute; the tooltip says when. The shade says the epoch."""
    order = list(dict.fromkeys(r["partition"] for r in rows))
    epochs = len({r["epoch"] for r in rows})
    # a legend entry per epoch while they are few; a gradient past that
    kind = "ordinal" if epochs <= EPOCH_SWATCHES else "quantitative"
    color = {
        "field": "epoch",
        "type": kind,
        "title": "leader epoch",
        "scale": {"scheme": "viridis"},
        "legend": {"format": "d"},
    }
    tooltip = [
        {"field": "partition", "type": "nominal", "title": "partition"},
        {"field": "epoch", "type": "quantitative", "title": "leader epoch"},
        {"field": "start_offset", "type": "quantitative", "title": "from offset", "format": ","},
        {"field": "last_offset", "type": "quantitative", "title": "to offset", "format": ","},
        {"field": "batches", "type": "quantitative", "title": "batches", "format": ","},
        {"field": "t", "type": "temporal", "title": "first batch", "formatType": "utc",
         "format": "%Y-%m-%d %H:%M UTC"},
        {"field": "t_last", "type": "temporal", "title": "last batch", "formatType": "utc",
         "format": "%Y-%m-%d %H:%M UTC"},
    ]  # fmt: skip
    bar = {
        "name": MARKS,
        "mark": {"type": "bar", "height": {"band": 0.7}, "stroke": "white", "strokeWidth": 1},
        "encoding": {
            "y": {"field": "partition", "type": "nominal", "sort": order, "title": None},
            "x": {"field": "start_offset", "type": "quantitative", "title": "offset",
                  "axis": {"format": "~s"}},
            "x2": {"field": "end_offset"},
            "color": color,
            "tooltip": tooltip,
        },
    }  # fmt: skip
    return _spec(rows, [bar], max(len(order), 1) * (BAR_STEP + 4))

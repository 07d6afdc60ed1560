"""report.html from report tables (analytics.html_report and the figures it draws): its
size, what comes first, that every chart's Vega-Lite spec renders, and that names from
the data stay text. The browser's view of a real cluster's page is
tests/integration/test_report_html.py."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
import vl_convert

from minibroker.analytics.batch_figures import batch_charts, epoch_chart, producer_charts
from minibroker.analytics.charts import MARKS_CLASS
from minibroker.analytics.figures import (
    chosen_replicas,
    key_charts,
    skew_charts,
    traffic_charts,
)
from minibroker.analytics.html_report import render_report
from tests.support.report_tables import Tables, cluster_tables

pytestmark = pytest.mark.timeout(120)

MAX_REPORT_BYTES = 2 * 1024 * 1024  # the bound for 1,000 partitions


def _render(tables: Tables) -> str:
    return render_report(
        tables, ["/data/broker-1/logs"], now=lambda: datetime(2026, 1, 1, tzinfo=UTC)
    )


def _charts(tables: Tables) -> list:
    replicas = chosen_replicas(tables)
    return [
        *traffic_charts(tables),
        *skew_charts(tables, replicas),
        *key_charts(tables),
        *batch_charts(tables, replicas),
        *producer_charts(tables),
        epoch_chart(tables, replicas),
    ]


def test_the_report_of_1000_partitions_on_3_brokers_stays_under_2_mib() -> None:
    tables = cluster_tables(topics=10, partitions=100, replicas=3, damaged=True)

    page = _render(tables).encode("utf-8")

    assert len(tables["partitions"]) == 3000
    assert len(page) < MAX_REPORT_BYTES, len(page)
    assert page.count(b'class="chart') == len([c for c in _charts(tables) if c])


def test_every_chart_renders_offline_and_draws_its_named_marks() -> None:
    tables = cluster_tables(topics=3, partitions=4, damaged=True)
    tables["producers"][0].update(transactional_batches=4, committed=2, aborted=1,
                                  open_transactions=1)  # fmt: skip
    charts = [c for c in _charts(tables) if c]

    assert len({c.key for c in charts}) == len(charts) == 13 + 1  # and transactions
    for chart in charts:
        svg = vl_convert.vegalite_to_svg(chart.spec)
        assert MARKS_CLASS in svg, chart.key
        assert chart.marks > 0


def test_corruption_and_diverging_replicas_come_first_and_say_where() -> None:
    damaged = _render(cluster_tables(topics=2, partitions=2, damaged=True))
    healthy = _render(cluster_tables(topics=2, partitions=2))

    assert damaged.index('id="integrity"') < damaged.index('id="traffic"')
    section = damaged[damaged.index('id="integrity"') : damaged.index('id="traffic"')]
    assert "/data/broker-2/logs/topic-000-1/00000000000000000000.log" in section
    assert ">4,242<" in section and "first diverging offset" in section
    assert healthy.index('id="epochs"') < healthy.index('id="integrity"')
    assert "No corrupt bytes" in healthy


def test_names_from_the_data_stay_text_in_tables_and_charts() -> None:
    tables = cluster_tables(topics=1, partitions=2, damaged=True)
    hostile = "</script><b>x</b>"
    tables["top_keys"][0]["key"] = hostile.encode()
    tables["corruption"][0]["reason"] = hostile

    page = _render(tables)

    assert hostile not in page
    assert len(re.findall(r"<script", page)) == page.count("</script>")
    assert "&lt;/script&gt;&lt;b&gt;x&lt;/b&gt;" in page  # the table cell, as text


def test_transactions_are_drawn_once_a_producer_has_any() -> None:
    tables = cluster_tables(topics=1, partitions=2)
    assert "transactions" not in {c.key for c in producer_charts(tables)}
    assert "No transactional batches" in _render(tables)

    tables["producers"][1].update(transactional_batches=3, committed=1, open_transactions=1)
    (chart,) = [c for c in producer_charts(tables) if c.key == "transactions"]

    assert chart.marks == 2  # committed and open; no aborts, so no bar for them

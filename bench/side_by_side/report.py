"""What bench/vs_kafka.py reports: each workload's unit and which way is better, the
per-run JSON lines gathered into medians and ranges, the table, and the summary object
its last line carries."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

SYSTEMS = ("minibroker", "kafka")


@dataclass(frozen=True)
class Workload:
    unit: str
    higher_is_better: bool
    what: str


def _throughput(unit: str, what: str) -> Workload:
    return Workload(unit, True, what)


def _cost(unit: str, what: str) -> Workload:
    return Workload(unit, False, what)


WORKLOADS: dict[str, Workload] = {
    "produce_100b_acks1": _throughput("records/s", "confluent-kafka, 1 broker, 100 B, acks=1"),
    "produce_100b_acksall": _throughput("records/s", "confluent-kafka, 1 broker, 100 B, all"),
    "produce_1kib_acks1": _throughput("MB/s", "confluent-kafka, 1 broker, 1 KiB, acks=1"),
    "produce_1kib_acksall": _throughput("MB/s", "confluent-kafka, 1 broker, 1 KiB, acks=all"),
    "consume_1kib": _throughput("MB/s", "confluent-kafka, 1 broker, 1 KiB from the start"),
    "produce_100b_rf3_acksall": _throughput("records/s", "confluent-kafka, RF 3, 100 B, all"),
    "produce_1kib_rf3_acks1": _throughput("MB/s", "confluent-kafka, RF 3, 1 KiB, acks=1"),
    "produce_1kib_rf3_acksall": _throughput("MB/s", "confluent-kafka, RF 3, 1 KiB, acks=all"),
    "many_partitions_create_s": _cost("s", "1 broker: a topic of 1,000 partitions created"),
    "produce_100b_many_partitions": _throughput("records/s", "100 B over 1,000 partitions"),
    "produce_1kib_idle_connections": _throughput("MB/s", "1 KiB acks=1, 1,000 idle conns"),
    "rss_mb_idle_connections": _cost("MB", "broker RSS with 1,000 idle connections"),
    "group3_consume_1kib": _throughput("MB/s", "a group of 3 reads 1 KiB (6 partitions)"),
    "group3_settled_s": _cost("s", "a group of 3: subscribe to the last assignment"),
    "e2e_p50_ms_1000rps": _cost("ms", "end to end at 1,000 records/s, p50"),
    "e2e_p99_ms_1000rps": _cost("ms", "end to end at 1,000 records/s, p99"),
    "e2e_p999_ms_1000rps": _cost("ms", "end to end at 1,000 records/s, p99.9"),
    "e2e_p50_ms_20000rps": _cost("ms", "end to end at 20,000 records/s, p50"),
    "e2e_p99_ms_20000rps": _cost("ms", "end to end at 20,000 records/s, p99"),
    "e2e_p999_ms_20000rps": _cost("ms", "end to end at 20,000 records/s, p99.9"),
    "rss_mb_at_rest": _cost("MB", "broker RSS after start"),
    "rss_mb_under_load": _cost("MB", "broker RSS, peak while producing and consuming"),
    "restart_to_serving_s": _cost("s", "kill -9 with the data, restart: a fetch served"),
    "restart_rf3_to_ready_s": _cost("s", "RF 3 follower with the data: restart to ready"),
    "restart_rf3_to_isr_s": _cost("s", "RF 3 follower with the data: restart to in ISR"),
    "java_produce_100b_acks1": _throughput("records/s", "ProducerPerformance, 100 B, acks=1"),
    "java_produce_1kib_acks1": _throughput("MB/s", "ProducerPerformance, 1 KiB, acks=1"),
    "java_produce_1kib_acksall": _throughput("MB/s", "ProducerPerformance, 1 KiB, acks=all"),
    "java_consume_1kib": _throughput("MB/s", "ConsumerPerformance, 1 KiB (fetch.MB.sec)"),
    "java_e2e_p50_ms": _cost("ms", "EndToEndLatency (one at a time), p50"),
    "java_e2e_p99_ms": _cost("ms", "EndToEndLatency (one at a time), p99"),
    "java_produce_1kib_rf3_acksall": _throughput("MB/s", "ProducerPerformance, RF 3, all"),
    "broker_cpu_ms_per_mb_produce_1kib": _cost("ms/MB", "broker CPU per MB, 1 KiB acks=1"),
}
"""Every figure a run may record, in the table's order."""


def summarize(runs: Sequence[Mapping[str, object]]) -> dict[str, dict[str, object]]:
    """Per workload: each system's median, min and max over the runs, and the ratio of
    the medians (minibroker / Kafka)."""
    summary: dict[str, dict[str, object]] = {}
    for name, workload in WORKLOADS.items():
        values: dict[str, list[float]] = {s: [] for s in SYSTEMS}
        for run in runs:
            figures = run["figures"]
            assert isinstance(figures, Mapping)
            if name in figures:
                values[str(run["system"])].append(float(figures[name]))
        if not all(values.values()):
            continue
        medians = {s: statistics.median(v) for s, v in values.items()}
        summary[name] = {
            "minibroker": _rounded(medians["minibroker"]),
            "kafka": _rounded(medians["kafka"]),
            "ratio": _rounded(medians["minibroker"] / medians["kafka"]),
            "unit": workload.unit,
            "better": "higher" if workload.higher_is_better else "lower",
            "range": {s: [_rounded(min(v)), _rounded(max(v))] for s, v in values.items()},
            "runs": len(values["minibroker"]),
        }
    return summary


def table(summary: Mapping[str, Mapping[str, object]]) -> str:
    """A Markdown table: ratio first, then the medians and ranges."""
    lines = [
        "| workload | minibroker / Kafka | better | minibroker: median (min-max) "
        "| Kafka: median (min-max) | unit |",
        "|---|---|---|---|---|---|",
    ]
    for name, row in summary.items():
        ranges = row["range"]
        assert isinstance(ranges, Mapping)
        cells = [
            f"{name}",
            f"{row['ratio']}x",
            str(row["better"]),
            f"{row['minibroker']} ({ranges['minibroker'][0]}-{ranges['minibroker'][1]})",
            f"{row['kafka']} ({ranges['kafka'][0]}-{ranges['kafka'][1]})",
            str(row["unit"]),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _rounded(value: float) -> float:
    """Three significant figures, enough for a figure that swings by 10%."""
    if value == 0:
        return 0.0
    return float(f"{value:.3g}")

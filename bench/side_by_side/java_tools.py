"""Kafka's own perf tools (ProducerPerformance, ConsumerPerformance, EndToEndLatency of
Kafka 3.9, from Maven Central) as the second client of bench/vs_kafka.py.

A phase's tool calls run one after the other in one JVM (tests/support/judges.py's
``run_tools``), so a JVM start is paid once per phase, on neither broker's clock. Each
tool runs with its defaults (the Java producer's linger.ms 0 and 16 KiB batches),
as a user runs the shell scripts; figures are read from the lines the tools print.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tests.support.judges import ToolCall, ToolResult, run_tools

MIB = 1024 * 1024
MB = 1_000_000
TOOLS_TIMEOUT_S = 900.0
_PRODUCED = re.compile(r"records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\)")
_E2E = re.compile(r"50th = (\d+), 99th = (\d+), 99\.9th = (\d+)")


@dataclass(frozen=True)
class JavaProduce:
    workload: str
    topic: str
    count: int
    size: int
    acks: str

    def call(self, bootstrap: str) -> ToolCall:
        return ToolCall(
            self.workload,
            "kafka-producer-perf-test",
            [
                *("--topic", self.topic, "--num-records", str(self.count)),
                *("--record-size", str(self.size), "--throughput", "-1"),
                *("--producer-props", f"bootstrap.servers={bootstrap}", f"acks={self.acks}"),
            ],
        )

    def figures(self, result: ToolResult) -> dict[str, float]:
        found = _PRODUCED.search(_checked(result).stdout)
        if found is None:
            raise RuntimeError(f"{self.workload}: no summary in {result.stdout[-500:]}")
        records, mib = float(found.group(1)), float(found.group(2))
        return {"records_per_s": records, "mb_per_s": mib * MIB / MB}


@dataclass(frozen=True)
class JavaConsume:
    workload: str
    topic: str
    count: int

    def call(self, bootstrap: str) -> ToolCall:
        return ToolCall(
            self.workload,
            "kafka-consumer-perf-test",
            [
                *("--bootstrap-server", bootstrap, "--topic", self.topic),
                *("--messages", str(self.count), "--timeout", "60000"),
                *("--group", f"perf-{self.workload}"),
            ],
        )

    def figures(self, result: ToolResult) -> dict[str, float]:
        """fetch.MB.sec: the consuming time without the group join."""
        lines = [line for line in _checked(result).stdout.splitlines() if line.strip()]
        header = [h.strip() for h in lines[-2].split(",")]
        values = [v.strip() for v in lines[-1].split(",")]
        fetch_mib_per_s = float(values[header.index("fetch.MB.sec")])
        return {"mb_per_s": fetch_mib_per_s * MIB / MB}


@dataclass(frozen=True)
class JavaEndToEnd:
    """EndToEndLatency: one record at a time, each consumed before the next is sent."""

    workload: str
    topic: str
    count: int
    size: int

    def call(self, bootstrap: str) -> ToolCall:
        args = [bootstrap, self.topic, str(self.count), "1", str(self.size)]
        return ToolCall(self.workload, "kafka-e2e-latency", args)

    def figures(self, result: ToolResult) -> dict[str, float]:
        found = _E2E.search(_checked(result).stdout)
        if found is None:
            raise RuntimeError(f"{self.workload}: no percentiles in {result.stdout[-500:]}")
        p50, p99, p999 = (float(g) for g in found.groups())
        return {"p50_ms": p50, "p99_ms": p99, "p999_ms": p999}


JavaTool = JavaProduce | JavaConsume | JavaEndToEnd


def run_java_tools(bootstrap: str, tools: list[JavaTool]) -> dict[str, dict[str, float]]:
    """Each tool's figures by workload name."""
    results = run_tools([t.call(bootstrap) for t in tools], TOOLS_TIMEOUT_S)
    return {t.workload: t.figures(results[t.workload]) for t in tools}


def _checked(result: ToolResult) -> ToolResult:
    if result.exit != 0:
        raise RuntimeError(f"tool exited {result.exit}: {result.stderr[-1000:]}")
    return result

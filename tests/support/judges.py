"""Kafka's own programs as judges of the Kafka listener: the command-line tools and the
Java client, Kafka Streams and Admin programs of ``java/`` (dev.minibroker.judges).

``kafka_classpath()`` compiles ``java/`` with Maven once per test run (the jars come
from Maven Central into ~/.m2; ``scripts/kafka-classpath`` prints the path) and returns
the class path. ``run_tools(calls)`` runs several tool invocations in one JVM through
``ToolRunner`` (a JVM start and Kafka's class loading cost ~2 s; a tool call after that
costs its own work) and returns each call's exit code, stdout and stderr, as an
operator would see them. ``run_java(main, *args)`` runs one of the judge programs and
returns the JSON object it prints last; with ``client4=True`` one of ``java/client4``'s
(one source file each, on Kafka's Java client 4.x: ``kafka4_classpath()``, its jars
resolved by Maven the same way), run by the JVM's source launcher with no build step.

``java_client_config(cluster)`` writes the Java client properties of a ``dev up
--secure`` cluster's admin login (SASL_SSL, SCRAM, the dev CA as a PEM trust store),
which Kafka's tools take with ``--command-config``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.broker_process import ROOT
from tests.support.cluster import LocalCluster

KAFKA_VERSION = "3.9.2"
"""The release java/pom.xml pins: the version every Java judge reports."""

KAFKA4_VERSION = "4.1.1"
"""The Java client java/client4/pom.xml pins (transaction version 2's judge)."""
KAFKA4_POM = ROOT / "java" / "client4" / "pom.xml"

TOOLS = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs": "kafka.admin.ConfigCommand",
    "kafka-console-producer": "kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-acls": "kafka.admin.AclCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-e2e-latency": "org.apache.kafka.tools.EndToEndLatency",
}
"""Each script of Kafka's bin/ the judges run, by the class it runs (Kafka 3.9)."""

BUILD_TIMEOUT_S = 900  # a first build downloads Kafka's jars and Maven's plugins
JAVA_TIMEOUT_S = 240


@functools.cache
def kafka_classpath() -> str:
    """Compile java/ (incremental: a no-op when nothing changed) and return the path."""
    subprocess.run(
        ["mvn", "-q", "-B", "-f", str(ROOT / "java" / "pom.xml"), "compile"],
        check=True,
        timeout=BUILD_TIMEOUT_S,
        capture_output=True,
    )
    done = subprocess.run(
        [str(ROOT / "scripts" / "kafka-classpath")],
        check=True,
        timeout=BUILD_TIMEOUT_S,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip()


@functools.cache
def kafka4_classpath() -> str:
    """The jars of java/client4 (Kafka's Java client 4.x), resolved by Maven into ~/.m2
    on first use and their path cached in ~/.cache/minibroker/ per pom checksum."""
    key = hashlib.sha256(KAFKA4_POM.read_bytes()).hexdigest()[:16]
    cached = Path.home() / ".cache" / "minibroker" / f"kafka4-classpath-{key}.txt"
    if not cached.exists():
        cached.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                *("mvn", "-q", "-B", "-f", str(KAFKA4_POM), "dependency:build-classpath"),
                f"-Dmdep.outputFile={cached}",
            ],
            check=True,
            timeout=BUILD_TIMEOUT_S,
            capture_output=True,
        )
    return cached.read_text().strip()


@dataclass(frozen=True)
class ToolCall:
    name: str
    """What the test calls this invocation (the key of its result)."""
    tool: str
    """A script name of Kafka's bin/ (a key of TOOLS)."""
    args: list[str]
    stdin: str = ""


@dataclass(frozen=True)
class ToolResult:
    exit: int
    stdout: str
    stderr: str
    millis: int

    @property
    def lines(self) -> list[str]:
        return self.stdout.splitlines()


@dataclass
class ToolSession:
    """Tool calls against one bootstrap: each gets ``--bootstrap-server`` first."""

    bootstrap: str
    command_config: Path | None = None
    calls: list[ToolCall] = field(default_factory=list)

    def add(self, name: str, tool: str, *args: str, stdin: str = "") -> None:
        argv = list(args)
        if tool not in BOOTSTRAP_IN_PROPERTIES:
            argv = ["--bootstrap-server", self.bootstrap, *argv]
        if self.command_config is not None:
            argv += [CONFIG_FLAGS.get(tool, "--command-config"), str(self.command_config)]
        self.calls.append(ToolCall(name, tool, argv, stdin))

    def create_topic(self, name: str, partitions: int, *args: str) -> None:
        """kafka-topics --create of ``name`` (replication factor 3 unless ``args`` give
        a replica assignment), as the call named ``name``."""
        if "--replica-assignment" not in args:
            args = ("--replication-factor", "3", *args)
            args = ("--partitions", str(partitions), *args)
        self.add(name, "kafka-topics", "--create", "--topic", name, *args)

    def run(self, timeout: float = JAVA_TIMEOUT_S) -> dict[str, ToolResult]:
        calls, self.calls = self.calls, []
        return run_tools(calls, timeout)


CONFIG_FLAGS = {
    "kafka-console-producer": "--producer.config",
    "kafka-console-consumer": "--consumer.config",
    "kafka-producer-perf-test": "--producer.config",
    "kafka-consumer-perf-test": "--consumer.config",
}
"""The tools whose client-properties flag is not ``--command-config``."""

BOOTSTRAP_IN_PROPERTIES = {"kafka-producer-perf-test"}
"""Tools without ``--bootstrap-server``: the test names it among their properties."""


def run_tools(calls: list[ToolCall], timeout: float = JAVA_TIMEOUT_S) -> dict[str, ToolResult]:
    """Run ``calls`` in order in one JVM; the results by call name."""
    with tempfile.TemporaryDirectory(prefix="tool-runner-") as tmp:
        calls_file = Path(tmp) / "calls.json"
        results_file = Path(tmp) / "results.json"
        calls_file.write_text(
            json.dumps(
                [
                    {"name": c.name, "class": TOOLS[c.tool], "args": c.args, "stdin": c.stdin}
                    for c in calls
                ]
            )
        )
        done = subprocess.run(
            [
                *("java", "-cp", kafka_classpath(), "dev.minibroker.judges.ToolRunner"),
                *(str(calls_file), str(results_file)),
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        results = json.loads(results_file.read_text())
    return {
        r["name"]: ToolResult(r["exit"], r["stdout"], r["stderr"], r["millis"]) for r in results
    }


def run_java(
    main: str, *args: str, timeout: float = JAVA_TIMEOUT_S, client4: bool = False
) -> dict[str, Any]:
    """Run ``dev.minibroker.judges.<main>`` (``client4``: java/client4's
    ``dev.minibroker.judges4.<main>`` on the Java client 4.x); the JSON object it
    printed last."""
    if client4:  # one source file, run by the JVM's source launcher: no Maven build
        source = KAFKA4_POM.parent / "src" / "main" / "java" / "dev" / "minibroker"
        command = ["java", "-cp", kafka4_classpath(), str(source / "judges4" / f"{main}.java")]
    else:
        command = ["java", "-cp", kafka_classpath(), f"dev.minibroker.judges.{main}"]
    done = subprocess.run(
        [*command, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def java_client_config(
    cluster: LocalCluster, username: str | None = None, password: str | None = None
) -> Path:
    """The admin login of a secure dev cluster (or ``username``'s) as Java client
    properties."""
    props = cluster.client_properties
    username = username or props["sasl.username"]
    password = password or props["sasl.password"]
    path = cluster.data_dir / f"java-client-{username}.properties"
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required"
        f' username="{username}" password="{password}";'
    )
    path.write_text(
        "\n".join(
            [
                f"security.protocol={props['security.protocol']}",
                f"sasl.mechanism={props['sasl.mechanism']}",
                f"sasl.jaas.config={jaas}",
                "ssl.truststore.type=PEM",
                f"ssl.truststore.location={props['ssl.ca.location']}",
                "",
            ]
        )
    )
    return path

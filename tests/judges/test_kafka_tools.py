"""Kafka's command-line tools (3.9.2, from Maven Central) against a 3-broker cluster's
Kafka listener, each asserted on the output an operator reads: kafka-topics,
kafka-configs, kafka-console-producer and -consumer, kafka-consumer-groups,
kafka-reassign-partitions, kafka-log-dirs and the two perf tests. Several calls share
one JVM (tests/support/judges.py's ToolRunner).

kafka-topics --alter --partitions grows a topic (CreatePartitions), kafka-delete-records
trims one (DeleteRecords); kafka-transactions has its own file
(test_kafka_transactions_tool.py).
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from tests.support.cluster import LocalCluster
from tests.support.judges import KAFKA_VERSION, ToolResult, ToolSession

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]

TOOLS = f"Kafka tools {KAFKA_VERSION}"


def ok(result: ToolResult) -> ToolResult:
    assert result.exit == 0, (result.stdout[-2000:], result.stderr[-2000:])
    return result


def describe_lines(result: ToolResult) -> dict[int, dict[str, str]]:
    """kafka-topics --describe's partition lines, by partition: {"Leader": ..., ...}."""
    found = {}
    for line in result.lines:
        fields = dict(re.findall(r"(\w+): ([^\t]*)", line))
        if "Partition" in fields:
            found[int(fields["Partition"])] = fields
    return found


@pytest.mark.judge(
    TOOLS, "kafka-topics --create/--list/--describe/--delete, kafka-configs --describe"
)
def test_kafka_topics_and_kafka_configs_create_describe_and_delete_topics(
    cluster: LocalCluster,
) -> None:
    tools = ToolSession(cluster.kafka_bootstrap)
    tools.create_topic("tools-topic", 3, "--config", "retention.ms=86400000")
    tools.add("list", "kafka-topics", "--list")
    tools.add("describe", "kafka-topics", "--describe", "--topic", "tools-topic")
    tools.add(
        "configs",
        "kafka-configs",
        "--describe",
        "--entity-type",
        "topics",
        "--entity-name",
        "tools-topic",
    )
    tools.add(
        "broker-configs",
        "kafka-configs",
        "--describe",
        "--entity-type",
        "brokers",
        "--entity-name",
        "1",
    )
    tools.add("under-replicated", "kafka-topics", "--describe", "--under-replicated-partitions")
    tools.add("delete", "kafka-topics", "--delete", "--topic", "tools-topic")
    results = tools.run()

    assert ok(results["tools-topic"]).lines == ["Created topic tools-topic."]
    assert "tools-topic" in ok(results["list"]).lines
    described = ok(results["describe"])
    assert described.lines[0].startswith("Topic: tools-topic\t")
    assert (
        "PartitionCount: 3\tReplicationFactor: 3\tConfigs: retention.ms=86400000"
        in (described.lines[0])
    )
    partitions = describe_lines(described)
    assert sorted(partitions) == [0, 1, 2]
    for fields in partitions.values():
        replicas = fields["Replicas"].split(",")
        assert sorted(replicas) == ["1", "2", "3"]
        assert sorted(fields["Isr"].split(",")) == ["1", "2", "3"]
        assert fields["Leader"] in replicas
    assert ok(results["configs"]).lines[0] == "Dynamic configs for topic tools-topic are:"
    assert any(
        line.strip().startswith("retention.ms=86400000 sensitive=false")
        for line in results["configs"].lines
    )
    assert ok(results["broker-configs"]).lines[0].startswith("Dynamic configs for broker 1 are:")
    assert ok(results["under-replicated"]).stdout == ""
    ok(results["delete"])

    tools.add("list-again", "kafka-topics", "--list")
    deadline = time.monotonic() + 60
    while "tools-topic" in ok(tools.run()["list-again"]).lines:
        assert time.monotonic() < deadline, "tools-topic was never deleted"
        tools.add("list-again", "kafka-topics", "--list")


@pytest.mark.judge(TOOLS, "kafka-topics --alter --partitions (CreatePartitions)")
def test_kafka_topics_alter_adds_partitions_and_refuses_to_shrink(cluster: LocalCluster) -> None:
    tools = ToolSession(cluster.kafka_bootstrap)
    tools.create_topic("tools-grown", 2)
    tools.add("grow", "kafka-topics", "--alter", "--topic", "tools-grown", "--partitions", "5")
    tools.add("describe", "kafka-topics", "--describe", "--topic", "tools-grown")
    tools.add("shrink", "kafka-topics", "--alter", "--topic", "tools-grown", "--partitions", "3")
    results = tools.run()

    ok(results["tools-grown"])
    ok(results["grow"])
    described = ok(results["describe"])
    assert "PartitionCount: 5\tReplicationFactor: 3" in described.lines[0]
    partitions = describe_lines(described)
    assert sorted(partitions) == [0, 1, 2, 3, 4]
    for fields in partitions.values():
        assert sorted(fields["Replicas"].split(",")) == ["1", "2", "3"]
        assert fields["Leader"] in fields["Replicas"].split(",")
    shrink = results["shrink"]
    assert shrink.exit != 0
    assert "InvalidPartitionsException" in shrink.stdout + shrink.stderr


@pytest.mark.judge(TOOLS, "kafka-delete-records --offset-json-file (DeleteRecords)")
def test_kafka_delete_records_moves_the_log_start_that_consumers_then_begin_at(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    tools = ToolSession(cluster.kafka_bootstrap)
    tools.create_topic("tools-trimmed", 1)
    lines = "".join(f"value {i}\n" for i in range(10))
    tools.add("produce", "kafka-console-producer", "--topic", "tools-trimmed", stdin=lines)
    plan = tmp_path / "delete.json"
    plan.write_text(
        json.dumps(
            {"version": 1, "partitions": [{"topic": "tools-trimmed", "partition": 0, "offset": 6}]}
        )
    )
    tools.add("delete", "kafka-delete-records", "--offset-json-file", str(plan))
    tools.add(
        "consume",
        "kafka-console-consumer",
        *("--topic", "tools-trimmed", "--from-beginning", "--max-messages", "4"),
        *("--timeout-ms", "60000", "--property", "print.offset=true"),
    )
    results = tools.run()

    ok(results["tools-trimmed"])
    ok(results["produce"])
    deleted = ok(results["delete"])
    assert "partition: tools-trimmed-0\tlow_watermark: 6" in deleted.lines
    assert ok(results["consume"]).lines == [f"Offset:{i}\tvalue {i}" for i in range(6, 10)]


@pytest.mark.judge(TOOLS, "kafka-configs --alter/--describe of a broker's dynamic config")
def test_kafka_configs_alters_a_brokers_dynamic_config_and_describes_it(
    cluster: LocalCluster,
) -> None:
    """kafka-configs alters brokers and topics through IncrementalAlterConfigs."""
    tools = ToolSession(cluster.kafka_bootstrap)
    tools.create_topic("configs-topic", 1)
    topic = ("--entity-type", "topics", "--entity-name", "configs-topic")
    tools.add("alter-topic", "kafka-configs", "--alter", *topic, "--add-config", "segment.ms=99000")
    tools.add("describe-topic", "kafka-configs", "--describe", *topic)
    tools.add(
        "alter-default",
        "kafka-configs",
        *("--alter", "--entity-type", "brokers", "--entity-default"),
        *("--add-config", "log.cleaner.delete.retention.ms=3600000"),
    )
    tools.add(
        "describe-default",
        "kafka-configs",
        *("--describe", "--entity-type", "brokers", "--entity-default"),
    )
    broker = ("--entity-type", "brokers", "--entity-name", "2")
    tools.add(
        "alter",
        "kafka-configs",
        *("--alter", *broker, "--add-config", "leader.replication.throttled.rate=1000000"),
    )
    tools.add("describe", "kafka-configs", "--describe", *broker)
    tools.add(
        "delete",
        "kafka-configs",
        *("--alter", *broker, "--delete-config", "leader.replication.throttled.rate"),
    )
    tools.add("describe-after", "kafka-configs", "--describe", *broker)
    results = tools.run()
    assert ok(results["alter"]).lines == ["Completed updating config for broker 2."]
    described = ok(results["describe"]).lines
    assert described[0] == "Dynamic configs for broker 2 are:"
    assert [line.split()[0] for line in described[1:]] == [
        "leader.replication.throttled.rate=1000000"
    ]
    ok(results["delete"])
    assert ok(results["describe-after"]).lines == ["Dynamic configs for broker 2 are:"]
    assert ok(results["alter-topic"]).lines == [
        "Completed updating config for topic configs-topic."
    ]
    assert any(
        line.strip().startswith("segment.ms=99000 sensitive=false")
        for line in ok(results["describe-topic"]).lines
    )
    ok(results["alter-default"])
    assert any(
        line.strip().startswith("log.cleaner.delete.retention.ms=3600000")
        for line in ok(results["describe-default"]).lines
    )


@pytest.mark.judge(
    TOOLS,
    "kafka-console-producer (keys, headers) then kafka-console-consumer --group;"
    " kafka-consumer-groups --list/--describe/--reset-offsets/--delete",
)
def test_console_tools_round_trip_keys_and_headers_and_consumer_groups_manage_the_group(
    cluster: LocalCluster,
) -> None:
    tools = ToolSession(cluster.kafka_bootstrap)
    tools.create_topic("console", 1)
    lines = "".join(f"origin:tools,n:{i}\tkey-{i}:value {i}\n" for i in range(20))
    tools.add(
        "produce",
        "kafka-console-producer",
        *("--topic", "console", "--property", "parse.key=true", "--property", "key.separator=:"),
        *("--property", "parse.headers=true", "--producer-property", "acks=all"),
        stdin=lines,
    )
    tools.add(
        "consume",
        "kafka-console-consumer",
        *("--topic", "console", "--group", "console-readers", "--from-beginning"),
        *("--max-messages", "20", "--timeout-ms", "60000"),
        *("--property", "print.key=true", "--property", "print.headers=true"),
        *("--property", "print.offset=true"),
    )
    tools.add("list-groups", "kafka-consumer-groups", "--list")
    tools.add("describe-group", "kafka-consumer-groups", "--describe", "--group", "console-readers")
    tools.add(
        "reset",
        "kafka-consumer-groups",
        *("--reset-offsets", "--group", "console-readers", "--topic", "console"),
        *("--to-offset", "5", "--execute"),
    )
    tools.add("describe-reset", "kafka-consumer-groups", "--describe", "--group", "console-readers")
    tools.add("delete-group", "kafka-consumer-groups", "--delete", "--group", "console-readers")
    tools.add("list-after", "kafka-consumer-groups", "--list")
    results = tools.run()

    ok(results["console"])
    ok(results["produce"])
    consumed = ok(results["consume"])
    assert consumed.lines == [
        f"Offset:{i}\torigin:tools,n:{i}\tkey-{i}\tvalue {i}" for i in range(20)
    ]
    assert "Processed a total of 20 messages" in consumed.stderr
    assert "console-readers" in ok(results["list-groups"]).lines

    def group_rows(result: ToolResult) -> list[list[str]]:
        rows = [line.split() for line in ok(result).lines if line.strip()]
        header = next(i for i, row in enumerate(rows) if row[:2] == ["GROUP", "TOPIC"])
        assert rows[header][:6] == [
            "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"
        ]  # fmt: skip
        return rows[header + 1 :]

    assert [row[:6] for row in group_rows(results["describe-group"])] == [
        ["console-readers", "console", "0", "20", "20", "0"]
    ]
    # Kafka 3.9 prints the table's header and first row on one line.
    assert ok(results["reset"]).stdout.split() == [
        "GROUP", "TOPIC", "PARTITION", "NEW-OFFSET", "console-readers", "console", "0", "5"
    ]  # fmt: skip
    assert [row[:6] for row in group_rows(results["describe-reset"])] == [
        ["console-readers", "console", "0", "5", "20", "15"]
    ]
    assert ok(results["delete-group"]).lines[-1] == (
        "Deletion of requested consumer groups ('console-readers') was successful."
    )
    assert "console-readers" not in ok(results["list-after"]).lines


@pytest.mark.judge(
    TOOLS, "kafka-reassign-partitions --generate/--execute/--verify (with log dirs), kafka-log-dirs"
)
def test_reassign_partitions_moves_replicas_and_log_dirs_describes_them(
    cluster: LocalCluster,
) -> None:
    tools = ToolSession(cluster.kafka_bootstrap)
    tools.create_topic("moved", 2, "--replica-assignment", "1:2,2:3")
    tools.add(
        "produce",
        "kafka-console-producer",
        "--topic",
        *("moved", "--property", "parse.key=true", "--property", "key.separator=:"),
        stdin="".join(f"k{i}:record {i}\n" for i in range(50)),  # keys: both partitions
    )
    topics_file = cluster.data_dir / "topics-to-move.json"
    topics_file.write_text(json.dumps({"version": 1, "topics": [{"topic": "moved"}]}))
    tools.add(
        "generate",
        "kafka-reassign-partitions",
        *("--generate", "--topics-to-move-json-file", str(topics_file)),
        *("--broker-list", "1,2,3"),
    )
    tools.add("log-dirs-before", "kafka-log-dirs", "--describe", "--broker-list", "1,2,3")
    results = tools.run()
    ok(results["moved"])
    ok(results["produce"])
    generated = ok(results["generate"]).lines
    current = json.loads(generated[generated.index("Current partition replica assignment") + 1])
    assert sorted((p["partition"], p["replicas"]) for p in current["partitions"]) == [
        (0, [1, 2]),
        (1, [2, 3]),
    ]
    proposed = json.loads(
        generated[generated.index("Proposed partition reassignment configuration") + 1]
    )
    assert {p["partition"] for p in proposed["partitions"]} == {0, 1}

    before = json.loads(ok(results["log-dirs-before"]).lines[-1])
    log_dir_of = {
        broker["broker"]: log_dir["logDir"]
        for broker in before["brokers"]
        for log_dir in broker["logDirs"]
    }
    # Our own plan: partition 0 from brokers 1,2 to 3,1 with explicit log dirs.
    plan = cluster.data_dir / "plan.json"
    plan.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [
                    {
                        "topic": "moved",
                        "partition": 0,
                        "replicas": [3, 1],
                        "log_dirs": [log_dir_of[3], log_dir_of[1]],
                    }
                ],
            }
        )
    )
    tools.add(
        "execute", "kafka-reassign-partitions", "--execute", "--reassignment-json-file", str(plan)
    )
    executed = ok(tools.run()["execute"])
    assert "Successfully started partition reassignment for moved-0" in executed.stdout

    deadline = time.monotonic() + 120
    while True:
        # --preserve-throttles: clearing them is an IncrementalAlterConfigs (issue 33).
        tools.add(
            "verify",
            "kafka-reassign-partitions",
            *("--verify", "--reassignment-json-file", str(plan), "--preserve-throttles"),
        )
        verified = ok(tools.run()["verify"])
        if "Reassignment of partition moved-0 is completed." in verified.lines:
            assert "Reassignment of replica moved-0-3 completed successfully." in verified.lines
            assert "Reassignment of replica moved-0-1 completed successfully." in verified.lines
            break
        assert "Reassignment of partition moved-0 is still in progress." in verified.lines
        assert time.monotonic() < deadline, verified.stdout
        time.sleep(1)

    tools.add("describe", "kafka-topics", "--describe", "--topic", "moved")
    tools.add("log-dirs-after", "kafka-log-dirs", "--describe", "--broker-list", "1,2,3")
    tools.add(
        "consume",
        "kafka-console-consumer",
        *("--topic", "moved", "--partition", "0", "--offset", "earliest"),
        *("--max-messages", "1", "--timeout-ms", "30000"),
    )
    results = tools.run()
    assert describe_lines(ok(results["describe"]))[0]["Replicas"] == "3,1"
    after = json.loads(ok(results["log-dirs-after"]).lines[-1])
    hosting = {
        broker["broker"]
        for broker in after["brokers"]
        for log_dir in broker["logDirs"]
        for partition in log_dir["partitions"]
        if partition["partition"] == "moved-0"
    }
    assert hosting == {1, 3}
    sizes = [
        partition["size"]
        for broker in after["brokers"]
        for log_dir in broker["logDirs"]
        for partition in log_dir["partitions"]
        if partition["partition"].startswith("moved-")
    ]
    assert len(sizes) == 4 and all(size > 0 for size in sizes)  # 2 partitions x 2 replicas
    assert ok(results["consume"]).stdout.count("record") == 1


@pytest.mark.judge(TOOLS, "kafka-producer-perf-test and kafka-consumer-perf-test")
def test_perf_tools_send_and_read_every_record(cluster: LocalCluster) -> None:
    tools = ToolSession(cluster.kafka_bootstrap)
    tools.create_topic("perf", 3)
    tools.add(
        "produce",
        "kafka-producer-perf-test",
        *("--topic", "perf", "--num-records", "20000", "--record-size", "100"),
        *("--throughput", "-1", "--producer-props", f"bootstrap.servers={cluster.kafka_bootstrap}"),
        "acks=all",
    )
    results = tools.run()
    ok(results["perf"])
    summary = ok(results["produce"]).lines[-1]
    assert re.match(r"20000 records sent, [\d.]+ records/sec", summary), summary

    tools.add(
        "consume",
        "kafka-consumer-perf-test",
        *("--topic", "perf", "--messages", "20000", "--timeout", "60000", "--show-detailed-stats"),
    )
    tools.add(
        "consume-summary",
        "kafka-consumer-perf-test",
        *("--topic", "perf", "--messages", "20000", "--timeout", "60000", "--group", "perf-2"),
    )
    results = tools.run()
    ok(results["consume"])
    header, values = ok(results["consume-summary"]).lines[-2:]
    row = dict(zip(header.split(", "), values.split(", "), strict=True))
    assert row["data.consumed.in.nMsg"] == "20000"
    assert float(row["data.consumed.in.MB"]) == pytest.approx(20000 * 100 / 1024 / 1024, rel=0.01)


@pytest.mark.judge(TOOLS, "kafka-configs client quotas of users and client ids (KIP-546)")
def test_kafka_configs_sets_describes_and_deletes_client_quotas(cluster: LocalCluster) -> None:
    tools = ToolSession(cluster.kafka_bootstrap)
    user = ("--entity-type", "users", "--entity-name", "quota-user")
    default_client = ("--entity-type", "clients", "--entity-default")
    tools.add(
        "alter-user",
        "kafka-configs",
        *("--alter", *user),
        *("--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152"),
    )
    tools.add(
        "alter-default",
        "kafka-configs",
        *("--alter", *default_client, "--add-config", "request_percentage=200"),
    )
    tools.add("describe-user", "kafka-configs", "--describe", *user)
    tools.add("describe-default", "kafka-configs", "--describe", *default_client)
    tools.add(
        "delete-default",
        "kafka-configs",
        *("--alter", *default_client, "--delete-config", "request_percentage"),
    )
    tools.add("describe-after", "kafka-configs", "--describe", *default_client)
    results = tools.run()
    ok(results["alter-user"])
    ok(results["alter-default"])
    described = ok(results["describe-user"]).stdout
    assert "Quota configs for user-principal 'quota-user' are" in described
    assert "producer_byte_rate=1048576.0" in described
    assert "consumer_byte_rate=2097152.0" in described
    assert "request_percentage=200.0" in ok(results["describe-default"]).stdout
    ok(results["delete-default"])
    assert "request_percentage" not in ok(results["describe-after"]).stdout

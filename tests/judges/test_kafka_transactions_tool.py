"""kafka-transactions (Kafka 3.9.2's TransactionsCommand) against a 3-broker cluster with
a committed transaction, an open one and a hanging one, asserted on the tables an
operator reads: ``list``, ``describe``, ``describe-producers``, ``find-hanging`` and
``abort``.

The hanging transaction is the one the tool exists for: transactional records on a
partition whose producer no coordinator knows as in a transaction (written here with a
raw Produce from an idempotent producer id, as a client that lost its coordinator would
leave them). It holds the partition's last stable offset back until ``abort`` writes
the marker.
"""

from __future__ import annotations

import re
import time

import confluent_kafka
import pytest
import trio

from minibroker.protocol.records.encode import encode_batch
from minibroker.protocol.records.types import Record
from tests.support.broker import KafkaWireClient
from tests.support.cluster import LocalCluster
from tests.support.judges import KAFKA_VERSION, ToolResult, ToolSession
from tests.support.transactions import confluent_transactional

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

TOOLS = f"Kafka tools {KAFKA_VERSION}"
INIT_PRODUCER_ID, PRODUCE, METADATA = 22, 0, 3


def ok(result: ToolResult) -> ToolResult:
    assert result.exit == 0, (result.stdout[-2000:], result.stderr[-2000:])
    return result


def table(result: ToolResult) -> list[dict[str, str]]:
    """The tool's table: a header line, then rows padded to the header's columns (a cell
    may be empty)."""
    header, *rows = ok(result).lines
    columns = [(m.group(), m.start()) for m in re.finditer(r"\S+", header)]
    ends = [start for _, start in columns[1:]] + [None]
    return [
        {name: row[start:end].strip() for (name, start), end in zip(columns, ends, strict=True)}
        for row in rows
        if row.strip()
    ]


async def write_hanging_transaction(bootstrap: str, topic: str) -> tuple[int, int]:
    """Two transactional records on ``topic``'s partition 0 from an idempotent producer
    id no coordinator has in a transaction; (producer id, base offset)."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    async with KafkaWireClient(await trio.open_tcp_stream(host, int(port))) as client:
        identity = await client.kafka_request(INIT_PRODUCER_ID, 4, {"transactional_id": None})
        assert identity["error_code"] == 0, identity
        metadata = await client.kafka_request(
            METADATA, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False}
        )
    [described] = metadata["topics"]
    leader = next(p["leader_id"] for p in described["partitions"] if p["partition_index"] == 0)
    broker = next(b for b in metadata["brokers"] if b["node_id"] == leader)
    batch = encode_batch(
        [Record(b"hanging-0"), Record(b"hanging-1")],
        now_ms=int(time.time() * 1000),
        producer_id=identity["producer_id"],
        producer_epoch=identity["producer_epoch"],
        base_sequence=0,
        transactional=True,
    )
    async with KafkaWireClient(
        await trio.open_tcp_stream(broker["host"], broker["port"])
    ) as client:
        produced = await client.kafka_request(
            PRODUCE,
            9,
            {
                "transactional_id": None,
                "acks": -1,
                "timeout_ms": 30_000,
                "topics": [{"name": topic, "partitions": [{"index": 0, "records": batch}]}],
            },
        )
    [answer] = produced["topics"][0]["partitions"]
    assert answer["error_code"] == 0, produced
    return identity["producer_id"], answer["base_offset"]


@pytest.mark.judge(TOOLS, "kafka-transactions list/describe/describe-producers/find-hanging/abort")
def test_kafka_transactions_lists_describes_finds_and_aborts_a_hanging_transaction(
    cluster: LocalCluster,
) -> None:
    setup = ToolSession(cluster.kafka_bootstrap)
    setup.create_topic("txn-tool", 1)
    setup.create_topic("txn-hanging", 1)
    for name, result in setup.run().items():
        assert result.exit == 0, (name, result.stdout, result.stderr)

    committed = confluent_transactional(cluster.kafka_bootstrap, "tool-committed")
    committed.begin_transaction()
    for i in range(3):
        committed.produce("txn-tool", b"committed-%d" % i, partition=0)
    committed.commit_transaction(30)
    opened = confluent_transactional(cluster.kafka_bootstrap, "tool-open")
    try:
        opened.begin_transaction()
        for i in range(2):
            opened.produce("txn-tool", b"open-%d" % i, partition=0)
        assert opened.flush(30) == 0
        hanging_pid, hanging_offset = trio.run(
            write_hanging_transaction, cluster.kafka_bootstrap, "txn-hanging"
        )

        tools = ToolSession(cluster.kafka_bootstrap)
        tools.add("list", "kafka-transactions", "list")
        tools.add("open", "kafka-transactions", "describe", "--transactional-id", "tool-open")
        tools.add(
            "committed", "kafka-transactions", "describe", "--transactional-id", "tool-committed"
        )
        tools.add(
            "producers",
            "kafka-transactions",
            *("describe-producers", "--topic", "txn-tool", "--partition", "0"),
        )
        hanging_search = ("find-hanging", "--topic", "txn-hanging", "--max-transaction-timeout")
        tools.add("hanging", "kafka-transactions", *hanging_search, "0")
        tools.add(
            "not-hanging",
            "kafka-transactions",
            *("find-hanging", "--topic", "txn-tool", "--max-transaction-timeout", "0"),
        )
        tools.add(
            "abort",
            "kafka-transactions",
            *("abort", "--topic", "txn-hanging", "--partition", "0"),
            *("--start-offset", str(hanging_offset)),
        )
        tools.add("after-abort", "kafka-transactions", *hanging_search, "0")
        results = tools.run()

        listed = {row["TransactionalId"]: row for row in table(results["list"])}
        assert listed["tool-committed"]["TransactionState"] == "CompleteCommit", listed
        assert listed["tool-open"]["TransactionState"] == "Ongoing", listed
        [open_row] = table(results["open"])
        assert (open_row["TransactionState"], open_row["TopicPartitions"]) == (
            "Ongoing",
            "txn-tool-0",
        ), open_row
        assert int(open_row["CurrentTransactionStartTimeMs"]) > 0
        [committed_row] = table(results["committed"])
        assert committed_row["TransactionState"] == "CompleteCommit", committed_row
        producers = {row["ProducerId"]: row for row in table(results["producers"])}
        assert producers[open_row["ProducerId"]]["CurrentTransactionStartOffset"] == "4"
        assert producers[open_row["ProducerId"]]["LastSequence"] == "1"
        assert producers[committed_row["ProducerId"]]["CurrentTransactionStartOffset"] == "None"

        [hanging] = table(results["hanging"])
        assert (hanging["Topic"], hanging["Partition"], hanging["ProducerId"]) == (
            "txn-hanging",
            "0",
            str(hanging_pid),
        )
        assert hanging["StartOffset"] == str(hanging_offset)
        assert table(results["not-hanging"]) == []  # the open one's coordinator knows it
        ok(results["abort"])
        assert table(results["after-abort"]) == []
    finally:
        opened.abort_transaction(30)
        del opened, committed  # librdkafka's producers close as they are collected

    # The abort marker freed the partition: a read_committed consumer reaches its end.
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap,
            "group.id": "txn-tool-reader",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    try:
        partition = confluent_kafka.TopicPartition("txn-hanging", 0)
        low, high = consumer.get_watermark_offsets(partition, timeout=30)
        assert (low, high) == (0, hanging_offset + 3)  # two records and the abort marker
    finally:
        consumer.close()

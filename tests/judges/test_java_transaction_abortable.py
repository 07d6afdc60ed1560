"""TRANSACTION_ABORTABLE (KIP-890) judged by Kafka's Java client 3.9 (transaction version
1: it adds partitions itself and sends Produce v11, the first version that knows the
error): its transaction is ended under it (an EndTxn at its own epoch), so its next
record to a partition of that transaction would open one nobody ends. The leader asks
the coordinator, which refuses; the client is told TRANSACTION_ABORTABLE, aborts and
goes on, and nothing of the ended transaction or the refused record is read committed.

(Kafka's Java client 4.x uses transaction version 2 against this broker: its Produce
v12 has the leader add the partition instead, so this refusal cannot reach it, as with
Kafka. librdkafka's Produce v10 gets INVALID_TXN_STATE for the same case:
tests/integration/test_transactions.py.)
"""

from __future__ import annotations

import json
import subprocess

import pytest
import trio

from minibroker.protocol.api import ApiKey
from tests.support import groups
from tests.support.broker import KafkaWireClient
from tests.support.cluster import LocalCluster
from tests.support.judges import JAVA_TIMEOUT_S, KAFKA_VERSION, kafka_classpath
from tests.support.transactions import described_once

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

JAVA_CLIENT = f"Java client {KAFKA_VERSION}"


async def end_under_it(cluster: LocalCluster, ready: dict[str, int], transactional_id: str) -> int:
    """Abort the producer's open transaction at its own epoch (EndTxn v3, as the
    producer itself would); the answer's error code."""
    port = cluster.state["brokers"][str(ready["coordinator"])]["kafka_port"]
    async with KafkaWireClient(await trio.open_tcp_stream("127.0.0.1", port)) as client:
        answer = await client.kafka_request(
            ApiKey.END_TXN,
            3,
            {
                "transactional_id": transactional_id,
                "producer_id": ready["producer_id"],
                "producer_epoch": ready["producer_epoch"],
                "committed": False,
            },
        )
    code: int = answer["error_code"]
    return code


@pytest.mark.judge(JAVA_CLIENT, "a write outside its transaction: TRANSACTION_ABORTABLE, then on")
def test_a_write_outside_the_transaction_is_abortable_and_the_java_producer_goes_on(
    cluster: LocalCluster,
) -> None:
    topic, transactional_id = "java-txn-abortable", "java-txn-abortable"
    trio.run(groups.create_topic, cluster.bootstrap, topic, 1)
    judge = subprocess.Popen(
        [
            *("java", "-cp", kafka_classpath(), "dev.minibroker.judges.TransactionAbortableJudge"),
            *(cluster.kafka_bootstrap, topic, transactional_id),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert judge.stdout is not None and judge.stdin is not None
        ready = json.loads(judge.stdout.readline())
        assert trio.run(end_under_it, cluster, ready, transactional_id) == 0
        described_once(cluster, transactional_id, "CompleteAbort")  # its marker is written
        judge.stdin.write("ended\n")
        judge.stdin.flush()
        out, err = judge.communicate(timeout=JAVA_TIMEOUT_S)
    finally:
        if judge.poll() is None:
            judge.kill()
            judge.wait()
    assert judge.returncode == 0, err[-3000:]
    report = json.loads(out.strip().splitlines()[-1])
    assert max(report["produce_versions"]) == 11, report  # it declares TRANSACTION_ABORTABLE
    assert report["send_error"] == "TransactionAbortableException", report
    assert report["commit_error"] != "none", report  # the transaction could not commit
    assert report["read_committed"] == ["after"], report

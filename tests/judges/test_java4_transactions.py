"""Kafka's Java client 4.x (java/client4) against a 3-broker cluster's Kafka listener with
transaction version 2 (KIP-890 part 2): the broker finalizes ``transaction.version`` 2,
so the 4.x transactional producer lets the leaders add partitions (Produce v12) and the
group coordinator the offsets partition (TxnOffsetCommit v5), and ends each transaction
with EndTxn v5, which bumps its epoch. The judge commits two of every three
transactions, aborts the third, and reads the partitions back read_committed.
"""

from __future__ import annotations

import pytest
import trio

from tests.support import groups
from tests.support.cluster import LocalCluster
from tests.support.judges import KAFKA4_VERSION, run_java

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]

JAVA4_CLIENT = f"Java client {KAFKA4_VERSION}"
TRANSACTIONS = 6


@pytest.mark.judge(JAVA4_CLIENT, "transactional producer: the epoch bumped by every transaction")
def test_java_4_producer_bumps_its_epoch_on_every_transaction_and_reads_only_commits(
    cluster: LocalCluster,
) -> None:
    topic, group = "java4-txn", "java4-txn-group"
    trio.run(groups.create_topic, cluster.bootstrap, topic, 2)
    report = run_java(
        "TransactionsV2Judge",
        cluster.kafka_bootstrap,
        topic,
        group,
        str(TRANSACTIONS),
        client4=True,
    )
    first = report["epochs"][0]
    # one bump per transaction, commit or abort: EndTxn v5 answered each new epoch
    assert report["epochs"] == list(range(first, first + TRANSACTIONS + 1)), report
    assert report["outcomes"] == ["commit", "abort", "commit"] * (TRANSACTIONS // 3)
    # the last marker in both partitions carries the epoch the last end gave
    assert report["marker_epochs"] == [first + TRANSACTIONS] * 2, report
    assert report["committed_records"] == 4 * 2 * 5
    assert report["read_exactly_committed"], report
    assert report["group_offset"] == report["group_offset_expected"] == TRANSACTIONS, report

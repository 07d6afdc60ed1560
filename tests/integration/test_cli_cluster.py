"""The CLI end to end against `minibroker dev up` with 3 brokers.

Create a replicated topic, produce 10,000 keyed records through `minibroker produce`,
read them back with `minibroker consume --format json`: every record comes back once,
in the order it was sent within its partition, on the partition Kafka's murmur2
partitioner chooses for its key. Producing to a new topic creates it (Kafka's
auto.create.topics.enable, on by default); consuming one does not. Then bad input:
unknown topics and existing topics are one line on stderr and exit code 1.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from minibroker.client.partitioner import murmur2, partition_for_key
from tests.support.cluster import LocalCluster

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path_factory.mktemp("cluster")) as running:
        yield running


PROCESS_START_S = 3.0  # a CLI process's Python start-up on a loaded machine
RECORDS = 10_000
# Keys whose murmur2 Kafka's own tests publish: they must land where Java puts them.
KNOWN = {b"21": -973932308, b"foobar": -790332482, b"abc": 479470107}


def test_ten_thousand_keyed_records_round_trip_in_partition_order(
    cluster: LocalCluster,
) -> None:
    created = cluster.cli(
        "topic",
        "create",
        "orders",
        "--partitions",
        "3",
        "--replication-factor",
        "3",
        "--config",
        "min.insync.replicas=2",
    )
    assert created.returncode == 0, created.stderr
    keys = [f"customer-{i % 251}".encode() for i in range(RECORDS - len(KNOWN))] + list(KNOWN)
    lines = b"".join(k + b"\t" + b"order-%d\n" % i for i, k in enumerate(keys))
    produced = cluster.cli(
        "produce", "orders", "--key-separator", "\t", "--acks", "all", stdin=lines, timeout=180
    )
    assert produced.returncode == 0, produced.stderr

    consumed = cluster.cli(
        "consume",
        "orders",
        "--from-beginning",
        "--max-messages",
        str(RECORDS),
        "--timeout-ms",
        "30000",
        "--format",
        "json",
        timeout=180,
    )
    assert consumed.returncode == 0, consumed.stderr
    records = [json.loads(line) for line in consumed.stdout.splitlines()]
    assert len(records) == RECORDS

    sent_by_partition: dict[int, list[str]] = {0: [], 1: [], 2: []}
    for i, key in enumerate(keys):
        sent_by_partition[partition_for_key(key, 3)].append(f"order-{i}")
    got_by_partition: dict[int, list[str]] = {0: [], 1: [], 2: []}
    for r in sorted(records, key=lambda r: (r["partition"], r["offset"])):
        assert r["partition"] == partition_for_key(r["key"].encode(), 3)
        got_by_partition[r["partition"]].append(r["value"])
    assert got_by_partition == sent_by_partition
    for key, java_hash in KNOWN.items():
        assert murmur2(key) == java_hash
        [record] = [r for r in records if r["key"] == key.decode()]
        assert record["partition"] == (java_hash & 0x7FFFFFFF) % 3


def test_describe_shows_leaders_and_full_isr(cluster: LocalCluster) -> None:
    assert cluster.cli("topic", "create", "shown", "-p", "2", "-r", "3").returncode == 0
    described = cluster.cli("topic", "describe", "shown", "--format", "json")
    assert described.returncode == 0, described.stderr
    [topic] = json.loads(described.stdout)
    assert [p["partition"] for p in topic["partitions"]] == [0, 1]
    for p in topic["partitions"]:
        assert p["leader"] in (1, 2, 3)
        assert sorted(p["replicas"]) == [1, 2, 3]
    under = cluster.cli("topic", "describe", "--unavailable-partitions", "--format", "json")
    assert json.loads(under.stdout) == []
    info = cluster.cli("cluster", "info", "--format", "json")
    described_cluster = json.loads(info.stdout)
    assert [b["id"] for b in described_cluster["brokers"]] == [1, 2, 3]
    assert described_cluster["controller_id"] in (1, 2, 3)


def test_producing_to_a_new_topic_creates_it_with_the_broker_defaults(
    cluster: LocalCluster,
) -> None:
    started = time.monotonic()
    produced = cluster.cli("produce", "first-use", stdin=b"hello\n")
    assert produced.returncode == 0, produced.stderr
    assert time.monotonic() - started < 10  # a process start plus one topic creation
    described = cluster.cli("topic", "describe", "first-use", "--format", "json")
    [topic] = json.loads(described.stdout)
    assert [len(p["replicas"]) for p in topic["partitions"]] == [1]  # num.partitions, RF 1
    consumed = cluster.cli(
        "consume", "first-use", "--from-beginning", "--max-messages", "1", "--timeout-ms", "20000"
    )
    assert consumed.stdout == b"hello\n", consumed.stderr


def test_consuming_a_missing_topic_fails_at_once_and_does_not_create_it(
    cluster: LocalCluster,
) -> None:
    started = time.monotonic()
    consumed = cluster.cli("consume", "never-made", "--max-messages", "1")
    elapsed = time.monotonic() - started
    assert consumed.returncode == 1
    assert b"`minibroker topic create never-made`" in consumed.stderr
    assert elapsed < 2 + PROCESS_START_S
    listed = cluster.cli("topic", "list", "--format", "json")
    assert "never-made" not in json.loads(listed.stdout)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["consume", "no-such-topic", "--max-messages", "1"], "minibroker topic create"),
        (["topic", "describe", "no-such-topic"], "UNKNOWN_TOPIC_OR_PARTITION"),
        (["topic", "delete", "no-such-topic"], "UNKNOWN_TOPIC_OR_PARTITION"),
        (["topic", "create", "bad/name"], "INVALID_TOPIC_EXCEPTION"),
        (["consume", "shown", "--partition", "7", "--max-messages", "1"], "shown-7"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else v,
)
def test_bad_input_is_one_line_with_exit_code_1(
    cluster: LocalCluster,
    argv: list[str],
    message: str,
) -> None:
    result = cluster.cli(*argv, stdin=b"x\n")
    err = result.stderr.decode()
    assert result.returncode == 1, err
    assert err.count("\n") == 1, err
    assert message in err
    assert "Traceback" not in err


def test_creating_an_existing_topic_fails_unless_if_not_exists(
    cluster: LocalCluster,
) -> None:
    assert cluster.cli("topic", "create", "twice").returncode == 0
    again = cluster.cli("topic", "create", "twice")
    assert again.returncode == 1
    assert b"TOPIC_ALREADY_EXISTS" in again.stderr
    assert cluster.cli("topic", "create", "twice", "--if-not-exists").returncode == 0


def test_preferred_election_of_a_preferred_leader_is_not_needed(cluster: LocalCluster) -> None:
    assert cluster.cli("topic", "create", "elected", "-p", "2", "-r", "3").returncode == 0
    result = cluster.cli("elect-leaders", "--topic", "elected", "--format", "json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert {(r["partition"], r["result"]) for r in rows} == {(0, "not needed"), (1, "not needed")}

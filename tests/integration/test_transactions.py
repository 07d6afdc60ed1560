"""Transactions against a 3-broker cluster's Kafka listeners, with third-party clients as
judges: confluent-kafka and kafka-python transactional producers, read_committed
consumers of confluent-kafka, kafka-python and aiokafka; a transaction's records appear
all together once committed, never when aborted; a second producer with the same
transactional id fences the first; offsets sent in a transaction become the group's
committed offsets only when it commits."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import confluent_kafka
import kafka
import pytest
import trio

from minibroker import Consumer, Producer
from minibroker.net.connection import Connection
from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import (
    InvalidTxnStateError,
    NotLeaderOrFollowerError,
    TransactionAbortableError,
)
from minibroker.protocol.records import Record, encode_batch
from tests.support.broker import KafkaWireClient, produce_body, produced
from tests.support.cluster import LocalCluster
from tests.support.kafka_groups import committed_offsets, create_topic
from tests.support.prometheus import metrics_ports
from tests.support.transactions import (
    READERS,
    confluent_transactional,
    described_once,
    values,
    write_sentinels,
)

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]

PARTITIONS = 3


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text: str = answer.read().decode()
    return text


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(
        tmp_path_factory.mktemp("cluster"),
        properties=("transaction.abort.timed.out.transaction.cleanup.interval.ms=500",),
        kafka_listeners=True,
    ) as running:
        yield running


def test_committed_records_are_read_by_every_read_committed_consumer(
    cluster: LocalCluster,
) -> None:
    topic = "txn-commit"
    create_topic(cluster, topic, PARTITIONS)
    producer = confluent_transactional(cluster.kafka_bootstrap, "commit-1")
    sent = []
    for transaction in range(3):
        producer.begin_transaction()
        for i in range(30):
            value = b"t%d-%d" % (transaction, i)
            producer.produce(topic, value, partition=i % PARTITIONS)
            sent.append(value)
        producer.commit_transaction(30)
    write_sentinels(cluster.kafka_bootstrap, topic, PARTITIONS, "commit")
    for name, read in READERS.items():
        found = read(cluster.kafka_bootstrap, topic, PARTITIONS, PARTITIONS)
        assert sorted(values(found)) == sorted(sent), name


def test_kafka_python_transactional_producer_commits(cluster: LocalCluster) -> None:
    topic = "txn-kafka-python"
    create_topic(cluster, topic, PARTITIONS)
    producer = kafka.KafkaProducer(
        bootstrap_servers=cluster.kafka_bootstrap, transactional_id="kafka-python-1"
    )
    try:
        producer.init_transactions()
        producer.begin_transaction()
        sent = [b"kp-%d" % i for i in range(20)]
        for i, value in enumerate(sent):
            producer.send(topic, value, partition=i % PARTITIONS)
        producer.commit_transaction()
    finally:
        producer.close()
    write_sentinels(cluster.kafka_bootstrap, topic, PARTITIONS, "kafka-python")
    found = READERS["confluent-kafka"](cluster.kafka_bootstrap, topic, PARTITIONS, PARTITIONS)
    assert sorted(values(found)) == sorted(sent)


def test_a_second_producer_with_the_same_transactional_id_fences_the_first(
    cluster: LocalCluster,
) -> None:
    topic = "txn-fencing"
    create_topic(cluster, topic, 1)
    first = confluent_transactional(cluster.kafka_bootstrap, "fenced")
    first.begin_transaction()
    first.produce(topic, b"zombie-1", partition=0)
    first.flush(30)
    second = confluent_transactional(cluster.kafka_bootstrap, "fenced")  # aborts the first's
    second.begin_transaction()
    second.produce(topic, b"second", partition=0)
    second.commit_transaction(30)
    first.produce(topic, b"zombie-2", partition=0)
    with pytest.raises(confluent_kafka.KafkaException) as raised:
        first.commit_transaction(30)
    error = raised.value.args[0]
    assert error.fatal() or error.code() in (
        confluent_kafka.KafkaError._FENCED,
        confluent_kafka.KafkaError.PRODUCER_FENCED,
        confluent_kafka.KafkaError.INVALID_PRODUCER_EPOCH,
    ), error


def test_offsets_sent_in_a_transaction_are_committed_only_when_it_commits(
    cluster: LocalCluster,
) -> None:
    topic, group = "txn-offsets", "txn-offsets-group"
    create_topic(cluster, topic, 1)
    # The consumer only lends its group metadata: it must not commit offsets of its own
    # (librdkafka's position steps past the aborted batch and marker, and closing would
    # commit it over the transaction's).
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
        }
    )
    producer = confluent_transactional(cluster.kafka_bootstrap, "offsets-1")
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0)])
        metadata = consumer.consumer_group_metadata()
        for offset, commit in ((5, False), (7, True), (9, False)):
            producer.begin_transaction()
            producer.produce(topic, b"out-%d" % offset, partition=0)
            producer.send_offsets_to_transaction(
                [confluent_kafka.TopicPartition(topic, 0, offset)], metadata, 30
            )
            if commit:
                producer.commit_transaction(30)
            else:
                producer.abort_transaction(30)
    finally:
        consumer.close()
    # commit_transaction returns once the commit is decided; the group coordinator
    # applies the offsets when the marker reaches __consumer_offsets, a moment later.
    # Until then another client reads no offset; never an aborted transaction's.
    deadline = time.monotonic() + 20
    while (seen := committed_offsets(cluster, group)) != {0: 7}:
        assert seen == {}, f"an aborted transaction's offsets were committed: {seen}"
        assert time.monotonic() < deadline, "the committed transaction's offset never showed"
        time.sleep(0.05)


def test_aborted_records_are_never_read_by_read_committed_consumers(
    cluster: LocalCluster,
) -> None:
    """Commits and aborts interleaved, by two producers whose transactions overlap in
    the log: every reader gets exactly the committed records, in offset order."""
    topic = "txn-abort"
    create_topic(cluster, topic, PARTITIONS)
    first = confluent_transactional(cluster.kafka_bootstrap, "abort-1")
    second = kafka.KafkaProducer(
        bootstrap_servers=cluster.kafka_bootstrap, transactional_id="abort-2"
    )
    committed = []
    try:
        second.init_transactions()
        for round_ in range(4):
            first.begin_transaction()
            second.begin_transaction()
            for i in range(12):
                first.produce(topic, b"first-%d-%d" % (round_, i), partition=i % PARTITIONS)
                second.send(topic, b"second-%d-%d" % (round_, i), partition=i % PARTITIONS)
            first.flush(30)
            second.flush()
            commit_first = round_ % 2 == 0
            if commit_first:
                first.commit_transaction(30)
                second.abort_transaction()
                committed += [b"first-%d-%d" % (round_, i) for i in range(12)]
            else:
                second.commit_transaction()
                first.abort_transaction(30)
                committed += [b"second-%d-%d" % (round_, i) for i in range(12)]
    finally:
        second.close()
    write_sentinels(cluster.kafka_bootstrap, topic, PARTITIONS, "abort")
    for name, read in READERS.items():
        found = read(cluster.kafka_bootstrap, topic, PARTITIONS, PARTITIONS)
        assert sorted(values(found)) == sorted(committed), name
        for p in range(PARTITIONS):
            offsets = [offset for partition, offset, _ in found if partition == p]
            assert offsets == sorted(offsets), name


def test_a_read_committed_consumer_waits_behind_an_open_transaction_until_it_commits(
    cluster: LocalCluster,
) -> None:
    topic = "txn-lso"
    create_topic(cluster, topic, 1)
    open_txn = confluent_transactional(cluster.kafka_bootstrap, "lso-open")
    open_txn.begin_transaction()
    open_txn.produce(topic, b"held", partition=0)
    open_txn.flush(30)
    later = confluent_transactional(cluster.kafka_bootstrap, "lso-later")
    later.begin_transaction()
    later.produce(topic, b"after", partition=0)
    later.commit_transaction(30)  # committed, but above the open transaction's first offset
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap,
            "group.id": "unused",
            "isolation.level": "read_committed",
        }
    )
    try:
        tp = confluent_kafka.TopicPartition(topic, 0)
        low, high = consumer.get_watermark_offsets(tp, timeout=10, cached=False)
        assert (low, high) == (0, 0)  # ListOffsets read_committed: the LSO
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        assert consumer.consume(10, timeout=2) == []  # nothing is stable yet
        # held (0), after (1), its marker (2): the HW is 3, the LSO 0
        lag = f'kafka_cluster_partition_laststableoffsetlag{{partition="0",topic="{topic}"}} 3.0'
        assert any(lag in scrape(port) for port in metrics_ports(cluster).values())
        assert any(
            'numtransactionalids{state="Ongoing"}' in scrape(port)
            for port in metrics_ports(cluster).values()
        )
        open_txn.commit_transaction(30)
        found: list[bytes] = []
        while len(found) < 2:
            messages = consumer.consume(10, timeout=10)
            assert messages, "the commit did not release the consumer"
            found += [m.value() for m in messages if m.error() is None]
        assert found == [b"held", b"after"]
    finally:
        consumer.close()


def test_an_abandoned_transaction_is_aborted_at_its_timeout_and_releases_readers(
    cluster: LocalCluster,
) -> None:
    topic = "txn-timeout"
    create_topic(cluster, topic, 1)
    abandoned = confluent_transactional(
        cluster.kafka_bootstrap,
        "abandoned",
        **{"transaction.timeout.ms": 2000, "message.timeout.ms": 2000},
    )
    abandoned.begin_transaction()
    abandoned.produce(topic, b"abandoned", partition=0)
    abandoned.flush(30)
    write_sentinels(cluster.kafka_bootstrap, topic, 1, "timeout")  # behind the open one
    found = READERS["aiokafka"](cluster.kafka_bootstrap, topic, 1, 1)
    assert values(found) == []  # released by the abort, which the timeout made
    with pytest.raises(confluent_kafka.KafkaException):
        abandoned.commit_transaction(30)  # its epoch was bumped: fenced


# -- the bundled client ----------------------------------------------------------------------


def test_the_bundled_producer_commits_aborts_on_error_and_sends_offsets(
    cluster: LocalCluster,
) -> None:
    topic, group = "txn-bundled", "txn-bundled-group"
    create_topic(cluster, topic, PARTITIONS)

    class Boom(Exception):
        pass

    async def run() -> tuple[list[bytes], list[bytes]]:
        async with Producer(cluster.bootstrap, transactional_id="bundled-1") as producer:
            await producer.init_transactions()
            async with producer.transaction():
                for i in range(9):
                    await producer.send(topic, b"kept-%d" % i, partition=i % PARTITIONS)
                await producer.send_offsets_to_transaction({(topic, 0): 4}, group)
            with pytest.raises(Boom):
                async with producer.transaction():
                    for i in range(9):
                        producer.send_nowait(topic, b"dropped-%d" % i, partition=i % PARTITIONS)
                    await producer.flush()
                    raise Boom
        found: dict[str, list[bytes]] = {}
        for level in ("read_committed", "read_uncommitted"):
            async with Consumer(
                cluster.bootstrap, auto_offset_reset="earliest", isolation_level=level
            ) as consumer:
                consumer.assign([(topic, p) for p in range(PARTITIONS)])
                values: list[bytes] = []
                with trio.fail_after(30):
                    while len(values) < (9 if level == "read_committed" else 18):
                        values += [r.value for r in await consumer.poll(timeout_ms=500)]
                found[level] = values
        return found["read_committed"], found["read_uncommitted"]

    committed, uncommitted = trio.run(run)
    assert sorted(committed) == sorted(b"kept-%d" % i for i in range(9))
    assert len(uncommitted) == 18  # every record, no marker
    assert committed_offsets(cluster, group) == {0: 4}


def test_the_bundled_consumer_steps_past_markers_and_aborted_batches(
    cluster: LocalCluster,
) -> None:
    """A partition that ends with a commit marker, or with an aborted transaction and
    its marker, is read to its end: the position reaches the log end offset (as the Java
    consumer's does), so a consumer that has every record shows no lag."""
    topic = "txn-bundled-tail"
    create_topic(cluster, topic, 2)

    async def run() -> dict[int, int | None]:
        async with Producer(cluster.bootstrap, transactional_id="bundled-tail") as producer:
            await producer.init_transactions()
            async with producer.transaction():
                for i in range(3):
                    await producer.send(topic, b"kept-%d" % i, partition=0)
                    await producer.send(topic, b"kept-%d" % i, partition=1)
            producer.begin_transaction()
            for i in range(3):
                await producer.send(topic, b"dropped-%d" % i, partition=1)
            await producer.abort_transaction()
        # partition 0: three records and a commit marker; partition 1: that, then three
        # aborted records and an abort marker.
        ends = {0: 4, 1: 8}
        async with Consumer(
            cluster.bootstrap, auto_offset_reset="earliest", isolation_level="read_committed"
        ) as consumer:
            consumer.assign([(topic, 0), (topic, 1)])
            values: list[bytes] = []
            with trio.move_on_after(30):
                while len(values) < 6 or any(
                    consumer.position(topic, p) != end for p, end in ends.items()
                ):
                    values += [r.value for r in await consumer.poll(timeout_ms=200)]
            assert sorted(values) == sorted([b"kept-%d" % i for i in range(3)] * 2)
            return {p: consumer.position(topic, p) for p in ends}

    assert trio.run(run) == {0: 4, 1: 8}


# -- the CLI -----------------------------------------------------------------------------------


def test_the_cli_produces_in_transactions_and_reads_committed(cluster: LocalCluster) -> None:
    topic = "txn-cli"
    create_topic(cluster, topic, 1)
    lines = b"".join(b"line-%d\n" % i for i in range(7))
    done = cluster.cli(
        "produce", topic, "--transactional-id", "cli-1", "--transaction-size", "3", stdin=lines
    )
    assert done.returncode == 0, done.stderr.decode()
    read = cluster.cli(
        "consume",
        topic,
        "--from-beginning",
        "--isolation-level",
        "read_committed",
        "--max-messages",
        "7",
        "--timeout-ms",
        "10000",
    )
    assert read.stdout.decode().split() == [f"line-{i}" for i in range(7)]
    described = cluster.cli("transactions", "describe", "cli-1", "--format", "json")
    assert described.returncode == 0, described.stderr.decode()
    state = json.loads(described.stdout)
    assert state["state"] == "CompleteCommit" and state["partitions"] == []
    listed = json.loads(cluster.cli("transactions", "list", "--format", "json").stdout)
    assert {
        "transactional_id": "cli-1",
        "producer_id": state["producer_id"],
        "state": "CompleteCommit",
        "coordinator": state["coordinator"],
    } in listed


def test_the_cli_finds_and_aborts_a_hanging_transaction(cluster: LocalCluster) -> None:
    topic = "txn-hanging"
    create_topic(cluster, topic, 1)
    hanging = confluent_transactional(cluster.kafka_bootstrap, "hanging")
    hanging.begin_transaction()
    hanging.produce(topic, b"hanging", partition=0)
    hanging.flush(30)
    described = cluster.cli("transactions", "describe-producers", topic, "0", "--format", "json")
    producers = json.loads(described.stdout)
    assert [p["current_txn_start_offset"] for p in producers] == [0]
    aborted = cluster.cli(
        "transactions",
        "abort",
        "--topic",
        topic,
        "--partition",
        "0",
        "--start-offset",
        "0",
        "--format",
        "json",
    )
    assert aborted.returncode == 0, aborted.stderr.decode()
    assert json.loads(aborted.stdout)["producer_id"] == producers[0]["producer_id"]
    after = json.loads(
        cluster.cli("transactions", "describe-producers", topic, "0", "--format", "json").stdout
    )
    assert [p["current_txn_start_offset"] for p in after] == [-1]
    write_sentinels(cluster.kafka_bootstrap, topic, 1, "hanging")
    found = READERS["confluent-kafka"](cluster.kafka_bootstrap, topic, 1, 1)
    assert values(found) == []


def test_a_write_outside_the_ongoing_transaction_is_refused_not_left_hanging(
    cluster: LocalCluster,
) -> None:
    """KIP-890 part 1: a late write of a committed transaction, or one to a partition
    never added, would open a transaction nobody ends; the leader asks the coordinator
    first and answers INVALID_TXN_STATE, and read_committed readers are not blocked."""
    topic = "txn-verified"
    create_topic(cluster, topic, 2)
    producer = confluent_transactional(cluster.kafka_bootstrap, "verified-1")
    producer.begin_transaction()
    producer.produce(topic, b"committed", partition=0)
    producer.commit_transaction(30)
    described = cluster.cli("transactions", "describe", "verified-1", "--format", "json")
    state = json.loads(described.stdout)
    producer_id, epoch = state["producer_id"], state["producer_epoch"]

    async def stray_writes() -> dict[int, set[int]]:
        codes: dict[int, set[int]] = {0: set(), 1: set()}
        for partition, sequence in ((0, 1), (1, 0)):  # in sequence: only the txn is wrong
            batch = encode_batch(
                [Record(b"stray", timestamp=1_000)],
                producer_id=producer_id,
                producer_epoch=epoch,
                base_sequence=sequence,
                transactional=True,
            )
            body = {**produce_body(topic, partition, batch, -1), "transactional_id": "verified-1"}
            for broker_id in range(1, cluster.brokers + 1):  # the leader among them answers
                connection = Connection("127.0.0.1", cluster.broker_port(broker_id))
                await connection.connect()
                try:
                    answer = await connection.request(ApiKey.PRODUCE, body)
                finally:
                    await connection.aclose()
                codes[partition].add(produced(answer)["error_code"])
        return codes

    codes = trio.run(stray_writes)
    not_leader = NotLeaderOrFollowerError.code
    assert codes == {p: {not_leader, InvalidTxnStateError.code} for p in (0, 1)}
    for partition in ("0", "1"):
        listed = cluster.cli(
            "transactions", "describe-producers", topic, partition, "--format", "json"
        )
        assert all(p["current_txn_start_offset"] == -1 for p in json.loads(listed.stdout))
    # What a leader asks the coordinator, on the Kafka listener (AddPartitionsToTxn v4).
    producer.begin_transaction()
    producer.produce(topic, b"aborted", partition=0)
    producer.flush(30)  # partition 0 is in the open transaction, partition 1 is not
    state = json.loads(
        cluster.cli("transactions", "describe", "verified-1", "--format", "json").stdout
    )
    verdicts = trio.run(verify_only, cluster, state, topic)  # as Kafka's coordinator answers
    assert verdicts == {0: 0, 1: TransactionAbortableError.code}
    producer.abort_transaction(30)
    write_sentinels(cluster.kafka_bootstrap, topic, 2, "verified")
    found = READERS["confluent-kafka"](cluster.kafka_bootstrap, topic, 2, 2)
    assert values(found) == [b"committed"]


def test_a_transaction_ended_under_librdkafka_refuses_its_next_write_as_invalid_txn_state(
    cluster: LocalCluster,
) -> None:
    """The transaction is ended at the producer's own epoch (an EndTxn v3 abort) while
    it still writes: its next record would open a transaction nobody ends. librdkafka
    sends Produce v10, which predates TRANSACTION_ABORTABLE: it is told
    INVALID_TXN_STATE, as Kafka tells it, and aborts (Kafka's Java client, whose Produce
    v11 is told TRANSACTION_ABORTABLE: tests/judges/test_java_transaction_abortable.py)."""
    topic, transactional_id = "txn-ended-under-it", "ended-under-it"
    create_topic(cluster, topic, 1)
    producer = confluent_transactional(cluster.kafka_bootstrap, transactional_id)
    producer.begin_transaction()
    producer.produce(topic, b"first", partition=0)
    producer.flush(30)
    state = json.loads(
        cluster.cli("transactions", "describe", transactional_id, "--format", "json").stdout
    )
    assert trio.run(end_txn_v3, cluster, state) == 0
    described_once(cluster, transactional_id, "CompleteAbort")  # its marker is written
    failed: list[confluent_kafka.KafkaError] = []
    producer.produce(topic, b"stray", partition=0, on_delivery=lambda e, _: failed.append(e))
    producer.flush(30)
    assert [e.code() for e in failed] == [confluent_kafka.KafkaError.INVALID_TXN_STATE]
    with pytest.raises(confluent_kafka.KafkaException) as refused:
        producer.commit_transaction(30)
    assert refused.value.args[0].txn_requires_abort()
    producer.abort_transaction(30)
    # librdkafka then fails its next transaction on the gap the refused record left in
    # its sequence numbers (its own check, as against Kafka): a new instance goes on.
    producer = confluent_transactional(cluster.kafka_bootstrap, transactional_id)
    producer.begin_transaction()
    producer.produce(topic, b"after", partition=0)
    producer.commit_transaction(30)
    write_sentinels(cluster.kafka_bootstrap, topic, 1, "ended-under-it")
    found = READERS["confluent-kafka"](cluster.kafka_bootstrap, topic, 1, 1)
    assert values(found) == [b"after"]


async def end_txn_v3(cluster: LocalCluster, state: dict[str, Any]) -> int:
    """An EndTxn v3 abort of the open transaction of ``state`` at its epoch: the code."""
    port = cluster.state["brokers"][str(state["coordinator"])]["kafka_port"]
    async with KafkaWireClient(await trio.open_tcp_stream("127.0.0.1", port)) as client:
        answer = await client.kafka_request(
            ApiKey.END_TXN,
            3,
            {
                "transactional_id": state["transactional_id"],
                "producer_id": state["producer_id"],
                "producer_epoch": state["producer_epoch"],
                "committed": False,
            },
        )
    code: int = answer["error_code"]
    return code


async def verify_only(cluster: LocalCluster, state: dict[str, Any], topic: str) -> dict[int, int]:
    """Partition -> the coordinator's verdict on the open transaction of ``state``."""
    port = cluster.state["brokers"][str(state["coordinator"])]["kafka_port"]
    async with KafkaWireClient(await trio.open_tcp_stream("127.0.0.1", port)) as client:
        answer = await client.kafka_request(
            ApiKey.ADD_PARTITIONS_TO_TXN,
            4,
            {
                "transactions": [
                    {
                        "transactional_id": state["transactional_id"],
                        "producer_id": state["producer_id"],
                        "producer_epoch": state["producer_epoch"],
                        "verify_only": True,
                        "topics": [{"name": topic, "partitions": [0, 1]}],
                    }
                ]
            },
        )
    assert answer["error_code"] == 0
    [txn] = answer["results_by_transaction"]
    return {
        p["partition_index"]: p["partition_error_code"]
        for t in txn["topic_results"]
        for p in t["results_by_partition"]
    }


# -- transaction version 2 (KIP-890 part 2) ----------------------------------------------------


class Listener:
    """Requests to one broker on the Kafka listener at a version, or on the msgpack
    listener with ``transaction_version`` 2 where a Kafka version would say it."""

    def __init__(self, cluster: LocalCluster, kind: str) -> None:
        self.cluster = cluster
        self.kind = kind

    async def request(self, broker_id: int, api: ApiKey, version: int, body: Any) -> Any:
        if self.kind == "kafka":
            port = self.cluster.state["brokers"][str(broker_id)]["kafka_port"]
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            async with KafkaWireClient(stream) as client:
                return await client.kafka_request(api, version, body)
        if api in (ApiKey.PRODUCE, ApiKey.END_TXN) and version >= 5:
            body = {**body, "transaction_version": 2}
        connection = Connection("127.0.0.1", self.cluster.broker_port(broker_id))
        await connection.connect()
        try:
            return await connection.request(api, body)
        finally:
            await connection.aclose()


async def _until(call: Any, retried: set[int]) -> Any:
    """``call()``'s answer once its error code is not in ``retried`` (10 s at most)."""
    with trio.fail_after(10):
        while True:
            answer = await call()
            if answer.get("error_code", 0) not in retried:
                return answer
            await trio.sleep(0.05)


@pytest.mark.parametrize("listener", ["kafka", "msgpack"])
def test_with_transaction_version_2_every_end_bumps_the_epoch_and_late_requests_are_fenced(
    cluster: LocalCluster, listener: str
) -> None:
    """KIP-890 part 2 (Produce v12, EndTxn v5): the leader adds its partition to the
    transaction, each EndTxn answers the next epoch, its retry the same one; a late
    Produce or EndTxn of the ended transaction cannot land in the next one."""
    topic, transactional_id = f"txn-v2-{listener}", f"v2-{listener}"
    create_topic(cluster, topic, 1)
    [described] = json.loads(cluster.cli("topic", "describe", topic, "--format", "json").stdout)
    leader = described["partitions"][0]["leader"]
    wire = Listener(cluster, listener)
    epoch_error = 47  # INVALID_PRODUCER_EPOCH
    # PRODUCER_FENCED (KIP-588) on the Kafka listener; msgpack bodies have one version,
    # answered as Kafka answers the versions before it
    fenced = 90 if listener == "kafka" else epoch_error
    busy = {14, 15, 51}  # coordinator loading or not available, concurrent transactions

    async def session() -> dict[str, Any]:
        found = await _until(
            lambda: Listener(cluster, "kafka").request(
                1, ApiKey.FIND_COORDINATOR, 1, {"key": transactional_id, "key_type": 1}
            ),
            busy,
        )
        coordinator = found["node_id"]
        init = await _until(
            lambda: wire.request(
                coordinator,
                ApiKey.INIT_PRODUCER_ID,
                4,
                {
                    "transactional_id": transactional_id,
                    "transaction_timeout_ms": 60_000,
                    "producer_id": -1,
                    "producer_epoch": -1,
                },
            ),
            busy,
        )
        pid, epoch = init["producer_id"], init["producer_epoch"]

        async def produce(value: bytes, producer_epoch: int, sequence: int) -> int:
            batch = encode_batch(
                [Record(value, timestamp=1_000)],
                producer_id=pid,
                producer_epoch=producer_epoch,
                base_sequence=sequence,
                transactional=True,
            )
            body = {**produce_body(topic, 0, batch, -1), "transactional_id": transactional_id}
            answer = await wire.request(leader, ApiKey.PRODUCE, 12, body)
            code: int = produced(answer)["error_code"]
            return code

        async def end(producer_epoch: int, committed: bool) -> tuple[int, int]:
            body = {
                "transactional_id": transactional_id,
                "producer_id": pid,
                "producer_epoch": producer_epoch,
                "committed": committed,
            }
            answer = await _until(lambda: wire.request(coordinator, ApiKey.END_TXN, 5, body), {51})
            return answer["error_code"], answer["producer_epoch"]

        return {
            "first": await produce(b"first", epoch, 0),
            "commit": await end(epoch, True),
            "commit retried": await end(epoch, True),
            "second": await produce(b"second", epoch + 1, 0),
            "late produce": await produce(b"late", epoch, 1),
            "late commit": await end(epoch, True),
            "abort": await end(epoch + 1, False),
            "epoch": epoch,
            "pid": pid,
        }

    got = trio.run(session)
    epoch, pid = got.pop("epoch"), got.pop("pid")
    assert got == {
        "first": 0,
        "commit": (0, epoch + 1),
        "commit retried": (0, epoch + 1),
        "second": 0,
        "late produce": epoch_error,
        "late commit": (fenced, -1),
        "abort": (0, epoch + 2),
    }
    write_sentinels(cluster.kafka_bootstrap, topic, 1, listener)
    found = READERS["confluent-kafka"](cluster.kafka_bootstrap, topic, 1, 1)
    assert values(found) == [b"first"]
    listed = cluster.cli("transactions", "describe-producers", topic, "0", "--format", "json")
    [state] = [p for p in json.loads(listed.stdout) if p["producer_id"] == pid]
    assert (state["producer_epoch"], state["current_txn_start_offset"]) == (epoch + 2, -1)

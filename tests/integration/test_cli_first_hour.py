"""What tripped a newcomer in the first hour, against a `dev up` cluster with Kafka
listeners: `consume | head` ends as Unix tools do; a bad topic name gets its reason; a
produce that cannot complete says what it waits for and is bounded by Kafka's
settings; a refused request (a real Kafka client asking for a transaction coordinator)
shows in the broker's log and in ErrorsPerSec."""

from __future__ import annotations

import subprocess
import urllib.request
from collections.abc import Iterator

import pytest

from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import InvalidRequestError
from tests.support.broker import KafkaWireClient
from tests.support.broker_process import ROOT, child_env
from tests.support.cli import cli_command
from tests.support.cluster import LocalCluster

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path_factory.mktemp("cluster"), kafka_listeners=True) as running:
        yield running


def pipeline(cluster: LocalCluster, consume: str, reader: str) -> subprocess.CompletedProcess[str]:
    """``minibroker CONSUME | READER`` in bash with pipefail: the exit status is the
    consumer's unless the reader failed."""
    command = " ".join(cli_command(*consume.split(), bootstrap=cluster.bootstrap))
    return subprocess.run(
        ["bash", "-c", f"set -o pipefail; {command} | {reader}"],
        capture_output=True, text=True, timeout=60, cwd=ROOT, env=child_env(), check=False,
    )  # fmt: skip


def test_consume_into_head_ends_quietly_with_exit_code_0(cluster: LocalCluster) -> None:
    lines = b"".join(b"%d\n" % i for i in range(30_000))  # more than a pipe holds
    assert cluster.cli("produce", "many", stdin=lines, timeout=120).returncode == 0
    assert cluster.cli("produce", "few", stdin=b"a\nb\nc\n").returncode == 0

    # Many records: the consumer's next write finds the pipe closed.
    many = pipeline(cluster, "consume many --from-beginning", "head -n 2")
    # Three records, then none: nothing to write; the consumer sees its reader leave.
    few = pipeline(cluster, "consume few --from-beginning", "head -n 1")

    assert (many.returncode, many.stdout.splitlines(), many.stderr) == (0, ["0", "1"], "")
    assert (few.returncode, few.stdout, few.stderr) == (0, "a\n", "")


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("a/b", "has characters outside ASCII letters, digits, '.', '_', '-'"),
        ("a b", "has characters outside ASCII letters, digits, '.', '_', '-'"),
        ("t" * 300, "is 300 characters long, the limit is 249"),
    ],
    ids=["slash", "space", "300 characters"],
)
def test_produce_to_an_invalid_topic_name_says_why(
    cluster: LocalCluster, name: str, reason: str
) -> None:
    done = cluster.cli("produce", name, stdin=b"x\n")

    err = done.stderr.decode()
    assert done.returncode == 1 and err.count("\n") == 1, err
    assert "INVALID_TOPIC_EXCEPTION (topic name " in err and reason in err, err


def test_produce_with_too_few_in_sync_replicas_says_so_and_stops_at_the_delivery_timeout(
    cluster: LocalCluster,
) -> None:
    created = cluster.cli(
        *("topic", "create", "lonely", "--partitions", "1", "--replication-factor", "1"),
        *("--config", "min.insync.replicas=2"),
    )
    assert created.returncode == 0, created.stderr

    done = cluster.cli(
        "produce", "lonely", "--request-timeout-ms", "2000",
        "--producer-property", "delivery.timeout.ms=4000", stdin=b"x\n", timeout=60,
    )  # fmt: skip

    err = done.stderr.decode().splitlines()
    assert done.returncode == 1, err
    waiting, failed = err[0], err[-1]
    assert waiting.startswith("minibroker produce: waiting: lonely-0: NOT_ENOUGH_REPLICAS (")
    assert "is smaller than min.insync.replicas 2" in waiting
    assert "delivery.timeout.ms=4000 ms" in waiting
    assert "delivery timeout expired; last error: lonely-0: NOT_ENOUGH_REPLICAS" in failed


def test_produce_refuses_an_unknown_producer_property_as_a_usage_error(
    cluster: LocalCluster,
) -> None:
    done = cluster.cli("produce", "few", "--producer-property", "no.such=1", stdin=b"x\n")

    assert done.returncode == 2
    assert "no.such: not one of delivery.timeout.ms" in done.stderr.decode()


async def test_a_refused_request_is_logged_and_counted_as_errors_per_sec(
    cluster: LocalCluster,
) -> None:
    # A FindCoordinator for a share group (key type 2, KIP-932), which this broker does
    # not serve: refused INVALID_REQUEST, which a client only retries.
    port = int(cluster.kafka_bootstrap.split(",")[0].rsplit(":", 1)[1])
    async with await KafkaWireClient.connect(port) as client:
        assert isinstance(client, KafkaWireClient)
        response = await client.kafka_request(
            ApiKey.FIND_COORDINATOR, 4, {"key_type": 2, "coordinator_keys": ["shares"]}
        )
    assert response["coordinators"][0]["error_code"] == InvalidRequestError.code

    logs = [(cluster.data_dir / "logs" / f"broker-{i}.log").read_text() for i in (1, 2, 3)]
    refused = [
        line for log in logs for line in log.splitlines() if "refused FIND_COORDINATOR" in line
    ]
    assert refused, "no broker logged the refusal"
    assert "from client 'test': INVALID_REQUEST (key type 2: only 0, 1 are served)" in refused[0]
    counted = 0.0
    for broker in cluster.state["brokers"].values():
        url = f"http://127.0.0.1:{broker['metrics_port']}/metrics"
        for line in urllib.request.urlopen(url, timeout=10).read().decode().splitlines():
            if line.startswith("kafka_network_requestmetrics_errors_total{") and (
                'request="FindCoordinator"' in line and 'error="INVALID_REQUEST"' in line
            ):
                counted += float(line.rsplit(" ", 1)[1])
    assert counted >= 1

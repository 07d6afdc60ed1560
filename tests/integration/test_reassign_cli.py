"""`minibroker reassign` and `minibroker log-dirs describe` against a real 3-broker
cluster (`dev up`: ZooKeeper and broker processes, two log dirs per broker)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.cluster import LocalCluster

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def log_dirs(cluster: LocalCluster, *args: str) -> dict[str, Any]:
    done = cluster.cli("log-dirs", "describe", *args)
    assert done.returncode == 0, done.stderr
    document: dict[str, Any] = json.loads(done.stdout)
    return document


def where(cluster: LocalCluster, topic: str) -> dict[int, list[tuple[str, bool]]]:
    """broker -> [(log dir, is_future)] of ``topic``-0."""
    found: dict[int, list[tuple[str, bool]]] = {}
    for broker in log_dirs(cluster, "--topic-list", topic)["brokers"]:
        for d in broker["logDirs"]:
            for p in d["partitions"]:
                if p["partition"] == f"{topic}-0":
                    found.setdefault(broker["broker"], []).append((d["logDir"], p["isFuture"]))
    return found


def broker_dirs(cluster: LocalCluster, broker: int) -> list[str]:
    return [str(cluster.data_dir / f"broker-{broker}" / f"logs-{i}") for i in (0, 1)]


def write(tmp_path: Path, document: object) -> str:
    path = tmp_path / "moves.json"
    path.write_text(json.dumps(document))
    return str(path)


def test_a_move_to_another_broker_that_names_a_dir_there_ends_in_that_dir(
    local_cluster: LocalCluster,
    tmp_path: Path,
) -> None:
    cluster = local_cluster
    created = cluster.cli("topic", "create", "mv", "-p", "1", "-r", "1")
    assert created.returncode == 0, created.stderr
    lines = b"".join(b"record-%d\n" % i for i in range(2000))
    assert cluster.cli("produce", "mv", "--acks", "all", stdin=lines).returncode == 0
    [(source, _)] = [(b, dirs) for b, dirs in where(cluster, "mv").items()]
    target_broker = next(b for b in (1, 2, 3) if b != source)
    # logs-1 is not where the least-loaded rule would put a broker's first replica.
    target_dir = broker_dirs(cluster, target_broker)[1]
    moves = write(
        tmp_path,
        {
            "version": 1,
            "partitions": [
                {
                    "topic": "mv",
                    "partition": 0,
                    "replicas": [target_broker],
                    "log_dirs": [target_dir],
                }
            ],
        },
    )
    executed = cluster.cli("reassign", "--execute", "--reassignment-json-file", moves)
    assert executed.returncode == 0, executed.stderr
    assert b"Current partition replica assignment" in executed.stdout
    verified = cluster.cli(
        "reassign", "--verify", "--reassignment-json-file", moves, "--timeout", "90000", timeout=120
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert b"is complete" in verified.stdout
    deadline = time.monotonic() + 60
    while where(cluster, "mv") != {target_broker: [(target_dir, False)]}:
        assert time.monotonic() < deadline, where(cluster, "mv")
        time.sleep(0.5)
    consumed = cluster.cli("consume", "mv", "--from-beginning", "--max-messages", "2000")
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == [b"record-%d" % i for i in range(2000)]


def test_log_dirs_describe_prints_kafkas_json(local_cluster: LocalCluster) -> None:
    cluster = local_cluster
    assert cluster.cli("topic", "create", "described", "-p", "2", "-r", "3").returncode == 0
    document = log_dirs(local_cluster, "--broker-list", "1,2", "--topic-list", "described")
    assert document["version"] == 1
    assert [b["broker"] for b in document["brokers"]] == [1, 2]
    for broker in document["brokers"]:
        assert sorted(d["logDir"] for d in broker["logDirs"]) == broker_dirs(
            cluster, broker["broker"]
        )
        partitions = [p for d in broker["logDirs"] for p in d["partitions"]]
        assert sorted(p["partition"] for p in partitions) == ["described-0", "described-1"]
        for p in partitions:
            assert p["offsetLag"] == 0 and p["isFuture"] is False and p["size"] >= 0
        assert all(d["error"] is None for d in broker["logDirs"])


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"topic": "nope", "partition": 0, "replicas": [1]}, "topic 'nope' does not exist"),
        (
            {"topic": "bad", "partition": 0, "replicas": [1], "log_dirs": ["/not/a/log/dir"]},
            "LOG_DIR_NOT_FOUND",
        ),
        ({"topic": "bad", "partition": 0, "replicas": [7]}, "unknown broker(s) [7]"),
    ],
)
def test_reassign_rejects_what_the_cluster_cannot_do_in_one_line(
    local_cluster: LocalCluster,
    tmp_path: Path,
    entry: dict[str, Any],
    message: str,
) -> None:
    local_cluster.cli("topic", "create", "bad", "-p", "1", "-r", "1", "--if-not-exists")
    moves = write(tmp_path, {"version": 1, "partitions": [entry]})
    done = local_cluster.cli("reassign", "--execute", "--reassignment-json-file", moves)
    assert done.returncode == 1
    assert message.encode() in done.stderr
    assert done.stderr.count(b"\n") == 1, done.stderr


def test_generate_prints_the_current_and_a_proposed_assignment_over_the_listed_brokers(
    local_cluster: LocalCluster,
    tmp_path: Path,
) -> None:
    assert local_cluster.cli("topic", "create", "gen", "-p", "3", "-r", "2").returncode == 0
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": "gen"}]}))
    done = local_cluster.cli(
        "reassign", "--generate", "--topics-to-move-json-file", str(topics), "--broker-list", "1,2"
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.decode().splitlines()
    assert lines[0] == "Current partition replica assignment"
    assert lines[3] == "Proposed partition reassignment configuration"
    current, proposed = json.loads(lines[1]), json.loads(lines[4])
    assert [p["partition"] for p in current["partitions"]] == [0, 1, 2]
    for entry in proposed["partitions"]:
        assert entry["topic"] == "gen" and len(entry["replicas"]) == 2
        assert set(entry["replicas"]) == {1, 2}
        assert entry["log_dirs"] == ["any", "any"]

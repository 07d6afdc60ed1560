"""Replication throttle bench: how closely a throttled reassignment holds its rate.

Starts a real ZooKeeper and two in-process brokers (cluster mode), fills a one-replica
partition on broker 1 with ``--megabytes`` of 64 KiB records, then moves it twice with
the reassignment tool's own code (``minibroker reassign --execute``):

1. to broker 2, unthrottled: how fast a copy runs here at all;
2. back to broker 1 with ``--throttle`` set so the copy should take ``--seconds``.

Each copy is timed from ``--execute`` until the topic's replicas are the target ones.
Prints one JSON object on its last line: the configured and achieved rates (bytes/s)
and the error in percent ((achieved - configured) / configured).

    python3 bench/replication_throttle_bench.py [--megabytes 8] [--seconds 6]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from minibroker.broker.broker import Broker
from minibroker.broker.config.broker_config import BrokerConfig
from minibroker.client.admin import Admin
from minibroker.client.cli import reassign
from minibroker.client.producer import Producer
from minibroker.client.reassignment import parse_reassignment
from minibroker.node.node import Node
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.zk.server import ZooKeeperServer

TOPIC = "throttled"
RECORD_BYTES = 64 * 1024
POLL_S = 0.02  # completion check: small against a copy of seconds
MOVE_TIMEOUT_S = 120.0  # a copy that has not finished by then is a failure, not a figure


def config(root: Path, broker_id: int, zk_connect: str) -> BrokerConfig:
    values = {
        "broker.id": str(broker_id),
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "log.dirs": str(root / f"broker-{broker_id}"),
        "zookeeper.connect": zk_connect,
        "zookeeper.session.timeout.ms": "6000",
    }
    return BrokerConfig.from_properties(None, values)


async def move(bootstrap: str, plan: Path, target: int, throttle: int) -> float:
    """Seconds from --execute until the partition lives on ``target`` only."""
    plan.write_text(
        json.dumps(
            {"version": 1, "partitions": [{"topic": TOPIC, "partition": 0, "replicas": [target]}]}
        )
    )
    moves = parse_reassignment(plan.read_text())
    parser = argparse.ArgumentParser()
    reassign.configure(parser)
    common = ["--reassignment-json-file", str(plan), "--bootstrap-server", bootstrap]
    execute = parser.parse_args(["--execute", *common, "--throttle", str(throttle)])
    verify = parser.parse_args(["--verify", *common, "--timeout", "30000"])
    with contextlib.redirect_stdout(io.StringIO()):
        started = trio.current_time()
        assert await reassign._execute(execute, moves) == 0
        async with Admin(bootstrap) as admin:
            with trio.fail_after(MOVE_TIMEOUT_S):
                while True:
                    [topic] = await admin.describe_topics([TOPIC])
                    if tuple(topic.partitions[0].replicas) == (target,):
                        break
                    await trio.sleep(POLL_S)
        elapsed = trio.current_time() - started
        assert await reassign._verify(verify, moves) == 0  # removes the throttle again
    return elapsed


async def measure(zk_connect: str, root: Path, megabytes: int, seconds: float) -> dict[str, Any]:
    async with trio.open_nursery() as nursery:
        brokers: dict[int, Broker] = {}
        for broker_id in (1, 2):
            node = Node(config(root, broker_id, zk_connect))  # a broker and its controller
            brokers[broker_id] = await nursery.start(node.run)
        bootstrap = f"127.0.0.1:{brokers[1].port}"
        async with Admin(bootstrap) as admin:
            await admin.create_topic(TOPIC, assignments={0: [1]})
        async with Producer(bootstrap, acks=1, batch_size=256 * 1024) as producer:
            for _ in range(megabytes * 1024 * 1024 // RECORD_BYTES):
                producer.send_nowait(TOPIC, bytes(RECORD_BYTES), partition=0)
            await producer.flush()
        log = brokers[1].parts.log_manager.get_log(TopicPartition(TOPIC, 0))
        assert log is not None
        size = log.size
        plan = root / "plan.json"
        unthrottled_s = await move(bootstrap, plan, 2, -1)
        rate = int(size / seconds)
        throttled_s = await move(bootstrap, plan, 1, rate)
        nursery.cancel_scope.cancel()
    achieved = size / throttled_s
    return {
        "bytes": size,
        "unthrottled_s": round(unthrottled_s, 3),
        "unthrottled_rate_bps": round(size / unthrottled_s),
        "configured_rate_bps": rate,
        "throttled_s": round(throttled_s, 3),
        "achieved_rate_bps": round(achieved),
        "error_pct": round(100 * (achieved - rate) / rate, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=6.0, help="intended throttled copy")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="replication-throttle-bench-") as tmp:
        root = Path(tmp)
        with ZooKeeperServer(root / "zookeeper", force_sync=False) as zk_server:
            figures = trio.run(
                measure, zk_server.connect_string + "/bench", root, args.megabytes, args.seconds
            )
    print(json.dumps(figures))


if __name__ == "__main__":
    main()

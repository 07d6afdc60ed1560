"""Group coordinator benchmark: rebalance time after a leave, and OffsetCommit rate.

Runs a real ZooKeeper and three ``minibroker broker`` processes, then drives the group
APIs with raw msgpack requests (three members, each on its own connection, heartbeating
every ``--heartbeat-ms`` and rejoining as soon as a heartbeat answers
REBALANCE_IN_PROGRESS, as Kafka's consumer does) and measures:

``leave_to_stable_s``  from one member's LeaveGroup to the group being Stable again
    (the last remaining member's SyncGroup answered), over ``--rounds`` leaves (the
    member comes back as a new one between rounds) [target <= 1 s, members' rebalance
    timeout 3 s]: median and max;
``commits_per_s``  sequential OffsetCommit round trips (one partition, acks=all on a
    replication factor 3 offsets topic) from one connection;
``commits_per_s_8_connections``  the same from 8 connections at once.

Prints one JSON object on its last line. Figures depend on how busy the machine is.

    python3 bench/group_bench.py [--rounds 5] [--heartbeat-ms 100] [--commits 2000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from minibroker.net.connection import Connection
from minibroker.protocol.api import ApiKey
from minibroker.zk.server import ZooKeeperServer

BROKERS = (1, 2, 3)
GROUP = "bench-group"
REBALANCE_TIMEOUT_MS = 3000
SESSION_TIMEOUT_MS = 10_000
REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
REBALANCE_IN_PROGRESS = 27
MEMBER_ID_REQUIRED = 79


def start_broker(
    broker_id: int, root: Path, zk_connect: str
) -> tuple[subprocess.Popen[bytes], Path]:
    out = root / f"broker-{broker_id}.log"
    command = [
        sys.executable, "-m", "minibroker", "broker",
        "--broker-id", str(broker_id),
        "--listen", "127.0.0.1:0",
        "--log-dirs", str(root / f"broker-{broker_id}" / "logs"),
        "--zookeeper", zk_connect,
        "--set", "group.initial.rebalance.delay.ms=0",
        "--set", "offsets.topic.num.partitions=10",
        "--log-level", "INFO",
    ]  # fmt: skip
    output = out.open("wb")
    proc = subprocess.Popen(command, cwd=REPO, env=ENV, stdout=output, stderr=subprocess.STDOUT)
    return proc, out


async def broker_port(out: Path) -> int:
    with trio.fail_after(60):
        while True:
            for line in out.read_text(errors="replace").splitlines():
                if "serving on port" in line:
                    return int(line.split("serving on port")[1].split()[0])
            await trio.sleep(0.05)


async def find_coordinator(ports: list[int]) -> int:
    with trio.fail_after(60):
        while True:
            async with Connection("127.0.0.1", ports[0]) as conn:
                answer = await conn.request(ApiKey.FIND_COORDINATOR, {"key": GROUP})
            if answer["error_code"] == 0:
                port: int = answer["port"]
                return port
            await trio.sleep(0.1)


class Member:
    def __init__(self, conn: Connection, name: str) -> None:
        self.conn = conn
        self.name = name
        self.member_id = ""
        self.generation = -1
        self.rejoin = trio.Event()

    def join_body(self) -> dict[str, Any]:
        return {
            "group_id": GROUP,
            "session_timeout_ms": SESSION_TIMEOUT_MS,
            "rebalance_timeout_ms": REBALANCE_TIMEOUT_MS,
            "member_id": self.member_id,
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": self.name.encode()}],
        }

    async def join_and_sync(self) -> float:
        """Join (with the member-id round trip) and sync; returns when synced."""
        while True:
            answer = await self.conn.request(ApiKey.JOIN_GROUP, self.join_body(), timeout=30)
            if answer["error_code"] == MEMBER_ID_REQUIRED:
                self.member_id = answer["member_id"]
                continue
            if answer["error_code"] != 0:
                await trio.sleep(0.01)
                continue
            self.member_id = answer["member_id"]
            self.generation = answer["generation_id"]
            members = answer["members"]
            body = {
                "group_id": GROUP,
                "generation_id": self.generation,
                "member_id": self.member_id,
                "assignments": [{"member_id": m["member_id"], "assignment": b"p"} for m in members],
            }
            synced = await self.conn.request(ApiKey.SYNC_GROUP, body, timeout=30)
            if synced["error_code"] == 0:
                return time.perf_counter()

    async def heartbeat_loop(
        self, interval_s: float, synced: trio.MemorySendChannel[float]
    ) -> None:
        while True:
            await trio.sleep(interval_s)
            body = {
                "group_id": GROUP,
                "generation_id": self.generation,
                "member_id": self.member_id,
            }
            answer = await self.conn.request(ApiKey.HEARTBEAT, body, timeout=10)
            if answer["error_code"] == REBALANCE_IN_PROGRESS:
                await synced.send(await self.join_and_sync())


async def rebalance_rounds(port: int, rounds: int, heartbeat_ms: int) -> list[float]:
    figures = []
    async with trio.open_nursery() as nursery:
        stayers = [Member(await _connect(port), f"member-{i}") for i in range(2)]
        send, receive = trio.open_memory_channel[float](16)
        async with trio.open_nursery() as joining:
            for m in stayers:
                joining.start_soon(m.join_and_sync)
        for m in stayers:
            nursery.start_soon(m.heartbeat_loop, heartbeat_ms / 1000, send)
        for r in range(rounds):
            leaver = Member(await _connect(port), f"leaver-{r}")
            await leaver.join_and_sync()  # the stayers rejoin through their heartbeats
            with trio.fail_after(30):
                for _ in stayers:
                    await receive.receive()
            await trio.sleep(0.5)  # let the group settle in Stable
            left = time.perf_counter()
            await leaver.conn.request(
                ApiKey.LEAVE_GROUP,
                {"group_id": GROUP, "members": [{"member_id": leaver.member_id}]},
            )
            with trio.fail_after(30):
                done = max([await receive.receive() for _ in stayers])
            figures.append(done - left)
            await leaver.conn.aclose()
        nursery.cancel_scope.cancel()
    return figures


async def _connect(port: int) -> Connection:
    conn = Connection("127.0.0.1", port)
    await conn.connect()
    return conn


async def committer_ports(bootstrap: int, count: int) -> list[int]:
    """The coordinator port of each committer's group (they spread over the brokers)."""
    ports = []
    async with Connection("127.0.0.1", bootstrap) as conn:
        for i in range(count):
            with trio.fail_after(60):
                while True:
                    a = await conn.request(ApiKey.FIND_COORDINATOR, {"key": f"committer-{i}"})
                    if a["error_code"] == 0:
                        ports.append(a["port"])
                        break
                    await trio.sleep(0.1)
    return ports


async def commit_rate(ports: list[int], commits: int) -> float:
    """Sequential commits on one connection per port (each its own group)."""

    async def committer(index: int, port: int, count: int) -> None:
        async with Connection("127.0.0.1", port) as conn:
            for i in range(count):
                body = {
                    "group_id": f"committer-{index}",
                    "topics": [
                        {
                            "name": "t",
                            "partitions": [{"partition_index": 0, "committed_offset": i}],
                        }
                    ],
                }
                answer = await conn.request(ApiKey.OFFSET_COMMIT, body)
                code = answer["topics"][0]["partitions"][0]["error_code"]
                if code != 0:
                    raise RuntimeError(f"commit failed with error {code}")

    per_connection = commits // len(ports)
    started = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for i, port in enumerate(ports):
            nursery.start_soon(committer, i, port, per_connection)
    return per_connection * len(ports) / (time.perf_counter() - started)


async def measure(zk_connect: str, root: Path, args: argparse.Namespace) -> dict[str, Any]:
    procs = [start_broker(b, root, zk_connect) for b in BROKERS]
    try:
        ports = [await broker_port(out) for _, out in procs]
        port = await find_coordinator(ports)
        leaves = await rebalance_rounds(port, args.rounds, args.heartbeat_ms)
        commit_ports = await committer_ports(ports[0], 8)
        one = await commit_rate(commit_ports[:1], args.commits)
        eight = await commit_rate(commit_ports, args.commits)
        return {
            "leave_to_stable_s_median": round(statistics.median(leaves), 3),
            "leave_to_stable_s_max": round(max(leaves), 3),
            "leave_to_stable_s_all": [round(x, 3) for x in leaves],
            "heartbeat_ms": args.heartbeat_ms,
            "commits_per_s": round(one),
            "commits_per_s_8_connections": round(eight),
            "load_average": os.getloadavg(),
        }
    finally:
        for proc, _ in procs:
            proc.kill()
            proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--heartbeat-ms", type=int, default=100)
    parser.add_argument("--commits", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        with ZooKeeperServer(root / "zookeeper", force_sync=False) as zk_server:
            figures = trio.run(measure, zk_server.connect_string + "/bench", root, args)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()

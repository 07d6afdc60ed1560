"""Replicated produce: 3 brokers on this machine, RF 3, acks=all, min.insync.replicas 2.

    python3 bench/replication_bench.py [--quick]

Starts a ZooKeeper (pyspark's jars) and three ``minibroker broker`` processes, creates
the topics through CreateTopics, waits for full ISRs, then measures:

- produce_mb_s: 1 MiB pre-encoded batches (1024 x 1 KiB records), acks=all, to a
  3-partition topic whose leaders are spread over the brokers; each leader gets
  ``WINDOW`` requests in flight on one connection;
- p50_ms / p99_ms / max_ms: 100-byte batches with acks=all sent open-loop at
  ``RATE_PER_S`` per second to one partition, latency from send to answer;
- catchup_s: a follower is stopped (SIGSTOP) while ``--behind`` MiB are produced, then
  resumed; time from SIGCONT until the partition state znode lists it in the ISR again
  (catchup_mb_s is the data it fetched divided by that time).

Prints one JSON object on its last line.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from minibroker.net.connection import Connection
from minibroker.protocol.api import ApiKey
from minibroker.protocol.records import encode_values
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.zk.client import open_zk_client
from minibroker.zk.data import KafkaZkClient
from minibroker.zk.server import ZooKeeperServer
from tests.support.cluster import ProcessCluster

MIB = 1 << 20
WINDOW = 4
"""Requests in flight per leader: enough to keep the follower fetch pipeline busy."""
RATE_PER_S = 1000
WARM_UP_ROUNDS = 200
WARM_S = 0.02
"""Latency is measured once one acks=all produce completes this fast (followers ready)."""
PROPERTIES = {
    "min.insync.replicas": 2,
    "replica.fetch.wait.max.ms": 500,
    "replica.lag.time.max.ms": 30_000,
    "zookeeper.session.timeout.ms": 30_000,
    "log.segment.bytes": 512 * MIB,
    "message.max.bytes": 2 * MIB,  # a 1 MiB batch of 1 KiB records is ~1.01 MiB
}


def big_batch() -> bytes:
    return encode_values([b"x" * 1024] * 1024, timestamp=int(time.time() * 1000))


def produce_body(topic: str, partition: int, records: bytes) -> dict[str, Any]:
    return {
        "acks": -1,
        "timeout_ms": 30_000,
        "topics": [{"name": topic, "partitions": [{"index": partition, "records": records}]}],
    }


async def partition_states(data: KafkaZkClient, topic: str, partitions: int) -> dict[int, Any]:
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    states = await data.read_partition_states(tps)
    return {tp.partition: states[tp] for tp in tps if tp in states}


async def wait_full_isr(cluster: ProcessCluster, data: KafkaZkClient, topic: str, n: int) -> None:
    async def full() -> bool:
        states = await partition_states(data, topic, n)
        return len(states) == n and all(len(s.isr) == 3 for s in states.values())

    await cluster.wait_until(full, f"full ISRs of {topic}", timeout=120)


async def serving(cluster: ProcessCluster, leader: int, topic: str, partition: int) -> None:
    async def ok() -> bool:
        body = {
            "topics": [
                {"name": topic, "partitions": [{"partition_index": partition, "timestamp": -1}]}
            ]
        }
        answer = await cluster.request(leader, ApiKey.LIST_OFFSETS, body)
        return bool(answer["topics"][0]["partitions"][0]["error_code"] == 0)

    await cluster.wait_until(ok, "the leader to serve")


async def throughput(cluster: ProcessCluster, data: KafkaZkClient, total_mib: int) -> float:
    states = await partition_states(data, "tput", 3)
    payload = big_batch()
    per_partition = max(total_mib // 3, WINDOW)
    for p, state in states.items():
        await serving(cluster, state.leader, "tput", p)

    async def drive(partition: int, leader: int) -> None:
        port = cluster.brokers[leader].port
        async with Connection("127.0.0.1", port) as conn:
            sent = 0
            lock = trio.Lock()

            async def lane() -> None:
                nonlocal sent
                while True:
                    async with lock:
                        if sent >= per_partition:
                            return
                        sent += 1
                    body = produce_body("tput", partition, payload)
                    response = await conn.request(ApiKey.PRODUCE, body, timeout=60)
                    code = response["topics"][0]["partitions"][0]["error_code"]
                    assert code == 0, response

            async with trio.open_nursery() as nursery:
                for _ in range(WINDOW):
                    nursery.start_soon(lane)

    start = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for p, state in states.items():
            nursery.start_soon(drive, p, state.leader)
    elapsed = time.perf_counter() - start
    return per_partition * 3 * len(payload) / MIB / elapsed


async def latency(cluster: ProcessCluster, data: KafkaZkClient, seconds: float) -> list[float]:
    state = (await partition_states(data, "lat", 1))[0]
    await serving(cluster, state.leader, "lat", 0)
    records = encode_values([b"y" * 100], timestamp=int(time.time() * 1000))
    body = produce_body("lat", 0, records)
    samples: list[float] = []
    async with Connection("127.0.0.1", cluster.brokers[state.leader].port) as conn:
        # Warm up: until followers finished their first truncation round, acks=all waits
        # on them; that is start-up, not the steady state this figure is about.
        for _ in range(WARM_UP_ROUNDS):
            start = time.perf_counter()
            await conn.request(ApiKey.PRODUCE, body, timeout=30)
            if time.perf_counter() - start < WARM_S:
                break

        async def one() -> None:
            start = time.perf_counter()
            response = await conn.request(ApiKey.PRODUCE, body, timeout=30)
            samples.append((time.perf_counter() - start) * 1000)
            assert response["topics"][0]["partitions"][0]["error_code"] == 0, response

        count = int(seconds * RATE_PER_S)
        begin = trio.current_time()
        async with trio.open_nursery() as nursery:
            for i in range(count):
                await trio.sleep_until(begin + i / RATE_PER_S)
                nursery.start_soon(one)
    return sorted(samples)


async def catch_up(cluster: ProcessCluster, data: KafkaZkClient, behind_mib: int) -> float:
    state = (await partition_states(data, "catchup", 1))[0]
    await serving(cluster, state.leader, "catchup", 0)
    follower = next(b for b in state.isr if b != state.leader)
    cluster.pause(follower)
    payload = big_batch()
    async with Connection("127.0.0.1", cluster.brokers[state.leader].port) as conn:

        async def lane(n: int) -> None:
            for _ in range(n):
                response = await conn.request(
                    ApiKey.PRODUCE, produce_body("catchup", 0, payload), timeout=60
                )
                assert response["topics"][0]["partitions"][0]["error_code"] == 0, response

        async with trio.open_nursery() as nursery:
            for _ in range(WINDOW):
                nursery.start_soon(lane, behind_mib // WINDOW)

    # Wait for the ISR shrink to be written first, so "rejoined" means caught up.
    async def shrunk() -> bool:
        return follower not in (await partition_states(data, "catchup", 1))[0].isr

    start_wait = time.perf_counter()
    while not await shrunk():
        if time.perf_counter() - start_wait > 120:
            raise RuntimeError("the paused follower never left the ISR")
        await trio.sleep(0.05)
    cluster.resume(follower)
    start = time.perf_counter()

    async def rejoined() -> bool:
        return follower in (await partition_states(data, "catchup", 1))[0].isr

    while not await rejoined():
        await trio.sleep(0.02)
    return time.perf_counter() - start


async def main(args: argparse.Namespace) -> dict[str, Any]:
    total, seconds, behind = (48, 2.0, 128) if args.quick else (600, 5.0, 1024)
    # Shrink quickly in the catch-up phase only (its own topic shares the broker setting).
    props = {**PROPERTIES, "replica.lag.time.max.ms": 5000}
    with tempfile.TemporaryDirectory() as tmp, ZooKeeperServer(Path(tmp) / "zk") as zk:
        root = Path(tmp)
        async with open_zk_client(
            zk.connect_string, session_timeout=30, connect_timeout=60
        ) as client:
            await client.ensure_path("/bench")
        connect = zk.connect_string + "/bench"
        cluster = ProcessCluster(root, connect, size=3, properties=props)
        try:
            await cluster.start_all()
            async with open_zk_client(connect, session_timeout=30, connect_timeout=60) as client:
                data = KafkaZkClient(client)
                await cluster.create_topic("tput", 3, 3)
                await cluster.create_topic("lat", 1, 3)
                await cluster.create_topic("catchup", 1, 3)
                for topic, n in (("tput", 3), ("lat", 1), ("catchup", 1)):
                    await wait_full_isr(cluster, data, topic, n)
                # Latency first: after the throughput phase the OS is still writing back
                # gigabytes of dirty pages, and fsync-free appends still stall behind that.
                samples = await latency(cluster, data, seconds)
                mb_s = await throughput(cluster, data, total)
                catchup_s = await catch_up(cluster, data, behind)
        finally:
            cluster.close()

    def pick(q: float) -> float:
        return round(samples[min(len(samples) - 1, int(q * len(samples)))], 2)

    return {
        "quick": args.quick,
        "produce_mb_s": round(mb_s, 1),
        "produced_mib": total,
        "latency_rate_per_s": RATE_PER_S,
        "p50_ms": pick(0.50),
        "p99_ms": pick(0.99),
        "max_ms": round(samples[-1], 2),
        "catchup_behind_mib": behind,
        "catchup_s": round(catchup_s, 2),
        "catchup_mb_s": round(behind / catchup_s, 1),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, shorter runs")
    figures = trio.run(main, parser.parse_args())
    print(json.dumps(figures))

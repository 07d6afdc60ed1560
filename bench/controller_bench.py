"""Controller benchmark: how long partitions are unavailable when brokers die or stop.

Runs a real ZooKeeper and three ``minibroker broker`` processes
(``zookeeper.session.timeout.ms=6000``), creates a topic of PARTITIONS partitions with
replication factor 3, then measures (the targets in brackets):

``leader_kill_to_produce_s``  SIGKILL of partition 0's leader (not the controller) until
    a new leader accepts a produce to partition 0 [<= 7 s]; includes the session
    timeout, since the controller learns of the death from ZooKeeper;
``controlled_shutdown_max_unavailable_s``  SIGTERM of a broker (controlled shutdown):
    the longest any partition it led could not take a produce [<= 0.5 s];
``controller_failover_s``  SIGKILL of the controller's broker, from the moment its
    session ends (/controller disappears) until a new controller has given every
    partition it led a live leader [<= 2 s];
and prints one JSON object with the figures on its last line.

    python3 bench/controller_bench.py [--partitions 100]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
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
from minibroker.protocol.records import Record, encode_batch
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.zk.client import open_zk_client
from minibroker.zk.data import KafkaZkClient
from minibroker.zk.server import ZooKeeperServer

SESSION_TIMEOUT_MS = 6000
BROKERS = (1, 2, 3)
POLL_S = 0.005
"""Probe interval: the resolution of every figure."""
READY_TIMEOUT_S = 60.0
REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def start_broker(broker_id: int, root: Path, zk_connect: str) -> subprocess.Popen[bytes]:
    log_dir = root / f"broker-{broker_id}"
    log_dir.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable, "-m", "minibroker", "broker",
        "--broker-id", str(broker_id),
        "--listen", "PLAINTEXT://127.0.0.1:0",
        "--log-dirs", str(log_dir / "logs"),
        "--zookeeper", zk_connect,
        "--set", f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}",
        "--set", "auto.leader.rebalance.enable=false",
        "--log-level", "WARNING",
    ]  # fmt: skip
    output = open(root / f"broker-{broker_id}.log", "wb")  # noqa: SIM115 - lives with the child
    return subprocess.Popen(command, cwd=REPO, env=ENV, stdout=output, stderr=subprocess.STDOUT)


async def wait_for(condition: Any, what: str, timeout: float = READY_TIMEOUT_S) -> Any:
    with trio.move_on_after(timeout):
        while True:
            value = await condition()
            if value:
                return value
            await trio.sleep(POLL_S)
    raise TimeoutError(f"timed out waiting for {what}")


def one_record_produce(tp: TopicPartition) -> dict[str, Any]:
    """A Produce body (acks=1) of one tiny record to ``tp``: the availability probe."""
    return {
        "acks": 1,
        "timeout_ms": 1000,
        "topics": [{"name": tp.topic, "partitions": [
            {"index": tp.partition, "records": encode_batch([Record(b"x")])}
        ]}],
    }  # fmt: skip


async def produce_once(data: KafkaZkClient, tp: TopicPartition, exclude: set[int]) -> bool:
    """One produce to the leader ZooKeeper names; True if it was accepted."""
    state = (await data.read_partition_states([tp])).get(tp)
    if state is None or state.leader < 0 or state.leader in exclude:
        return False
    broker = (await data.get_live_brokers()).get(state.leader)
    if broker is None:
        return False
    body = one_record_produce(tp)
    try:
        async with Connection(broker.host, broker.port, connect_timeout=1) as conn:
            response = await conn.request(ApiKey.PRODUCE, body, timeout=1)
    except Exception:
        return False
    return bool(response["topics"][0]["partitions"][0]["error_code"] == 0)


async def leaders(data: KafkaZkClient, topic: str, partitions: int) -> dict[int, int]:
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    return {tp.partition: s.leader for tp, s in (await data.read_partition_states(tps)).items()}


async def measure(zk_connect: str, root: Path, partitions: int) -> dict[str, Any]:
    """Each scenario gets a fresh topic: without replication a replica that
    left the ISR never rejoins it, so a fresh topic is the only full ISR."""
    procs = {b: start_broker(b, root, zk_connect) for b in BROKERS}
    try:
        async with open_zk_client(zk_connect) as zk:
            data = KafkaZkClient(zk)
            await data.create_top_level_paths()

            async def all_registered() -> bool:
                return set(await data.get_live_brokers()) == set(BROKERS)

            async def restart(broker_id: int) -> None:
                procs[broker_id].wait()
                procs[broker_id] = start_broker(broker_id, root, zk_connect)
                await wait_for(all_registered, f"broker {broker_id} to return")

            async def fresh_topic(name: str) -> tuple[int, dict[int, int]]:
                await wait_for(all_registered, "brokers to register")
                controller = await wait_for(data.get_controller_id, "a controller")
                broker = (await data.get_live_brokers())[controller]
                body = {
                    "topics": [
                        {"name": name, "num_partitions": partitions, "replication_factor": 3}
                    ],
                    "timeout_ms": 30_000,
                }
                async with Connection(broker.host, broker.port) as conn:
                    await conn.request(ApiKey.CREATE_TOPICS, body)

                async def all_led() -> dict[int, int] | None:
                    led = await leaders(data, name, partitions)
                    ok = len(led) == partitions and min(led.values()) >= 0
                    return led if ok else None

                return controller, await wait_for(all_led, f"leaders for {name}")

            figures: dict[str, Any] = {"partitions": partitions}

            # 1. SIGKILL a broker (not the controller) leading a partition.
            controller, led = await fresh_topic("kill")
            victim = next(b for b in led.values() if b != controller)
            tp = TopicPartition("kill", next(p for p, b in led.items() if b == victim))
            await wait_for(lambda: produce_once(data, tp, set()), "a first produce")
            started = time.monotonic()
            procs[victim].send_signal(signal.SIGKILL)
            await wait_for(lambda: produce_once(data, tp, {victim}), "a new leader")
            figures["leader_kill_to_produce_s"] = round(time.monotonic() - started, 3)
            await restart(victim)

            # 2. Controlled shutdown (SIGTERM) of a broker (not the controller).
            controller, led = await fresh_topic("stop")
            stopping = next(b for b in led.values() if b != controller)
            theirs = [TopicPartition("stop", p) for p, b in led.items() if b == stopping]
            longest = await max_gap_while(
                data, theirs, lambda: procs[stopping].send_signal(signal.SIGTERM),
                lambda: procs[stopping].poll() is not None,
            )  # fmt: skip
            figures["controlled_shutdown_max_unavailable_s"] = round(longest, 3)
            figures["controlled_shutdown_partitions"] = len(theirs)
            await restart(stopping)

            # 3. SIGKILL the controller; time from the end of its session.
            controller, led = await fresh_topic("failover")
            its = [p for p, b in led.items() if b == controller]
            procs[controller].send_signal(signal.SIGKILL)

            async def session_over() -> bool:
                return await data.get_controller_id() != controller

            await wait_for(session_over, "the old controller's session to end")
            ended = time.monotonic()

            async def failed_over() -> bool:
                now = await leaders(data, "failover", partitions)
                return all(now[p] not in (controller, -1) for p in its)

            await wait_for(failed_over, "leaders for the old controller's partitions")
            figures["controller_failover_s"] = round(time.monotonic() - ended, 3)
            figures["controller_failover_partitions_moved"] = len(its)
            return figures
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
            proc.wait()


PROBE_TIMEOUT_S = 0.25
"""A produce to a broker that is going away must not hold up its partition's probe."""
PROBE_INTERVAL_S = 0.02
"""Pause between one partition's produces: the figure's resolution, and light enough
(50 produces/s per partition) that the probe does not slow the brokers it measures."""


async def max_gap_while(
    data: KafkaZkClient, partitions: list[TopicPartition], act: Any, done: Any
) -> float:
    """Produce to every partition in its own loop while ``act`` takes effect; the
    longest time any partition went without an accepted produce. One task keeps the
    leaders (read from ZooKeeper, all at once) fresh; the probes share one pipelined
    connection per broker, so the probe's own cost stays small next to the gaps."""
    # From each partition's first accepted produce on: a fresh topic's leaders are in
    # ZooKeeper before the brokers have created its logs, and that wait is not a gap.
    last_ok: dict[TopicPartition, float] = {}
    all_serving = trio.Event()
    longest = 0.0
    leader_of: dict[TopicPartition, int] = {}
    connections: dict[int, Connection] = {}
    brokers = await data.get_live_brokers()

    async def watch_leaders() -> None:
        while True:
            states = await data.read_partition_states(partitions)
            leader_of.update({tp: s.leader for tp, s in states.items()})
            await trio.sleep(POLL_S)

    async def connection(broker_id: int) -> Connection | None:
        conn = connections.get(broker_id)
        if conn is None or not conn.is_usable:
            broker = brokers.get(broker_id)
            if broker is None:
                return None
            conn = connections[broker_id] = Connection(broker.host, broker.port)
            await conn.connect()
        return conn

    async def probe(tp: TopicPartition, stop_at: list[float]) -> None:
        nonlocal longest
        body = one_record_produce(tp)
        while not stop_at or last_ok.get(tp, 0.0) < stop_at[0]:
            leader = leader_of.get(tp, -1)
            try:
                conn = await connection(leader) if leader >= 0 else None
                if conn is not None:
                    response = await conn.request(ApiKey.PRODUCE, body, timeout=PROBE_TIMEOUT_S)
                    if response["topics"][0]["partitions"][0]["error_code"] == 0:
                        ok_at = time.monotonic()
                        longest = max(longest, ok_at - last_ok.get(tp, ok_at))
                        last_ok[tp] = ok_at
                        if len(last_ok) == len(partitions):
                            all_serving.set()
            except Exception:
                connections.pop(leader, None)
            await trio.sleep(PROBE_INTERVAL_S)

    stop_at: list[float] = []
    with trio.move_on_after(READY_TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch_leaders)
            async with trio.open_nursery() as probes:
                for tp in partitions:
                    probes.start_soon(probe, tp, stop_at)
                with trio.fail_after(READY_TIMEOUT_S / 2):  # inside the outer timeout
                    await all_serving.wait()
                await trio.sleep(0.2)
                act()
                while not done():
                    await trio.sleep(POLL_S)
                stop_at.append(time.monotonic())
            nursery.cancel_scope.cancel()
    for conn in connections.values():
        await conn.aclose()
    return longest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        with ZooKeeperServer(root / "zookeeper", force_sync=False) as zk_server:
            figures = trio.run(measure, zk_server.connect_string + "/bench", root, args.partitions)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()

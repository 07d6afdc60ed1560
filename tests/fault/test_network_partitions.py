"""Network faults: partitions, one-way cuts and slow lossy links never lose an acks=all
write, and the cluster converges once the network heals.

ZooKeeper and three brokers (RF 3, min.insync.replicas 2, no unclean elections, the
fault tests' 4 s ZooKeeper session and 3 s replica.lag.time.max.ms) each run in their own
network namespace (tests/support/netns_cluster.py); the test's requests come from a
fourth, the client's. While producers write unique values, a scenario cuts links; then
the network heals, the test waits until every ISR is full and every HW has reached its
LEO, reads every partition back and hands it to the durability checker
(tests/support/durability.py: every acknowledged value at its offset, no offset with two
values, no duplicate without a retry, offsets only growing). Three topics:

- ``durable``: one tests/fault/test_durability.py ``Producer`` per partition (acks=all,
  retrying, each acknowledgement noted with the broker that gave it and when);
- ``idem``: idempotent client ``Producer``s inside the client namespace
  (tests/fault/idempotent_workload.py), checked in the idempotent mode (no value twice,
  retried or not; each producer's values in send order) and no delivery may fail;
- ``acks1`` (leader scenario only): acks=1 producers, whose losses are counted.

Each scenario prints its figures (acknowledged, lost, the longest write stall and the
windows with no acknowledgement at all) and appends them as a JSON line to
``<tmp_path>/results.jsonl``. ``MINIBROKER_NEMESIS_DURATION_S`` sets how long the random
nemesis runs per seed (15 s by default; 60 for a long run), ``MINIBROKER_NEMESIS_SEEDS``
its seeds (``1,2``)::

    MINIBROKER_NEMESIS_DURATION_S=60 MINIBROKER_NEMESIS_SEEDS=1,2,3,4,5 \\
        .venv/bin/python -m pytest tests/fault/test_network_partitions.py -k random -s
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import random
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import trio

from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import KafkaError
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.zk.client import open_zk_client
from minibroker.zk.data import KafkaZkClient
from tests.fault.test_durability import (
    PARTITIONS,
    TOPIC,
    Ack,
    Producer,
    heal,
    read_partition,
    wait_in_sync,
)
from tests.support.cluster import FAULT_PROPERTIES
from tests.support.durability import DurabilityChecker, DurabilityReport, ReadRecord
from tests.support.netns_cluster import NetnsCluster, Node

SEEDS = [1, 2]
PROPERTIES = {"min.insync.replicas": 2, "unclean.leader.election.enable": "false"}
SESSION_TIMEOUT_S = FAULT_PROPERTIES["zookeeper.session.timeout.ms"] / 1000
LAG_MAX_S = FAULT_PROPERTIES["replica.lag.time.max.ms"] / 1000
STALL_BOUND_S = LAG_MAX_S + LAG_MAX_S / 2 + 1.0
"""The longest a follower cut from its leader may hold up acks=all writes: it leaves the
ISR once it lags replica.lag.time.max.ms, noticed by a check that runs every half of
that (as in Kafka), plus 1 s for the ZooKeeper write and a loaded machine."""
ACKS1_TOPIC = "acks1"
REPLICATION_WINDOW_S = 1.0
"""How long an acks=1 write may sit on its leader alone before a follower fetches it
(followers long-poll, so milliseconds when idle; generous for a loaded 2-core machine)."""
IDEMPOTENT_TOPIC = "idem"
IDEMPOTENT_PRODUCERS = 2
WORKLOAD_START_TIMEOUT_S = 60.0  # a Python start and the first metadata, on a loaded machine
WORKLOAD_FINISH_TIMEOUT_S = 150.0  # the workload's delivery timeout, and then some
WARM_UP_S = 1.5  # writes flow before the fault, so it cuts through traffic
AFTER_HEAL_S = 2.0  # writes keep flowing after the heal: the cluster must take them
ELECTION_TIMEOUT_S = SESSION_TIMEOUT_S + 20.0  # a session expiry, then the controller
GAP_S = 1.0
"""A stretch this long with no acknowledgement on a partition counts as unavailable."""
CONVERGE_TIMEOUT_S = 60.0  # a new controller, re-registrations and every ISR refilled
ZK_SESSION_S = 30.0  # the test's own ZooKeeper session: it outlives every fault here
ACTIVE_CONTROLLER = "kafka_controller_kafkacontroller_activecontrollercount"
NEMESIS_S = float(os.environ.get("MINIBROKER_NEMESIS_DURATION_S", "15"))
MAX_STACKED = 2  # faults the random nemesis lets overlap before it heals
NEMESIS_SEEDS = [int(s) for s in os.environ.get("MINIBROKER_NEMESIS_SEEDS", "1,2").split(",")]


@dataclass
class Run:
    """One scenario's cluster, ZooKeeper view, producers and clock. Topics: ``durable``
    (acks=all, one producer per partition), ``idem`` (idempotent producers in the
    client namespace) and, when asked for, ``acks1`` (acks=1)."""

    cluster: NetnsCluster
    data: KafkaZkClient
    producers: list[Producer]
    checkers: dict[str, DurabilityChecker]
    started: float
    records: dict[str, list[ReadRecord]] = field(default_factory=dict)
    """Every topic read back after the heal (filled in when the run ends)."""
    failed_deliveries: list[str] = field(default_factory=list)
    """Idempotent sends that failed for good (none may)."""

    def acks(self, topic: str = TOPIC) -> list[Ack]:
        return [a for p in self.producers if p.topic == topic for a in p.acks]

    def report(self, topic: str = TOPIC) -> DurabilityReport:
        return self.checkers[topic].check(self.records[topic])

    async def leader(self, partition: int, topic: str = TOPIC) -> tuple[int, int]:
        """(leader, leader epoch) of a partition as ZooKeeper has it."""
        tp = TopicPartition(topic, partition)
        state = (await self.data.read_partition_states([tp]))[tp]
        return state.leader, state.leader_epoch

    async def isr(self, partition: int, topic: str = TOPIC) -> list[int]:
        tp = TopicPartition(topic, partition)
        return list((await self.data.read_partition_states([tp]))[tp].isr)

    def since(self, moment: float) -> float:
        return round(moment - self.started, 2)


class IdempotentWorkload:
    """tests/fault/idempotent_workload.py inside the client namespace."""

    def __init__(self, cluster: NetnsCluster, out_path: Path, seed: int) -> None:
        self.out_path = out_path
        argv = [
            *(sys.executable, "-m", "tests.fault.idempotent_workload"),
            *("--bootstrap", cluster.bootstrap, "--topic", IDEMPOTENT_TOPIC),
            *("--seed", str(seed), "--producers", str(IDEMPOTENT_PRODUCERS)),
        ]
        with out_path.open("wb") as out:
            self.process = cluster.client_process(argv, stdin=subprocess.PIPE, stdout=out)

    async def ready(self) -> None:
        with trio.move_on_after(WORKLOAD_START_TIMEOUT_S):
            while self.process.poll() is None:
                if self.out_path.read_bytes().startswith(b"ready\n"):
                    return
                await trio.sleep(0.1)
        raise AssertionError(f"the idempotent workload did not start: {self.output()}")

    async def finish(self) -> None:
        """Stop writing and wait until every delivery settled."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        await trio.to_thread.run_sync(self.process.wait, WORKLOAD_FINISH_TIMEOUT_S)
        assert self.process.returncode == 0, self.output()

    def replay(self, checker: DurabilityChecker, failures: list[str]) -> None:
        for line in self.out_path.read_text().splitlines()[1:]:
            event = json.loads(line)
            if "attempted" in event:
                checker.attempted(event["attempted"].encode(), producer=event["producer"])
            elif "acked" in event:
                checker.acknowledged(
                    event["acked"].encode(), event["topic"], event["partition"], event["offset"]
                )
            else:
                failures.append(event["failed"])

    def output(self) -> str:
        return self.out_path.read_text(errors="replace")[-2000:]


@contextlib.asynccontextmanager
async def running(tmp_path: Path, seed: int, *, acks1: bool = False) -> AsyncIterator[Run]:
    """A healthy cluster with every producer writing. When the scenario is done: heal,
    wait for full ISRs, write a little more, stop the producers and read every topic
    back into ``run.records``."""
    cluster = NetnsCluster(tmp_path, properties=PROPERTIES, rng=random.Random(seed))
    topics = [TOPIC, IDEMPOTENT_TOPIC, *([ACKS1_TOPIC] if acks1 else [])]
    checkers = {topic: DurabilityChecker() for topic in topics}
    checkers[IDEMPOTENT_TOPIC] = DurabilityChecker(idempotent=True)
    try:
        await cluster.start_all()
        for topic in topics:
            await cluster.create_topic(topic, PARTITIONS, 3)
        async with open_zk_client(cluster.zk_connect_local, session_timeout=ZK_SESSION_S) as zk:
            data = KafkaZkClient(zk)
            for topic in topics:
                await heal(cluster, data, topic)
            producers = [
                Producer(cluster, checkers[topic], f"{topic}-{p}", acks=acks, topic=topic)
                for topic, acks in [(TOPIC, -1), (ACKS1_TOPIC, 1)]
                if topic in topics
                for p in range(PARTITIONS)
            ]
            idempotent = IdempotentWorkload(cluster, tmp_path / "idempotent.jsonl", seed)
            await idempotent.ready()
            run = Run(cluster, data, producers, checkers, time.monotonic())
            async with trio.open_nursery() as nursery:
                for producer in producers:
                    nursery.start_soon(producer.run, seed, [int(producer.name.split("-")[-1])])
                await trio.sleep(WARM_UP_S)
                yield run
                cluster.heal()
                for topic in topics:  # (HW = LEO only once the writes stop)
                    await wait_in_sync(cluster, data, topic)
                await trio.sleep(AFTER_HEAL_S)
                nursery.cancel_scope.cancel()
            await idempotent.finish()
            idempotent.replay(checkers[IDEMPOTENT_TOPIC], run.failed_deliveries)
            for topic in topics:
                await heal(cluster, data, topic)  # the last writes replicated too
                run.records[topic] = [
                    record
                    for partition in range(PARTITIONS)
                    for record in await read_partition(cluster, partition, topic)
                ]
    finally:
        cluster.close()


async def wait_for(condition: Callable[[], Awaitable[bool]], what: str, timeout: float) -> float:
    """Poll ``condition`` until true; when it became true (``time.monotonic()``)."""
    with trio.move_on_after(timeout):
        while not await condition():
            await trio.sleep(0.1)
        return time.monotonic()
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def unavailability(run: Run, start: float, end: float, topic: str = TOPIC) -> list[list[float]]:
    """Windows of at least GAP_S in [start, end] with no acknowledgement on some partition:
    ``[partition, from (s since the run started), length (s)]``."""
    windows = []
    for partition in range(PARTITIONS):
        times = sorted(a.acked_at for a in run.acks(topic) if a.partition == partition)
        edges = [start, *(t for t in times if start < t < end), end]
        for before, after in itertools.pairwise(edges):
            if after - before >= GAP_S:
                windows.append([partition, run.since(before), round(after - before, 2)])
    return windows


def longest_stall(run: Run, partition: int, start: float, end: float) -> float:
    """The longest time in [start, end] a partition went without an acknowledgement."""
    times = sorted(a.acked_at for a in run.acks() if a.partition == partition)
    edges = [start, *(t for t in times if start < t < end), end]
    return max(after - before for before, after in itertools.pairwise(edges))


def report_figures(tmp_path: Path, scenario: str, seed: int, run: Run, **figures: Any) -> None:
    """Print the scenario's figures and append them to ``<tmp_path>/results.jsonl``."""
    report, idempotent = run.report(), run.report(IDEMPOTENT_TOPIC)
    line = {
        "scenario": scenario,
        "seed": seed,
        "acknowledged": report.acknowledged,
        "lost": len(report.lost),
        "violations": len(report.violations),
        "idempotent_acknowledged": idempotent.acknowledged,
        "idempotent_violations": len(idempotent.violations),
        "idempotent_failed_deliveries": len(run.failed_deliveries),
        **figures,
    }
    print(json.dumps(line))
    with (tmp_path / "results.jsonl").open("a") as results:
        results.write(json.dumps(line) + "\n")


# What the brokers logged about a partition's leaders, ISR and truncations.
_HISTORY_WORDS = ("now leading", "now following", "ISR", "truncating", "LeaderAndIsr")
_HISTORY_LINES = 80


def history(run: Run, report: DurabilityReport) -> str:
    """The brokers' log lines on leadership, ISR and truncation of the partitions a
    report's violations name, in time order: what a failure needs explained."""
    partitions = set(re.findall(r"\('(\w+)', (\d+)\)", " ".join(report.violations)))
    if not partitions:
        return ""
    names = tuple(f"{topic}-{partition}" for topic, partition in sorted(partitions))
    lines = []
    for out in sorted(run.cluster.root.glob("broker-*.out")):
        for line in out.read_text(errors="replace").splitlines():
            if any(name in line for name in names) and any(w in line for w in _HISTORY_WORDS):
                lines.append(line)
    lines.sort()  # each line starts with its timestamp
    shown = lines[-_HISTORY_LINES:]
    return f"\nbroker logs on {', '.join(names)} (last {len(shown)}):\n  " + "\n  ".join(shown)


def assert_durable(run: Run, context: object = "") -> None:
    """The acks=all and the idempotent topics kept every promise of the checker."""
    report, idempotent = run.report(), run.report(IDEMPOTENT_TOPIC)
    assert report.ok, f"{context} acks=all: {report.summary()}{history(run, report)}"
    assert idempotent.ok, f"{context} idempotent: {idempotent.summary()}{history(run, idempotent)}"
    assert not run.failed_deliveries, f"{context} failed: {run.failed_deliveries[:5]}"
    assert report.acknowledged and idempotent.acknowledged, f"{context} nothing acknowledged"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("cut_from", ["zookeeper-and-brokers", "zookeeper-only"])
async def test_leader_cut_off_from_zookeeper_acknowledges_no_acks_all_write_after_new_epoch(
    tmp_path: Path, seed: int, cut_from: str
) -> None:
    """The leader of a partition still reaches its clients but not ZooKeeper (nor, in
    the first variant, the other brokers; in the second its followers can still fetch
    from it). acks=all: nothing it acknowledges after the new leader's epoch starts,
    nothing lost. acks=1: what it took while cut off is truncated when it rejoins, and
    the checker reports exactly that as lost."""
    rng = random.Random(seed)
    partition = rng.randrange(PARTITIONS)
    async with running(tmp_path, seed, acks1=True) as run:
        old, old_epoch = await run.leader(partition)
        others: list[Node] = [b for b in run.cluster.brokers if b != old]
        cut_at = time.monotonic()
        if cut_from == "zookeeper-only":
            run.cluster.partition([[old, *others, "client"], [*others, "zk", "client"]])
        else:
            run.cluster.partition([[old, "client"], [*others, "zk", "client"]])

        async def new_leader() -> bool:
            leader, epoch = await run.leader(partition)
            return leader != old and epoch > old_epoch

        new_epoch_at = await wait_for(new_leader, "a new leader", ELECTION_TIMEOUT_S)
        await trio.sleep(2.0)  # the old leader keeps serving its clients meanwhile
        healed_at = time.monotonic()
    report1 = run.report(ACKS1_TOPIC)
    late = [a for a in run.acks() if a.broker == old and a.acked_at > new_epoch_at]
    # acks=1 is acknowledged before followers copy it: a write the old leader took just
    # before the cut (its followers' next fetch never came) is lost the same way.
    acks1_cut_off = {
        a.value
        for a in run.acks(ACKS1_TOPIC)
        if a.broker == old and a.acked_at > cut_at - REPLICATION_WINDOW_S
    }
    acks1_after_epoch = {
        a.value for a in run.acks(ACKS1_TOPIC) if a.broker == old and a.sent_at > new_epoch_at
    }
    report_figures(
        tmp_path,
        f"leader-cut-from-{cut_from}",
        seed,
        run,
        old_leader=old,
        new_leader_after_s=round(new_epoch_at - cut_at, 2),
        acks_all_by_old_leader_after_new_epoch=len(late),
        acks1_acknowledged=report1.acknowledged,
        acks1_by_old_leader_while_cut_off=len(acks1_cut_off),
        acks1_lost=len(report1.lost),
        unavailable=unavailability(run, cut_at, healed_at),
    )
    assert_durable(run)
    # acks=1 loses writes here, as in Kafka: every loss must be one the cut-off leader
    # acknowledged, and loss is the only violation.
    assert set(report1.lost) <= acks1_cut_off, report1.summary()
    assert len(report1.violations) == len(report1.lost), report1.summary()
    if cut_from == "zookeeper-and-brokers":
        # With no follower fetching from it, the old leader cannot complete an acks=all
        # write once the new epoch began, and every acks=1 write it took since is gone.
        # (Reachable by its followers, it may still do both until they learn of the new
        # epoch, a moment after ZooKeeper has it; such writes survive on the new leader.)
        assert not late, f"the old leader {old} acknowledged acks=all writes after the new epoch"
        assert acks1_after_epoch <= set(report1.lost), report1.summary()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("seed", SEEDS)
async def test_follower_cut_from_its_leader_leaves_the_isr_without_stalling_writes(
    tmp_path: Path, seed: int
) -> None:
    """A follower that reaches ZooKeeper and the other broker but not its leader drops
    out of the ISR; acks=all writes stall at most ``STALL_BOUND_S``, then go on."""
    rng = random.Random(seed)
    partition = rng.randrange(PARTITIONS)
    async with running(tmp_path, seed) as run:
        leader, _ = await run.leader(partition)
        follower = rng.choice([b for b in await run.isr(partition) if b != leader])
        cut_at = time.monotonic()
        run.cluster.cut(follower, leader)
        run.cluster.cut(leader, follower)

        async def shrunk() -> bool:
            return follower not in await run.isr(partition)

        shrunk_at = await wait_for(shrunk, "the ISR to shrink", LAG_MAX_S + 20)
        await trio.sleep(2.0)
        healed_at = time.monotonic()
    stall = longest_stall(run, partition, cut_at, healed_at)
    report_figures(
        tmp_path,
        "follower-cut-from-leader",
        seed,
        run,
        leader=leader,
        follower=follower,
        isr_shrunk_after_s=round(shrunk_at - cut_at, 2),
        longest_stall_s=round(stall, 2),
        stall_bound_s=STALL_BOUND_S,
        unavailable=unavailability(run, cut_at, healed_at),
    )
    assert_durable(run)
    assert stall <= STALL_BOUND_S, f"writes to partition {partition} stalled {stall:.1f} s"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("seed", SEEDS)
async def test_isolated_controller_is_replaced_and_fenced(tmp_path: Path, seed: int) -> None:
    """The controller loses ZooKeeper and every broker: another broker becomes the
    controller with a higher epoch; after the heal the old one has resigned (it reports
    no active controller, so its request channel is closed), exactly one controller is
    active, every broker names it, and every partition has a leader and a full ISR."""
    async with running(tmp_path, seed) as run:
        old = await run.data.get_controller_id()
        epoch = await run.data.get_controller_epoch()
        assert old is not None and epoch is not None
        others: list[Node] = [b for b in run.cluster.brokers if b != old]
        cut_at = time.monotonic()
        run.cluster.partition([[old, "client"], [*others, "zk", "client"]])

        async def replaced() -> bool:
            now = await run.data.get_controller_id()
            new_epoch = await run.data.get_controller_epoch()
            return now not in (None, old) and new_epoch is not None and new_epoch[0] > epoch[0]

        elected_at = await wait_for(replaced, "a new controller", ELECTION_TIMEOUT_S)
        new = await run.data.get_controller_id()
        # Cut off, the old controller cannot learn that its session ended: it still
        # believes it is active (as Kafka's does) until it reaches ZooKeeper again.
        old_still_active = await run.cluster.gauge(old, ACTIVE_CONTROLLER)
        run.cluster.heal()
        healed_at = time.monotonic()

        async def one_controller() -> bool:
            """Only the new controller is active, and every broker names it."""
            active = {b: await run.cluster.gauge(b, ACTIVE_CONTROLLER) for b in run.cluster.brokers}
            if active != {b: float(b == new) for b in run.cluster.brokers}:
                return False
            for broker in run.cluster.brokers:
                try:
                    response = await run.cluster.request(broker, ApiKey.METADATA, {"topics": []})
                except KafkaError:
                    return False
                if response["controller_id"] != new:
                    return False
            return True

        fenced_at = await wait_for(one_controller, "the old controller to resign", 30.0)
        assert (await run.data.get_controller_id()) == new
    report_figures(
        tmp_path,
        "controller-isolated",
        seed,
        run,
        old_controller=old,
        new_controller=new,
        new_controller_after_s=round(elected_at - cut_at, 2),
        old_active_while_cut_off=old_still_active,
        old_resigned_after_heal_s=round(fenced_at - healed_at, 2),
        unavailable=unavailability(run, cut_at, healed_at),
    )
    assert_durable(run)


async def converged(run: Run) -> bool:
    """A controller is active, every partition has a leader and a full ISR in ZooKeeper,
    and every broker's metadata names those leaders."""
    if await run.data.get_controller_id() is None:
        return False
    tps = [TopicPartition(t, p) for t in run.checkers for p in range(PARTITIONS)]
    states = await run.data.read_partition_states(tps)
    if any(states[tp].leader not in run.cluster.brokers or len(states[tp].isr) != 3 for tp in tps):
        return False
    body = {"topics": [{"name": t} for t in run.checkers], "allow_auto_topic_creation": False}
    for broker in run.cluster.brokers:
        try:
            response = await run.cluster.request(broker, ApiKey.METADATA, body)
        except KafkaError:
            return False
        for topic in response["topics"]:
            for p in topic["partitions"]:
                if (
                    p["leader_id"]
                    != states[TopicPartition(topic["name"], p["partition_index"])].leader
                ):
                    return False
    return True


@pytest.mark.timeout(150)
@pytest.mark.parametrize("seed", SEEDS)
async def test_cluster_converges_after_zookeeper_is_unreachable_past_the_session_timeout(
    tmp_path: Path, seed: int
) -> None:
    """No broker reaches ZooKeeper for twice the session timeout; after the heal, with no
    manual step, every partition has a leader and a full ISR and writes succeed."""
    async with running(tmp_path, seed) as run:
        brokers: list[Node] = list(run.cluster.brokers)
        cut_at = time.monotonic()
        run.cluster.partition([[*brokers, "client"], ["zk", "client"]])
        await trio.sleep(2 * SESSION_TIMEOUT_S)
        run.cluster.heal()
        healed_at = time.monotonic()
        converged_at = await wait_for(
            lambda: converged(run), "the cluster to converge", CONVERGE_TIMEOUT_S
        )
    acked_after = [a for a in run.acks() if a.sent_at > converged_at]
    report_figures(
        tmp_path,
        "zookeeper-unreachable",
        seed,
        run,
        outage_s=round(healed_at - cut_at, 2),
        converged_after_heal_s=round(converged_at - healed_at, 2),
        acknowledged_after_convergence=len(acked_after),
        unavailable=unavailability(run, cut_at, converged_at),
    )
    assert_durable(run)
    assert acked_after, "no write was acknowledged once the cluster converged"


async def nemesis(run: Run, rng: random.Random, history: list[str]) -> None:
    """Random network faults: a random split of ZooKeeper and the brokers, one of them
    cut off, a one-way cut (the client's links too), a slow lossy broker. Up to
    ``MAX_STACKED`` faults hold at once; then, or by chance, everything heals."""
    cluster = run.cluster
    nodes: list[Node] = ["zk", *cluster.brokers]
    stacked = 0
    while True:
        kind = rng.choice(["partition", "isolate", "cut", "cut", "slow"])
        if kind == "partition":
            shuffled = rng.sample(nodes, len(nodes))
            split = rng.randrange(1, len(nodes))
            groups: Sequence[list[Node]] = [
                [*shuffled[:split], "client"],
                [*shuffled[split:], "client"],
            ]
            cluster.partition(groups)
            done = f"partition {groups}"
        elif kind == "isolate":
            victim = rng.choice(nodes)
            cluster.partition([[victim, "client"], [*(n for n in nodes if n != victim), "client"]])
            done = f"isolate {victim}"
        elif kind == "cut":
            a, b = rng.sample([*nodes, "client"], 2)
            cluster.cut(a, b)
            done = f"cut {a}->{b}"
        else:
            victim = rng.choice(list(cluster.brokers))
            await trio.to_thread.run_sync(cluster.slow, victim, 200, 0.05)
            done = f"slow {victim} 200ms 5%"
        history.append(f"{run.since(time.monotonic())} {done}")
        stacked += 1
        await trio.sleep(rng.uniform(1.0, 4.0))
        if stacked >= MAX_STACKED or rng.random() < 0.5:
            await trio.to_thread.run_sync(cluster.heal)
            history.append(f"{run.since(time.monotonic())} heal")
            stacked = 0
            await trio.sleep(rng.uniform(0.5, 2.0))


@pytest.mark.extended
@pytest.mark.timeout(120 + 2 * NEMESIS_S)
@pytest.mark.parametrize("seed", NEMESIS_SEEDS)
async def test_random_partitions_cuts_and_slow_links_lose_no_acknowledged_write(
    tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    history: list[str] = []
    async with running(tmp_path, seed) as run:
        started = time.monotonic()
        with trio.move_on_after(NEMESIS_S):
            await nemesis(run, rng, history)
        run.cluster.heal()
        ended = time.monotonic()
    report_figures(
        tmp_path,
        "random-nemesis",
        seed,
        run,
        duration_s=NEMESIS_S,
        faults=history,
        unavailable=unavailability(run, started, ended),
    )
    assert_durable(run, f"faults {history}:")

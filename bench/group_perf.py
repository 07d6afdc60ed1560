"""Consumer groups: how fast a group settles after a member leaves, and commit rate.

    python3 bench/group_perf.py [--rounds 5] [--commits 2000] [--concurrency 8]
        [--strategy range|roundrobin|cooperative-sticky] [--heartbeat-ms 100]
        [--initial-rebalance-delay-ms 0]

Starts a 3-broker cluster (``minibroker dev up`` through tests/support/cluster.py, its
brokers given ``group.initial.rebalance.delay.ms``), a 6-partition topic and a group of
three bundled consumers, then:

- leave_to_stable_ms: ``--rounds`` times, one member closes (commit, LeaveGroup) and
  the clock runs until both others have received their new assignment (SyncGroup
  answered: the group is Stable again); then a new member joins to make three again
  (join_to_stable_ms). The remaining members learn of the rebalance from a heartbeat,
  so ``--heartbeat-ms`` bounds the wait;
- commits_per_s: sequential OffsetCommit round trips of one member (each one written
  with acks=all to ``__consumer_offsets``, replication factor 3), and
  concurrent_commits_per_s with ``--concurrency`` commits in flight.

bench/group_bench.py measures the coordinator alone, with raw requests; this one
measures what an application sees through the bundled Consumer. Progress goes to
stderr, one JSON object to the last line of stdout, with the load average: figures
depend on how busy the machine is.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import trio

from minibroker.client.admin import Admin
from minibroker.client.consumer import Consumer
from tests.support.cluster import LocalCluster

TOPIC = "group-perf"
GROUP = "group-perf"
PARTITIONS = 6
POLL_S = 0.001  # how finely the settle time is observed


def log(line: str) -> None:
    print(f"[group_perf] {line}", file=sys.stderr, flush=True)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--commits", type=int, default=2000)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--strategy", default="range")
    p.add_argument("--heartbeat-ms", type=int, default=100)
    p.add_argument("--initial-rebalance-delay-ms", type=int, default=0)
    return p.parse_args()


class Member:
    """A group member kept open in its own task until ``close``."""

    def __init__(self, bootstrap: str, args: argparse.Namespace) -> None:
        self.consumer = Consumer(
            bootstrap,
            group_id=GROUP,
            session_timeout_ms=6_000,
            heartbeat_interval_ms=args.heartbeat_ms,
            partition_assignment_strategy=args.strategy,
            enable_auto_commit=False,
        )
        self.consumer.subscribe([TOPIC])
        self.done = trio.Event()
        self.closed = trio.Event()

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with self.consumer:
            task_status.started()
            await self.done.wait()
        self.closed.set()

    async def close(self) -> None:
        self.done.set()
        await self.closed.wait()

    @property
    def generation(self) -> int:
        assert self.consumer._group is not None
        member = self.consumer._group.member
        return member.generation_id if member.is_stable else -1


async def settled(members: list[Member], after_generation: int) -> None:
    """Until every member is stable in one generation newer than ``after_generation``
    and every partition is assigned (cooperative-sticky withholds moving partitions
    for one more round)."""
    while True:
        generations = {m.generation for m in members}
        assigned = sum(len(m.consumer.assignment()) for m in members)
        one = len(generations) == 1 and generations.pop() > after_generation
        if one and assigned == PARTITIONS:
            return
        await trio.sleep(POLL_S)


async def rebalances(
    bootstrap: str, args: argparse.Namespace, nursery: trio.Nursery
) -> dict[str, Any]:
    members = [Member(bootstrap, args) for _ in range(3)]
    for m in members:
        await nursery.start(m.run)
    with trio.fail_after(60):
        await settled(members, -1)
    leave_ms, join_ms = [], []
    for round_ in range(args.rounds):
        generation = members[0].generation
        leaving, members = members[0], members[1:]
        start = time.perf_counter()
        await leaving.close()
        with trio.fail_after(60):
            await settled(members, generation)
        leave_ms.append((time.perf_counter() - start) * 1000)
        generation = members[0].generation
        newcomer = Member(bootstrap, args)
        start = time.perf_counter()
        await nursery.start(newcomer.run)
        members.append(newcomer)
        with trio.fail_after(60):
            await settled(members, generation)
        join_ms.append((time.perf_counter() - start) * 1000)
        log(f"round {round_ + 1}: leave -> stable {leave_ms[-1]:.0f} ms, join {join_ms[-1]:.0f} ms")
    async with Admin(bootstrap) as admin:
        state = (await admin.describe_group(GROUP)).state
    for m in members:
        await m.close()
    return {
        "leave_to_stable_ms": _summary(leave_ms),
        "join_to_stable_ms": _summary(join_ms),
        "final_state": state,
    }


async def commit_rate(bootstrap: str, args: argparse.Namespace, nursery: trio.Nursery) -> Any:
    member = Member(bootstrap, args)
    await nursery.start(member.run)
    with trio.fail_after(60):
        await settled([member], -1)
    consumer = member.consumer
    tp = sorted(consumer.assignment())[0]
    start = time.perf_counter()
    for i in range(args.commits):
        await consumer.commit({tp: i})
    sequential = args.commits / (time.perf_counter() - start)
    log(f"sequential commits: {sequential:.0f}/s")

    per_task = args.commits // args.concurrency

    async def committer(partition: int) -> None:
        for i in range(per_task):
            await consumer.commit({(TOPIC, partition % PARTITIONS): i})

    start = time.perf_counter()
    async with trio.open_nursery() as inner:
        for task in range(args.concurrency):
            inner.start_soon(committer, task)
    concurrent = per_task * args.concurrency / (time.perf_counter() - start)
    log(f"{args.concurrency} concurrent committers: {concurrent:.0f}/s")
    await member.close()
    return round(sequential), round(concurrent)


def _summary(values: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(values), 1),
        "min": round(min(values), 1),
        "max": round(max(values), 1),
    }


async def run(bootstrap: str, args: argparse.Namespace) -> dict[str, Any]:
    async with Admin(bootstrap) as admin:
        await admin.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
    async with trio.open_nursery() as nursery:
        figures = await rebalances(bootstrap, args, nursery)
        sequential, concurrent = await commit_rate(bootstrap, args, nursery)
    return {
        **figures,
        "commits_per_s": sequential,
        "concurrent_commits_per_s": concurrent,
        "concurrency": args.concurrency,
    }


def main() -> None:
    args = parse_args()
    properties = (f"group.initial.rebalance.delay.ms={args.initial_rebalance_delay_ms}",)
    with tempfile.TemporaryDirectory(prefix="group-perf-") as root:
        log("starting a 3-broker cluster")
        with LocalCluster(Path(root), properties=properties) as cluster:
            figures = trio.run(run, cluster.bootstrap, args)
    result = {
        "strategy": args.strategy,
        "heartbeat_interval_ms": args.heartbeat_ms,
        "initial_rebalance_delay_ms": args.initial_rebalance_delay_ms,
        **figures,
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()

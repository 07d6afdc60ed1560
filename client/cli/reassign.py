"""``minibroker reassign``: move replicas between brokers and between log dirs.

Like kafka-reassign-partitions.sh, with Kafka's JSON (client/reassignment.py):

- ``--generate --topics-to-move-json-file F --broker-list 1,2,3``: prints the current
  assignment of the topics and a proposal spreading them over the listed brokers (the
  topic creation algorithm), both as reassignment JSON. Nothing changes.
- ``--execute --reassignment-json-file F``: prints the current assignment (keep it to
  roll back), then, as Kafka's tool does: (1) AlterReplicaLogDirs for every replica
  with a log dir, where REPLICA_NOT_AVAILABLE only means "not on that broker yet" (the
  broker remembers the dir for when the replica is created); (2)
  AlterPartitionReassignments for partitions whose replicas change; (3) AlterReplicaLogDirs
  again for the replicas that were not there yet, retried until ``--timeout``.
- ``--verify``: per partition whether the broker move and the log-dir moves are done,
  polled until everything is (bounded by ``--timeout`` when given); ``--no-wait``
  reports once. Exit 0 when all are complete.
- ``--cancel``: cancels the partitions' ongoing broker moves and brings each log-dir
  move back to the dir the replica is in now (which deletes its -future copy), then
  removes the throttles as ``--verify`` does (``--preserve-throttles`` keeps them).

Throttles (bytes/s) are dynamic broker configs (broker/admin/broker_configs.py), set by
``--execute`` before anything moves, as Kafka's tool does:
``--replica-alter-log-dirs-throttle`` sets ``replica.alter.log.dirs.io.max.bytes.per.
second`` on every broker with a log-dir move in the plan (enforced by its mover);
``--throttle`` sets ``leader.replication.throttled.rate`` and
``follower.replication.throttled.rate`` on every broker holding or gaining a moved
partition's replica, and says which replicas the rate binds with the topic configs
``leader.replication.throttled.replicas`` (each moving partition's current replicas,
which send the copy) and ``follower.replication.throttled.replicas`` (its added
replicas, which receive it), as ``partition:broker`` entries merged into what the
topic already lists (broker/quotas/replication_quota.py enforces them). ``--verify``, once
every move is done, removes both topic lists from the plan's topics and the three
rates from every live broker.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import trio

from minibroker.client.admin import DYNAMIC_BROKER_CONFIG_SOURCE, Admin
from minibroker.client.cli.common import add_bootstrap, command_security, run_async
from minibroker.client.reassignment import (
    PartitionMove,
    assignment_json,
    check_against_cluster,
    parse_broker_list,
    parse_reassignment,
    parse_topics_to_move,
    propose,
)
from minibroker.protocol.errors import MinibrokerError, ReplicaNotAvailableError, UsageError

LOG_DIRS_THROTTLE = "replica.alter.log.dirs.io.max.bytes.per.second"
LEADER_THROTTLE = "leader.replication.throttled.rate"
FOLLOWER_THROTTLE = "follower.replication.throttled.rate"
THROTTLE_KEYS = (LEADER_THROTTLE, FOLLOWER_THROTTLE, LOG_DIRS_THROTTLE)
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
THROTTLED_REPLICAS_KEYS = (LEADER_REPLICAS, FOLLOWER_REPLICAS)
ALL_REPLICAS = "*"
# (The broker's names, broker/admin/broker_configs.py and broker/quotas/replication_quota.py; the
# client does not import broker code.)

HELP = "move partition replicas between brokers and between log dirs"
DEFAULT_TIMEOUT_MS = 10_000  # Kafka's --timeout default: how long dir moves are retried
RETRY_BACKOFF_S = 0.1  # between AlterReplicaLogDirs retries (Kafka's tool sleeps 100 ms)
VERIFY_POLL_S = 1.0  # between --verify progress reports

DirMoves = dict[tuple[str, int, int], str]


def configure(parser: argparse.ArgumentParser) -> None:
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--generate", action="store_true", help="propose an assignment")
    action.add_argument("--execute", action="store_true", help="start the reassignment")
    action.add_argument("--verify", action="store_true", help="report progress")
    action.add_argument("--cancel", action="store_true", help="cancel ongoing moves")
    parser.add_argument(
        "--reassignment-json-file",
        type=Path,
        metavar="FILE",
        help="the moves, as kafka-reassign-partitions.sh writes them (--execute, --verify, "
        "--cancel)",
    )
    parser.add_argument(
        "--topics-to-move-json-file",
        type=Path,
        metavar="FILE",
        help='{"topics": [{"topic": NAME}]}: the topics --generate spreads',
    )
    parser.add_argument("--broker-list", metavar="1,2,3", help="brokers for --generate")
    parser.add_argument(
        "--throttle",
        type=int,
        metavar="BYTES/S",
        default=-1,
        help="replication rate limit of the moved replicas (default: none)",
    )
    parser.add_argument(
        "--replica-alter-log-dirs-throttle",
        type=int,
        metavar="BYTES/S",
        default=-1,
        help="rate limit of moves between log dirs (default: none)",
    )
    parser.add_argument(
        "--timeout",
        type=int,
        metavar="MS",
        default=None,
        help="how long --execute waits for the controller (default 10000)",
    )
    parser.add_argument("--no-wait", action="store_true", help="--verify reports once")
    parser.add_argument(
        "--preserve-throttles",
        action="store_true",
        help="--cancel leaves the replication throttles in place",
    )
    add_bootstrap(parser)


def _read(path: Path | None, flag: str) -> str:
    if path is None:
        raise UsageError(f"this action needs {flag}")
    try:
        return path.read_text()
    except OSError as exc:
        raise MinibrokerError(f"cannot read {path}: {exc.strerror or exc}") from None


def run(args: argparse.Namespace) -> int:
    if args.generate:
        if args.broker_list is None:
            raise UsageError("--generate needs --broker-list")
        topics = parse_topics_to_move(
            _read(args.topics_to_move_json_file, "--topics-to-move-json-file")
        )
        return run_async(_generate, args, topics, parse_broker_list(args.broker_list))
    moves = parse_reassignment(_read(args.reassignment_json_file, "--reassignment-json-file"))
    if args.execute:
        for flag, value in (
            ("--throttle", args.throttle),
            ("--replica-alter-log-dirs-throttle", args.replica_alter_log_dirs_throttle),
        ):
            if value == 0 or value < -1:
                raise UsageError(f"{flag} must be a positive number of bytes/s")
        return run_async(_execute, args, moves)
    if args.verify:
        return run_async(_verify, args, moves)
    return run_async(_cancel, args, moves)


def _dump(title: str, value: object) -> None:
    print(title)
    print(json.dumps(value, separators=(",", ":")))


async def _current(admin: Admin) -> tuple[dict[tuple[str, int], tuple[int, ...]], list[int]]:
    topics = await admin.describe_topics()
    cluster = await admin.describe_cluster()
    current = {(t.name, p.partition): p.replicas for t in topics for p in t.partitions}
    return current, [b.node_id for b in cluster.brokers]


async def _generate(args: argparse.Namespace, topics: list[str], brokers: list[int]) -> int:
    # The topic creation algorithm lives with the controller; reused, not copied.
    from minibroker.broker.cluster.assignment import assign_replicas_to_brokers

    rng = random.Random()
    async with Admin(args.bootstrap_server, config=command_security(args)) as admin:
        current, _live = await _current(admin)
    proposed = propose(
        current, topics, brokers, lambda b, n, rf: assign_replicas_to_brokers(b, n, rf, rng)
    )
    mine = {tp: r for tp, r in current.items() if tp[0] in topics}
    _dump("Current partition replica assignment", assignment_json(mine))
    print()
    _dump("Proposed partition reassignment configuration", assignment_json(proposed))
    return 0


async def _alter_dirs(admin: Admin, moves: DirMoves) -> set[tuple[str, int, int]]:
    """Send the dir moves; the ones the brokers accepted. Errors other than
    REPLICA_NOT_AVAILABLE (unknown dir, offline dir) end the command."""
    if not moves:
        return set()
    accepted = set()
    for key, error in (await admin.alter_replica_log_dirs(moves)).items():
        if error is None:
            accepted.add(key)
        elif not isinstance(error, ReplicaNotAvailableError):
            topic, partition, broker = key
            raise MinibrokerError(
                f"log dir {moves[key]} for {topic}-{partition} on broker {broker}: {error.name}"
            )
    return accepted


async def _execute(args: argparse.Namespace, moves: list[PartitionMove]) -> int:
    timeout_s = (args.timeout if args.timeout is not None else DEFAULT_TIMEOUT_MS) / 1000
    async with Admin(args.bootstrap_server, config=command_security(args)) as admin:
        current, live = await _current(admin)
        counts: dict[str, int] = {}
        for topic, _partition in current:
            counts[topic] = counts.get(topic, 0) + 1
        check_against_cluster(moves, counts, live)
        rollback = {m.tp: current[m.tp] for m in moves}
        _dump("Current partition replica assignment", assignment_json(rollback))
        print("\nSave this to use as the --reassignment-json-file option during rollback")
        dir_moves: DirMoves = {}
        for move in moves:
            dir_moves.update(move.dir_moves())
        await _set_throttles(admin, args, moves, current, dir_moves)
        done = await _alter_dirs(admin, dir_moves)
        targets: dict[tuple[str, int], list[int] | None] = {
            m.tp: list(m.replicas) for m in moves if tuple(m.replicas) != current[m.tp]
        }
        if targets:
            failed = {
                tp: e for tp, e in (await admin.alter_partition_reassignments(targets)).items() if e
            }
            for (topic, partition), error in sorted(failed.items()):
                print(f"Failed to reassign {topic}-{partition}: {error}", file=sys.stderr)
            if failed:
                return 1
            print(f"Successfully started partition reassignment(s) for {_names(targets)}")
        with trio.move_on_after(timeout_s):
            while len(done) < len(dir_moves):
                done |= await _alter_dirs(
                    admin, {k: v for k, v in dir_moves.items() if k not in done}
                )
                if len(done) < len(dir_moves):
                    await trio.sleep(RETRY_BACKOFF_S)
        missing = sorted(set(dir_moves) - done)
        if missing:
            names = ", ".join(f"{t}-{p} on broker {b}" for t, p, b in missing)
            raise MinibrokerError(
                f"timed out waiting for replicas to reach their log dirs: {names}"
            )
        if dir_moves:
            print(f"Successfully started log directory move(s) for {_replica_names(dir_moves)}")
    return 0


def _names(tps: Mapping[tuple[str, int], object]) -> str:
    return ",".join(f"{t}-{p}" for t, p in sorted(tps))


def _replica_names(moves: DirMoves) -> str:
    return ",".join(f"{t}-{p}-{b}" for t, p, b in sorted(moves))


async def _replica_dirs(
    admin: Admin, brokers: Sequence[int]
) -> dict[tuple[str, int, int], tuple[str, str | None, int]]:
    """(topic, partition, broker) -> (current dir, future dir or None, future's lag)."""
    found: dict[tuple[str, int, int], tuple[str, str | None, int]] = {}
    futures: dict[tuple[str, int, int], tuple[str, int]] = {}
    for described in await admin.describe_log_dirs(sorted(set(brokers))):
        for r in described.replicas:
            key = (r.topic, r.partition, described.broker)
            if r.is_future:
                futures[key] = (described.path, r.offset_lag)
            else:
                found[key] = (described.path, None, 0)
    for key, (path, lag) in futures.items():
        if key in found:
            found[key] = (found[key][0], path, lag)
    return found


async def _verify_once(admin: Admin, moves: list[PartitionMove]) -> tuple[list[str], bool, bool]:
    """Report lines, whether everything is complete, whether something failed."""
    ongoing = {(r.topic, r.partition) for r in await admin.list_partition_reassignments()}
    current, _live = await _current(admin)
    lines: list[str] = []
    complete, failed = True, False
    for move in moves:
        name = f"{move.topic}-{move.partition}"
        if move.tp in ongoing:
            lines.append(f"Reassignment of partition {name} is still in progress.")
            complete = False
        elif current.get(move.tp) == move.replicas:
            lines.append(f"Reassignment of partition {name} is complete.")
        else:
            lines.append(
                f"Reassignment of partition {name} failed: replicas are {current.get(move.tp)}."
            )
            failed = True
    dir_moves: DirMoves = {}
    for move in moves:
        dir_moves.update(move.dir_moves())
    if dir_moves:
        where = await _replica_dirs(admin, [b for _, _, b in dir_moves])
        for key, target in sorted(dir_moves.items()):
            topic, partition, broker = key
            name = f"Replica in log dir movement of {topic}-{partition} on broker {broker}"
            now, future, lag = where.get(key, ("", None, 0))
            if now == target and future is None:
                lines.append(f"{name} to {target} is complete.")
            elif future == target:
                lines.append(f"{name} to {target} is still in progress (offset lag {lag}).")
                complete = False
            else:
                lines.append(f"{name} to {target} is not started; the replica is in {now or '-'}.")
                complete = False
    return lines, complete, failed


def throttled_replicas(
    moves: Sequence[PartitionMove], current: Mapping[tuple[str, int], Sequence[int]]
) -> dict[str, tuple[set[str], set[str]]]:
    """topic -> (leader entries, follower entries) for the partitions whose replicas
    change: the current replicas send the copy, the added ones receive it."""
    lists: dict[str, tuple[set[str], set[str]]] = {}
    for move in moves:
        before = tuple(current.get(move.tp, ()))
        added = [b for b in move.replicas if b not in before]
        if not added:
            continue  # a reorder or a log-dir move: nothing crosses the network
        leader, follower = lists.setdefault(move.topic, (set(), set()))
        leader.update(f"{move.partition}:{b}" for b in before)
        follower.update(f"{move.partition}:{b}" for b in added)
    return lists


def merge_throttled_replicas(existing: str | None, entries: set[str]) -> str:
    """A topic's list with ``entries`` added ("*" already covers everything)."""
    listed = {e.strip() for e in (existing or "").split(",") if e.strip()}
    if ALL_REPLICAS in listed:
        return ALL_REPLICAS

    def order(entry: str) -> tuple[int, ...]:
        return tuple(int(n) if n.isdigit() else -1 for n in entry.split(":"))

    return ",".join(sorted(listed | entries, key=order))


async def _set_throttles(
    admin: Admin,
    args: argparse.Namespace,
    moves: list[PartitionMove],
    current: Mapping[tuple[str, int], Sequence[int]],
    dir_moves: DirMoves,
) -> None:
    """Kafka's tool sets the throttles before it starts any move."""
    if args.throttle > 0:
        for topic, (leader, follower) in sorted(throttled_replicas(moves, current).items()):
            overrides = {
                e.name: e.value for e in await admin.describe_topic_config(topic) if e.is_override
            }
            merged = {
                key: merge_throttled_replicas(overrides.get(key), entries)
                for key, entries in ((LEADER_REPLICAS, leader), (FOLLOWER_REPLICAS, follower))
            }
            await admin.alter_topic_config(topic, merged)
        brokers = sorted({b for m in moves for b in (*m.replicas, *current.get(m.tp, ()))})
        rate = str(args.throttle)
        for broker in brokers:
            await admin.alter_broker_config(
                broker, {LEADER_THROTTLE: rate, FOLLOWER_THROTTLE: rate}
            )
        print(f"The inter-broker throttle limit was set to {args.throttle} B/s")
    if args.replica_alter_log_dirs_throttle > 0 and dir_moves:
        rate = str(args.replica_alter_log_dirs_throttle)
        for broker in sorted({b for _, _, b in dir_moves}):
            await admin.alter_broker_config(broker, {LOG_DIRS_THROTTLE: rate})
        print(f"The replica-alter-dir throttle limit was set to {rate} B/s")
    if args.throttle > 0 or args.replica_alter_log_dirs_throttle > 0:
        print(
            "Warning: You must run --verify periodically, until the reassignment completes, "
            "to ensure the throttle is removed."
        )


async def _clear_throttles(admin: Admin, moves: Sequence[PartitionMove]) -> None:
    """Remove the throttled-replicas lists from the plan's topics and the throttle
    rates from every live broker that has one (Kafka's tool does both on --verify)."""
    for topic in sorted({m.topic for m in moves}):
        entries = await admin.describe_topic_config(topic)
        if any(e.name in THROTTLED_REPLICAS_KEYS and e.is_override for e in entries):
            await admin.alter_topic_config(topic, dict.fromkeys(THROTTLED_REPLICAS_KEYS))
            print(f"Clearing topic-level throttles on topic {topic}")
    _current_assignment, live = await _current(admin)
    cleared: list[int] = []
    for broker in sorted(live):
        entries = await admin.describe_broker_config(broker)
        if any(
            e.name in THROTTLE_KEYS and e.source == DYNAMIC_BROKER_CONFIG_SOURCE for e in entries
        ):
            await admin.alter_broker_config(broker, dict.fromkeys(THROTTLE_KEYS))
            cleared.append(broker)
    if cleared:
        print(f"Clearing broker-level throttles on brokers {','.join(map(str, cleared))}")


async def _verify(args: argparse.Namespace, moves: list[PartitionMove]) -> int:
    deadline = trio.current_time() + (args.timeout / 1000 if args.timeout is not None else 1e9)
    async with Admin(args.bootstrap_server, config=command_security(args)) as admin:
        while True:
            lines, complete, failed = await _verify_once(admin, moves)
            print("Status of partition reassignment:")
            print("\n".join(lines), flush=True)
            if complete and not failed:
                await _clear_throttles(admin, moves)
            if complete or failed or args.no_wait:
                return 0 if complete and not failed else 1
            if trio.current_time() >= deadline:
                print("Timed out before every move completed.", file=sys.stderr)
                return 1
            await trio.sleep(VERIFY_POLL_S)


async def _cancel(args: argparse.Namespace, moves: list[PartitionMove]) -> int:
    async with Admin(args.bootstrap_server, config=command_security(args)) as admin:
        ongoing = {(r.topic, r.partition) for r in await admin.list_partition_reassignments()}
        targets: dict[tuple[str, int], list[int] | None] = {
            m.tp: None for m in moves if m.tp in ongoing
        }
        if targets:
            results = await admin.alter_partition_reassignments(targets)
            for (topic, partition), error in sorted(results.items()):
                outcome = "cancelled" if error is None else f"not cancelled: {error}"
                print(f"Reassignment of {topic}-{partition} {outcome}")
        dir_moves: DirMoves = {}
        for move in moves:
            dir_moves.update(move.dir_moves())
        back: DirMoves = {}
        if dir_moves:
            where = await _replica_dirs(admin, [b for _, _, b in dir_moves])
            back = {k: where[k][0] for k in dir_moves if k in where and where[k][1] is not None}
        if back:
            results_dirs = await admin.alter_replica_log_dirs(back)
            for (topic, partition, broker), error in sorted(results_dirs.items()):
                outcome = "cancelled" if error is None else f"not cancelled: {error}"
                print(f"Log dir move of {topic}-{partition} on broker {broker} {outcome}")
        if not targets and not back:
            print("Nothing to cancel: no move of these partitions is in progress")
        if not args.preserve_throttles:  # as Kafka's tool: a cancelled move needs none
            await _clear_throttles(admin, moves)
    return 0

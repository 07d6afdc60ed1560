"""``minibroker elect-leaders``: move leadership back to preferred replicas (or unclean).

Like kafka-leader-election.sh: ``--topic T [--partition P]`` or
``--all-topic-partitions``; ``--election-type preferred|unclean``.
"""

from __future__ import annotations

import argparse

from minibroker.client.admin import Admin
from minibroker.client.cli.common import (
    add_bootstrap,
    add_format,
    command_security,
    print_json,
    print_table,
    run_async,
)
from minibroker.protocol.errors import ElectionNotNeededError, UsageError

HELP = "run preferred (or unclean) leader elections"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topic", help="elect leaders of this topic's partitions")
    parser.add_argument(
        "--partition",
        type=int,
        action="append",
        default=[],
        help="only this partition of --topic (repeatable)",
    )
    parser.add_argument(
        "--all-topic-partitions", action="store_true", help="every partition of every topic"
    )
    parser.add_argument(
        "--election-type",
        type=str.lower,  # kafka-leader-election.sh spells them PREFERRED / UNCLEAN
        choices=("preferred", "unclean"),
        default="preferred",
        help="preferred: back to the first assigned replica; unclean: a leader for"
        " partitions without a live one, from outside the ISR if need be (default preferred)",
    )
    add_bootstrap(parser)
    add_format(parser)


def run(args: argparse.Namespace) -> int:
    if bool(args.topic) == bool(args.all_topic_partitions):
        raise UsageError("give exactly one of --topic or --all-topic-partitions")
    if args.partition and not args.topic:
        raise UsageError("--partition needs --topic")
    return run_async(_run, args)


async def _run(args: argparse.Namespace) -> int:
    async with Admin(args.bootstrap_server, config=command_security(args)) as admin:
        partitions = None
        if args.topic:
            if args.partition:
                partitions = [(args.topic, p) for p in args.partition]
            else:
                [described] = await admin.describe_topics([args.topic])
                partitions = [(args.topic, p.partition) for p in described.partitions]
        results = await admin.elect_leaders(partitions, election_type=args.election_type)
    rows = []
    failed = 0
    for (topic, partition), error in sorted(results.items()):
        if error is None:
            outcome = "elected"
        elif isinstance(error, ElectionNotNeededError):
            outcome = "not needed"
        else:
            outcome = error.name
            failed += 1
        rows.append(
            {
                "topic": topic,
                "partition": partition,
                "result": outcome,
                "message": None if error is None else error.message,
            }
        )
    if args.format == "json":
        print_json(rows)
    elif not rows:
        print("No partition needed an election")
    else:
        print_table(
            ("TOPIC", "PARTITION", "RESULT"),
            [(r["topic"], r["partition"], r["result"]) for r in rows],
        )
    return 1 if failed else 0

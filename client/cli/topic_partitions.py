"""``minibroker topic alter``: a topic's partitions as a whole (kafka-topics' --alter
--partitions). client/cli/topic.py adds these actions to ``topic``.
"""

from __future__ import annotations

import argparse
from typing import Any

from minibroker.client.admin import Admin
from minibroker.client.cli.common import UsageError, add_format, print_json

ACTIONS = ("alter",)
"""The ``topic`` actions this module serves."""


def configure(actions: Any) -> list[argparse.ArgumentParser]:
    """Add this module's actions to ``topic``'s subparsers; returns their parsers."""
    alter = actions.add_parser("alter", help="add partitions to a topic")
    alter.add_argument("topic", help="the topic to grow")
    alter.add_argument(
        "-p",
        "--partitions",
        type=int,
        required=True,
        help="the topic's new partition count (more than it has: topics never shrink)",
    )
    alter.add_argument(
        "--replica-assignment",
        metavar="B:B,B:B",
        help="replicas of every partition, as for create; only the new ones are used"
        " (default: the broker places them)",
    )
    alter.add_argument(
        "--validate-only", action="store_true", help="check the change, make nothing"
    )
    add_format(alter)
    return [alter]


def parse_assignment(text: str) -> dict[int, list[int]]:
    """``"1:2,2:3"`` -> {0: [1, 2], 1: [2, 3]} (kafka-topics' --replica-assignment)."""
    assignment: dict[int, list[int]] = {}
    for index, part in enumerate(text.split(",")):
        try:
            replicas = [int(b) for b in part.split(":")]
        except ValueError:
            raise UsageError(f"--replica-assignment: bad broker list {part!r}") from None
        if len(set(replicas)) != len(replicas):
            raise UsageError(f"--replica-assignment: partition {index} repeats a broker")
        assignment[index] = replicas
    return assignment


async def run(admin: Admin, args: argparse.Namespace) -> int:
    assignments = None
    if args.replica_assignment:
        (described,) = await admin.describe_topics([args.topic])
        wanted = parse_assignment(args.replica_assignment)
        if len(wanted) != args.partitions:
            raise UsageError(
                f"--replica-assignment lists {len(wanted)} partitions, --partitions"
                f" asks for {args.partitions}"
            )
        assignments = [wanted[p] for p in sorted(wanted) if p >= len(described.partitions)]
    await admin.create_partitions(
        args.topic, args.partitions, assignments=assignments, validate_only=args.validate_only
    )
    if args.format == "json":
        print_json(
            {
                "topic": args.topic,
                "partitions": args.partitions,
                "validate_only": args.validate_only,
            }
        )
    elif args.validate_only:
        print(f"Topic {args.topic} can have {args.partitions} partitions")
    else:
        print(f"Topic {args.topic} now has {args.partitions} partitions")
    return 0

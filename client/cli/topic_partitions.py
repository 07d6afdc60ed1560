"""``minibroker topic alter`` and ``topic delete-records``: a topic's partitions as a
whole (kafka-topics' --alter --partitions, kafka-delete-records). client/cli/topic.py
adds these actions to ``topic``.

``--offset-json-file`` takes kafka-delete-records' JSON::

    {"version": 1, "partitions": [{"topic": "t", "partition": 0, "offset": 42}]}
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from minibroker.client.admin import Admin
from minibroker.client.cli.common import add_format, print_json
from minibroker.protocol.errors import UsageError

ACTIONS = ("alter", "delete-records")
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

    trim = actions.add_parser("delete-records", help="delete a partition's records below an offset")
    trim.add_argument("topic", nargs="?", help="the topic (with --partition)")
    trim.add_argument("--partition", type=int, help="the partition to trim")
    trim.add_argument(
        "--before-offset",
        type=int,
        help="records below this offset go (-1: below the high watermark)",
    )
    trim.add_argument(
        "--offset-json-file",
        metavar="FILE",
        help='kafka-delete-records\' JSON: {"partitions": [{"topic", "partition",'
        ' "offset"}], "version": 1}',
    )
    add_format(trim)
    return [alter, trim]


def parse_offsets(text: str) -> dict[tuple[str, int], int]:
    """kafka-delete-records' --offset-json-file content -> {(topic, partition): offset}."""
    try:
        document = json.loads(text)
        entries = document["partitions"]
        offsets = {(str(e["topic"]), int(e["partition"])): int(e["offset"]) for e in entries}
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(
            '--offset-json-file: expected {"partitions": [{"topic", "partition", "offset"}],'
            f' "version": 1}} ({exc})'
        ) from None
    if len(offsets) != len(entries):
        raise UsageError("--offset-json-file names a partition twice")
    return offsets


def offsets_asked(args: argparse.Namespace) -> dict[tuple[str, int], int]:
    """The partitions and offsets of ``delete-records``, from its flags or its file."""
    if args.offset_json_file is not None:
        if args.topic or args.partition is not None or args.before_offset is not None:
            raise UsageError("--offset-json-file replaces TOPIC --partition --before-offset")
        return parse_offsets(Path(args.offset_json_file).read_text())
    if not args.topic or args.partition is None or args.before_offset is None:
        raise UsageError("delete-records needs TOPIC --partition P --before-offset O")
    return {(args.topic, args.partition): args.before_offset}


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
    if args.action == "delete-records":
        return await _delete_records(admin, args)
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


async def _delete_records(admin: Admin, args: argparse.Namespace) -> int:
    results = await admin.delete_records(args.offsets)
    rows: list[dict[str, Any]] = []
    for (topic, partition), outcome in sorted(results.items()):
        row: dict[str, Any] = {"topic": topic, "partition": partition}
        if isinstance(outcome, int):
            row["low_watermark"] = outcome
        else:
            row["error"] = outcome.name
            row["message"] = str(outcome)
        rows.append(row)
    if args.format == "json":
        print_json(rows)
    else:
        for row in rows:
            where = f"partition: {row['topic']}-{row['partition']}"
            if "error" in row:
                print(f"{where}\terror: {row['message']}")
            else:
                print(f"{where}\tlow_watermark: {row['low_watermark']}")
    return 1 if any("error" in row for row in rows) else 0

"""``minibroker topic create|list|describe|delete|alter-config`` (``alter`` and
``delete-records``: client/cli/topic_partitions.py).

Flags follow kafka-topics.sh where it has one (``--partitions``,
``--replication-factor``, ``--config k=v``, ``--replica-assignment 1:2,2:3``,
``--under-replicated-partitions``, ``--unavailable-partitions``, ``--if-not-exists``,
``--if-exists``), with less typing: the topic is a positional argument.
"""

from __future__ import annotations

import argparse
from typing import Any

from minibroker.client.admin import Admin, TopicDescription
from minibroker.client.cli import topic_partitions
from minibroker.client.cli.common import (
    add_bootstrap,
    add_format,
    command_security,
    key_value,
    print_json,
    print_table,
    run_async,
)
from minibroker.client.cli.topic_partitions import parse_assignment
from minibroker.protocol.errors import (
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
    UsageError,
)

HELP = "create, list, describe, delete topics, add partitions, change their configuration"


def configure(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", parser_class=type(parser))
    actions.required = True

    create = actions.add_parser("create", help="create a topic")
    create.add_argument("topic", help="the new topic's name")
    create.add_argument(
        "-p",
        "--partitions",
        type=int,
        default=-1,
        help="partition count (default: the brokers' num.partitions)",
    )
    create.add_argument(
        "-r",
        "--replication-factor",
        type=int,
        default=-1,
        help="replicas per partition (default: default.replication.factor)",
    )
    create.add_argument(
        "-c",
        "--config",
        type=key_value,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="topic config override (repeatable)",
    )
    create.add_argument(
        "--replica-assignment",
        metavar="B:B,B:B",
        help="explicit replicas: partitions separated by ',', brokers by ':'",
    )
    create.add_argument(
        "--if-not-exists", action="store_true", help="succeed if the topic already exists"
    )

    listing = actions.add_parser("list", help="list topic names")
    add_format(listing)

    describe = actions.add_parser("describe", help="partitions, leaders, replicas, ISR")
    describe.add_argument(
        "topics", nargs="*", metavar="TOPIC", help="topics to describe (default: all)"
    )
    describe.add_argument(
        "--under-replicated-partitions",
        action="store_true",
        help="only partitions whose ISR is smaller than their replicas",
    )
    describe.add_argument(
        "--unavailable-partitions", action="store_true", help="only partitions without a leader"
    )
    add_format(describe)

    delete = actions.add_parser("delete", help="delete a topic")
    delete.add_argument("topic", help="the topic to delete")
    delete.add_argument(
        "--if-exists", action="store_true", help="succeed if the topic does not exist"
    )

    alter = actions.add_parser("alter-config", help="set or remove topic config overrides")
    alter.add_argument("topic", help="the topic whose overrides change")
    alter.add_argument(
        "--set",
        type=key_value,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set an override (repeatable)",
    )
    alter.add_argument(
        "--delete",
        action="append",
        default=[],
        metavar="KEY",
        help="remove an override (repeatable)",
    )

    for sub in (create, listing, describe, delete, alter, *topic_partitions.configure(actions)):
        add_bootstrap(sub)


def run(args: argparse.Namespace) -> int:
    if args.action == "create":
        args.assignment = (
            parse_assignment(args.replica_assignment) if args.replica_assignment else None
        )
        if args.assignment and (args.partitions != -1 or args.replication_factor != -1):
            raise UsageError("--replica-assignment replaces --partitions/--replication-factor")
    if args.action == "delete-records":
        args.offsets = topic_partitions.offsets_asked(args)
    if args.action == "alter-config" and not (args.set or args.delete):
        raise UsageError("alter-config needs at least one --set KEY=VALUE or --delete KEY")
    return run_async(_run, args)


async def _run(args: argparse.Namespace) -> int:
    async with Admin(args.bootstrap_server, config=command_security(args)) as admin:
        if args.action == "create":
            return await _create(admin, args)
        if args.action == "list":
            topics = await admin.list_topics()
            if args.format == "json":
                print_json(topics)
            else:
                print("\n".join(topics)) if topics else None
            return 0
        if args.action == "describe":
            return await _describe(admin, args)
        if args.action == "delete":
            try:
                await admin.delete_topic(args.topic)
            except UnknownTopicOrPartitionError:
                if not args.if_exists:
                    raise
                return 0
            print(f"Deleted topic {args.topic}")
            return 0
        if args.action in topic_partitions.ACTIONS:
            return await topic_partitions.run(admin, args)
        return await _alter_config(admin, args)


async def _create(admin: Admin, args: argparse.Namespace) -> int:
    try:
        await admin.create_topic(
            args.topic,
            args.partitions,
            args.replication_factor,
            config=dict(args.config),
            assignments=args.assignment,
        )
    except TopicAlreadyExistsError:
        if not args.if_not_exists:
            raise
        print(f"Topic {args.topic} already exists")
        return 0
    print(f"Created topic {args.topic}")
    return 0


def _partition_rows(
    topics: list[TopicDescription], under_replicated: bool, unavailable: bool
) -> list[dict[str, Any]]:
    rows = []
    for topic in topics:
        for p in topic.partitions:
            if under_replicated and len(p.isr) >= len(p.replicas):
                continue
            if unavailable and p.leader >= 0:
                continue
            rows.append(
                {
                    "topic": topic.name,
                    "partition": p.partition,
                    "leader": p.leader,
                    "leader_epoch": p.leader_epoch,
                    "replicas": list(p.replicas),
                    "isr": list(p.isr),
                    "offline_replicas": list(p.offline_replicas),
                }
            )
    return rows


async def _describe(admin: Admin, args: argparse.Namespace) -> int:
    topics = await admin.describe_topics(args.topics or None)
    filtered = args.under_replicated_partitions or args.unavailable_partitions
    rows = _partition_rows(topics, args.under_replicated_partitions, args.unavailable_partitions)
    # Like kafka-topics --describe: each topic's overrides (DescribeConfigs, source 1).
    overrides = {} if filtered else {t.name: await _overrides(admin, t.name) for t in topics}
    if args.format == "json":
        if filtered:
            print_json(rows)
        else:
            print_json(
                [
                    {
                        "name": t.name,
                        "configs": overrides[t.name],
                        "partitions": [r for r in rows if r["topic"] == t.name],
                    }
                    for t in topics
                ]
            )
        return 0
    if not filtered:
        for t in topics:
            rf = len(t.partitions[0].replicas) if t.partitions else 0
            configs = ",".join(f"{k}={v}" for k, v in overrides[t.name].items())
            print(
                f"Topic: {t.name}  PartitionCount: {len(t.partitions)}  ReplicationFactor: {rf}"
                f"  Configs: {configs or '-'}"
            )
    if rows:
        print_table(
            ("TOPIC", "PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "OFFLINE"),
            [
                (
                    r["topic"],
                    r["partition"],
                    r["leader"] if r["leader"] >= 0 else "none",
                    r["leader_epoch"],
                    _ids(r["replicas"]),
                    _ids(r["isr"]),
                    _ids(r["offline_replicas"]) or "-",
                )
                for r in rows
            ],
        )
    return 0


async def _overrides(admin: Admin, topic: str) -> dict[str, str | None]:
    return {e.name: e.value for e in await admin.describe_topic_config(topic) if e.is_override}


def _ids(ids: list[int]) -> str:
    return ",".join(map(str, ids))


async def _alter_config(admin: Admin, args: argparse.Namespace) -> int:
    changes: dict[str, str | None] = dict(args.set)
    for key in args.delete:
        changes[key] = None
    await admin.alter_topic_config(args.topic, changes)
    print(f"Updated config of topic {args.topic}")
    return 0

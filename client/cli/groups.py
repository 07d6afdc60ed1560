"""``minibroker groups list | describe G | reset-offsets | delete``.

kafka-consumer-groups.sh with less typing: ``groups list`` (``--state`` adds each
group's state), ``groups describe G`` (one row per partition: committed offset, log
end, lag and the member reading it; ``--members`` lists the members and their
assignments, ``--state`` the group), ``groups reset-offsets --group G (--topic T[:P,P]
... | --all-topics) --to-earliest|--to-latest|--to-offset N|--shift-by N|--to-datetime
T [--dry-run|--execute]`` and ``groups delete G`` (``--topic T`` deletes only that
topic's offsets). ``--group G`` works wherever the group is positional.

``describe --format json`` prints exactly ``{"group", "state", "partitions": [{"topic",
"partition", "committed", "log_end", "lag", "member"}]}`` (``member`` is a member id or
null; ``committed``, ``log_end`` and ``lag`` null when unknown).
"""

from __future__ import annotations

import argparse
from typing import Any

from minibroker.client.admin import Admin
from minibroker.client.admin_groups import GroupDescription, PartitionLag
from minibroker.client.cli.common import (
    add_bootstrap,
    add_format,
    print_json,
    print_table,
    run_async,
)
from minibroker.client.cli.groups_reset import INACTIVE_STATES, parse_topic_spec, resolve, target_of
from minibroker.protocol.errors import MinibrokerError, UsageError

HELP = "list, describe, reset the offsets of and delete consumer groups"


def configure(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", parser_class=type(parser))
    actions.required = True

    listing = actions.add_parser("list", help="list consumer groups")
    listing.add_argument("--state", action="store_true", help="show each group's state")
    add_format(listing)

    describe = actions.add_parser(
        "describe", help="committed offsets, log end, lag and members of a group"
    )
    _add_group(describe)
    view = describe.add_mutually_exclusive_group()
    view.add_argument("--members", action="store_true", help="the members and their partitions")
    view.add_argument("--state", action="store_true", help="the group's state and coordinator")
    add_format(describe)

    reset = actions.add_parser("reset-offsets", help="move a group's committed offsets")
    _add_group(reset)
    scope = reset.add_mutually_exclusive_group()
    scope.add_argument(
        "--topic",
        action="append",
        default=[],
        metavar="TOPIC[:P,P]",
        help="a topic, or some of its partitions (repeatable)",
    )
    scope.add_argument(
        "--all-topics", action="store_true", help="every partition the group has an offset for"
    )
    where = reset.add_mutually_exclusive_group()
    where.add_argument("--to-earliest", action="store_true", help="the log start")
    where.add_argument("--to-latest", action="store_true", help="the log end")
    where.add_argument("--to-offset", type=int, metavar="N", help="offset N (clamped)")
    where.add_argument(
        "--shift-by", type=int, metavar="N", help="N more (or fewer) than committed (clamped)"
    )
    where.add_argument(
        "--to-datetime",
        metavar="YYYY-MM-DDTHH:mm:SS.sss[ZONE]",
        help="the first record at or after this time",
    )
    run_mode = reset.add_mutually_exclusive_group()
    run_mode.add_argument(
        "--dry-run", action="store_true", help="print the new offsets only (the default)"
    )
    run_mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    add_format(reset)

    delete = actions.add_parser("delete", help="delete groups (or a topic's offsets)")
    delete.add_argument("groups", nargs="*", metavar="GROUP", help="groups to delete")
    delete.add_argument("--group", action="append", default=[], help="a group (repeatable)")
    delete.add_argument(
        "--topic",
        action="append",
        default=[],
        metavar="TOPIC[:P,P]",
        help="delete only these offsets of the group, not the group",
    )

    for sub in (listing, describe, reset, delete):
        add_bootstrap(sub)


def _add_group(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("group", nargs="?", metavar="GROUP", help="the group")
    parser.add_argument("--group", dest="group_flag", metavar="GROUP", help="the group")


def _group_of(args: argparse.Namespace) -> str:
    if args.group and args.group_flag and args.group != args.group_flag:
        raise UsageError("name the group once (GROUP or --group)")
    group: str | None = args.group or args.group_flag
    if not group:
        raise UsageError("which group? (GROUP or --group GROUP)")
    return group


def run(args: argparse.Namespace) -> int:
    if args.action == "reset-offsets":
        _group_of(args)
        if not args.topic and not args.all_topics:
            raise UsageError("reset-offsets needs --topic TOPIC or --all-topics")
        target_of(args)
    elif args.action == "describe":
        _group_of(args)
    elif args.action == "delete" and not (args.groups or args.group):
        raise UsageError("which group? (GROUP or --group GROUP)")
    return run_async(_run, args)


async def _run(args: argparse.Namespace) -> int:
    async with Admin(args.bootstrap_server) as admin:
        if args.action == "list":
            await _list(admin, args)
        elif args.action == "describe":
            await _describe(admin, _group_of(args), args)
        elif args.action == "reset-offsets":
            await _reset(admin, _group_of(args), args)
        else:
            await _delete(admin, args)
    return 0


async def _list(admin: Admin, args: argparse.Namespace) -> None:
    groups = await admin.list_groups()
    if args.format == "json":
        print_json(
            [
                {"group": g.group_id, "state": g.state, "protocol_type": g.protocol_type}
                for g in groups
            ]
        )
    elif args.state:
        print_table(("GROUP", "STATE"), [(g.group_id, g.state) for g in groups])
    else:
        for g in groups:
            print(g.group_id)


def _dash(value: Any) -> Any:
    return "-" if value is None else value


async def _describe(admin: Admin, group: str, args: argparse.Namespace) -> None:
    if args.state or args.members:
        description = await admin.describe_group(group)
        if args.state:
            _print_state(description, args.format)
        else:
            _print_members(description, args.format)
        return
    description, rows = await admin.describe_group_offsets(group)
    if args.format == "json":
        print_json(describe_json(description, rows))
        return
    if not rows:
        state = description.state
        print(f"Consumer group '{group}' has no committed offsets and no members ({state}).")
        return
    print_table(
        (
            "GROUP",
            "TOPIC",
            "PARTITION",
            "CURRENT-OFFSET",
            "LOG-END-OFFSET",
            "LAG",
            "CONSUMER-ID",
            "HOST",
            "CLIENT-ID",
        ),
        [
            (
                group,
                r.topic,
                r.partition,
                _dash(r.committed),
                _dash(r.log_end),
                _dash(r.lag),
                r.member.member_id if r.member else "-",
                r.member.client_host if r.member else "-",
                r.member.client_id if r.member else "-",
            )
            for r in rows
        ],
    )


def describe_json(description: GroupDescription, rows: list[PartitionLag]) -> dict[str, Any]:
    """The contract's shape of ``describe --format json``."""
    return {
        "group": description.group_id,
        "state": description.state,
        "partitions": [
            {
                "topic": r.topic,
                "partition": r.partition,
                "committed": r.committed,
                "log_end": r.log_end,
                "lag": r.lag,
                "member": r.member.member_id if r.member else None,
            }
            for r in rows
        ],
    }


def _print_state(d: GroupDescription, fmt: str) -> None:
    if fmt == "json":
        print_json(
            {
                "group": d.group_id,
                "state": d.state,
                "coordinator": d.coordinator,
                "assignment_strategy": d.protocol,
                "members": len(d.members),
            }
        )
        return
    print_table(
        ("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"),
        [(d.group_id, d.coordinator, d.protocol or "-", d.state, len(d.members))],
    )


def _print_members(d: GroupDescription, fmt: str) -> None:
    if fmt == "json":
        print_json(
            {
                "group": d.group_id,
                "state": d.state,
                "members": [
                    {
                        "member": m.member_id,
                        "group_instance_id": m.group_instance_id,
                        "client_id": m.client_id,
                        "host": m.client_host,
                        "assignment": [{"topic": t, "partition": p} for t, p in m.assignment],
                    }
                    for m in d.members
                ],
            }
        )
        return
    print_table(
        ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"),
        [
            (
                d.group_id,
                m.member_id,
                m.client_host,
                m.client_id,
                len(m.assignment),
                ",".join(f"{t}-{p}" for t, p in m.assignment) or "-",
            )
            for m in d.members
        ],
    )


async def _reset(admin: Admin, group: str, args: argparse.Namespace) -> None:
    state, committed, new = await resolve(admin, group, args, target_of(args))
    if args.execute:
        if state not in INACTIVE_STATES:
            raise MinibrokerError(
                f"assignments can only be reset if the group '{group}' is inactive, but the "
                f"current state is {state}"
            )
        if new:
            await admin.alter_group_offsets(group, new)
    rows = sorted(new.items())
    if args.format == "json":
        print_json(
            {
                "group": group,
                "executed": bool(args.execute),
                "partitions": [
                    {
                        "topic": t,
                        "partition": p,
                        "committed": committed.get((t, p)),
                        "new_offset": o,
                    }
                    for (t, p), o in rows
                ],
            }
        )
        return
    print_table(
        ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"), [(group, t, p, o) for (t, p), o in rows]
    )


async def _delete(admin: Admin, args: argparse.Namespace) -> None:
    groups = [*args.groups, *args.group]
    if args.topic:
        partitions = []
        for spec in args.topic:
            topic, wanted = parse_topic_spec(spec)
            if wanted is None:
                info = await admin.cluster.topic(topic, timeout_s=admin.request_timeout_ms / 1000)
                wanted = [p.partition for p in info.partitions]
            partitions += [(topic, p) for p in wanted]
        for group in groups:
            await admin.delete_group_offsets(group, partitions)
            print(f"Deleted the offsets of {len(partitions)} partitions of group '{group}'.")
        return
    await admin.delete_groups(groups)
    names = ", ".join(f"'{g}'" for g in groups)
    print(f"Deletion of requested consumer groups ({names}) was successful.")

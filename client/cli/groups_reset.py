"""``minibroker groups reset-offsets``: where each partition's committed offset goes.

Kafka's kafka-consumer-groups ``--reset-offsets`` rules: ``--to-earliest`` and
``--to-latest`` go to the log start and end; ``--to-offset N`` and ``--shift-by N``
(from the committed offset) are clamped into [log start, log end]; ``--to-datetime``
goes to the first record at or after that time (the log end when there is none).
``plan`` is the pure part, unit-tested; ``resolve`` asks the cluster what it needs.
Without ``--execute`` nothing is written (a dry run prints the plan).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from datetime import datetime

from minibroker.client.admin import Admin
from minibroker.client.offsets import list_offsets
from minibroker.protocol.errors import MinibrokerError, UsageError

TopicPartition = tuple[str, int]
EARLIEST = -2  # ListOffsets timestamps
LATEST = -1
INACTIVE_STATES = ("Empty", "Dead")  # a group with members owns its offsets


@dataclass(frozen=True, slots=True)
class Target:
    """How to move: ``kind`` is earliest, latest, offset, shift or datetime."""

    kind: str
    value: int = 0  # the offset, the shift, or the epoch milliseconds


def target_of(args: argparse.Namespace) -> Target:
    if args.to_earliest:
        return Target("earliest")
    if args.to_latest:
        return Target("latest")
    if args.to_offset is not None:
        return Target("offset", args.to_offset)
    if args.shift_by is not None:
        return Target("shift", args.shift_by)
    if args.to_datetime is not None:
        return Target("datetime", parse_datetime(args.to_datetime))
    raise UsageError(
        "say where to: --to-earliest, --to-latest, --to-offset, --shift-by or --to-datetime"
    )


def parse_datetime(text: str) -> int:
    """``2024-05-01T12:00:00.000`` (local time) or with a zone (``Z``, ``+02:00``):
    epoch milliseconds."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(
            f"--to-datetime must look like 2024-05-01T12:00:00.000[+02:00], not {text!r}"
        ) from None
    return int(moment.timestamp() * 1000)


def plan(
    partitions: list[TopicPartition],
    target: Target,
    *,
    committed: dict[TopicPartition, int | None],
    starts: dict[TopicPartition, int],
    ends: dict[TopicPartition, int],
    at_time: dict[TopicPartition, int] | None = None,
) -> dict[TopicPartition, int]:
    """The new committed offset of each partition."""
    out = {}
    for tp in partitions:
        start, end = starts[tp], ends[tp]
        if target.kind == "earliest":
            new = start
        elif target.kind == "latest":
            new = end
        elif target.kind == "offset":
            new = target.value
        elif target.kind == "shift":
            current = committed.get(tp)
            if current is None:
                raise MinibrokerError(
                    f"{tp[0]}-{tp[1]}: cannot shift, the group has no committed offset there"
                )
            new = current + target.value
        elif target.kind == "datetime":
            found = (at_time or {}).get(tp, -1)
            new = found if found >= 0 else end
        else:
            raise ValueError(f"unknown reset target {target.kind!r}")
        out[tp] = min(max(new, start), end)
    return out


def parse_topic_spec(spec: str) -> tuple[str, list[int] | None]:
    """``topic`` (every partition) or ``topic:0,2`` (those)."""
    topic, sep, parts = spec.partition(":")
    if not topic:
        raise UsageError(f"--topic must be TOPIC or TOPIC:P,P, not {spec!r}")
    if not sep:
        return topic, None
    try:
        return topic, [int(p) for p in parts.split(",") if p]
    except ValueError:
        raise UsageError(f"--topic must be TOPIC or TOPIC:P,P, not {spec!r}") from None


async def resolve(
    admin: Admin, group_id: str, args: argparse.Namespace, target: Target
) -> tuple[str, dict[TopicPartition, int | None], dict[TopicPartition, int]]:
    """The group's state, its committed offsets and the planned new offsets."""
    description = await admin.describe_group(group_id)
    committed = await admin.list_group_offsets(group_id)
    if args.all_topics:
        partitions = sorted(committed)
    else:
        partitions = []
        for spec in args.topic:
            topic, wanted = parse_topic_spec(spec)
            info = await admin.cluster.topic(topic, timeout_s=admin.request_timeout_ms / 1000)
            count = len(info.partitions)
            for p in wanted if wanted is not None else range(count):
                if not 0 <= p < count:
                    raise MinibrokerError(f"{topic}-{p}: topic {topic!r} has {count} partitions")
                partitions.append((topic, p))
    if not partitions:
        return description.state, committed, {}
    timeout = admin.request_timeout_ms / 1000
    starts = await list_offsets(
        admin.cluster, dict.fromkeys(partitions, EARLIEST), timeout_s=timeout
    )
    ends = await list_offsets(admin.cluster, dict.fromkeys(partitions, LATEST), timeout_s=timeout)
    at_time = None
    if target.kind == "datetime":
        found = await list_offsets(
            admin.cluster, dict.fromkeys(partitions, target.value), timeout_s=timeout
        )
        at_time = {tp: o for tp, (o, _) in found.items()}
    new = plan(
        partitions,
        target,
        committed=committed,
        starts={tp: o for tp, (o, _) in starts.items()},
        ends={tp: o for tp, (o, _) in ends.items()},
        at_time=at_time,
    )
    return description.state, committed, new

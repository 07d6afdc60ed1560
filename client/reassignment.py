"""Kafka's reassignment JSON: parsing, checking and the --generate proposal (pure, no I/O).

The file ``minibroker reassign --reassignment-json-file`` reads is Kafka's::

    {"version": 1,
     "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2],
                     "log_dirs": ["any", "/data/1"]}]}

``log_dirs`` is optional; when present it has one entry per replica, each ``"any"``
(the broker picks) or an absolute path of one of that broker's log dirs. The topics
file of ``--generate`` is ``{"version": 1, "topics": [{"topic": "t"}]}``.

Every problem is a ``ReassignmentInputError`` whose message is one line naming the
entry at fault, so the CLI can print it as it is.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from minibroker.protocol.errors import MinibrokerError

ANY_LOG_DIR = "any"
SUPPORTED_VERSION = 1


class ReassignmentInputError(MinibrokerError):
    """The reassignment or topics JSON is malformed or asks for something impossible."""


@dataclass(frozen=True, slots=True)
class PartitionMove:
    """One entry of the reassignment JSON: the target replicas and, per replica, the
    log dir it should end up in (None: any)."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    log_dirs: tuple[str | None, ...]

    @property
    def tp(self) -> tuple[str, int]:
        return self.topic, self.partition

    def dir_moves(self) -> dict[tuple[str, int, int], str]:
        """{(topic, partition, broker): absolute dir} for the replicas with a dir."""
        return {
            (self.topic, self.partition, broker): path
            for broker, path in zip(self.replicas, self.log_dirs, strict=True)
            if path is not None
        }


def _load(text: str, what: str) -> dict[str, Any]:
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ReassignmentInputError(f"{what} is not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise ReassignmentInputError(f"{what} must be a JSON object")
    version = doc.get("version", SUPPORTED_VERSION)
    if version != SUPPORTED_VERSION:
        raise ReassignmentInputError(f"{what}: unsupported version {version!r} (expected 1)")
    return doc


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ReassignmentInputError(f"{what} must be an integer, not {json.dumps(value)}")
    return value


def parse_reassignment(text: str) -> list[PartitionMove]:
    """Parse and check a reassignment JSON document."""
    doc = _load(text, "reassignment JSON")
    entries = doc.get("partitions")
    if not isinstance(entries, list) or not entries:
        raise ReassignmentInputError('reassignment JSON needs a non-empty "partitions" list')
    moves: list[PartitionMove] = []
    seen: set[tuple[str, int]] = set()
    for number, entry in enumerate(entries):
        where = f"partitions[{number}]"
        if not isinstance(entry, dict):
            raise ReassignmentInputError(f"{where} must be an object")
        topic = entry.get("topic")
        if not isinstance(topic, str) or not topic:
            raise ReassignmentInputError(f'{where} needs a "topic" string')
        partition = _int(entry.get("partition"), f"{where}.partition")
        where = f"{topic}-{partition}"
        if partition < 0:
            raise ReassignmentInputError(f"{where}: partition must not be negative")
        if (topic, partition) in seen:
            raise ReassignmentInputError(f"{where} is listed twice")
        seen.add((topic, partition))
        raw_replicas = entry.get("replicas")
        if not isinstance(raw_replicas, list) or not raw_replicas:
            raise ReassignmentInputError(f'{where}: "replicas" must be a non-empty list')
        replicas = tuple(_int(r, f"{where} replica") for r in raw_replicas)
        if len(set(replicas)) != len(replicas):
            raise ReassignmentInputError(f"{where}: replicas {list(replicas)} repeat a broker")
        if any(r < 0 for r in replicas):
            raise ReassignmentInputError(f"{where}: broker ids must not be negative")
        moves.append(
            PartitionMove(topic, partition, replicas, _log_dirs(entry, where, len(replicas)))
        )
    return moves


def _log_dirs(entry: Mapping[str, Any], where: str, count: int) -> tuple[str | None, ...]:
    raw = entry.get("log_dirs")
    if raw is None:
        return (None,) * count
    if not isinstance(raw, list):
        raise ReassignmentInputError(f'{where}: "log_dirs" must be a list')
    if len(raw) != count:
        raise ReassignmentInputError(
            f"{where}: log_dirs has {len(raw)} entries but replicas has {count}"
        )
    dirs: list[str | None] = []
    for path in raw:
        if path == ANY_LOG_DIR:
            dirs.append(None)
        elif not isinstance(path, str) or not PurePosixPath(path).is_absolute():
            raise ReassignmentInputError(
                f'{where}: log dir {json.dumps(path)} is not "any" or an absolute path'
            )
        else:
            dirs.append(path)
    return tuple(dirs)


def parse_topics_to_move(text: str) -> list[str]:
    """The topics of a ``--topics-to-move-json-file`` document, in file order."""
    doc = _load(text, "topics-to-move JSON")
    entries = doc.get("topics")
    if not isinstance(entries, list) or not entries:
        raise ReassignmentInputError('topics-to-move JSON needs a non-empty "topics" list')
    topics: list[str] = []
    for number, entry in enumerate(entries):
        topic = entry.get("topic") if isinstance(entry, dict) else None
        if not isinstance(topic, str) or not topic:
            raise ReassignmentInputError(f'topics[{number}] needs a "topic" string')
        if topic not in topics:
            topics.append(topic)
    return topics


def parse_broker_list(text: str) -> list[int]:
    """``1,2,3`` -> [1, 2, 3]."""
    try:
        brokers = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ReassignmentInputError(f"broker list {text!r} is not comma-separated ids") from None
    if not brokers or len(set(brokers)) != len(brokers) or min(brokers) < 0:
        raise ReassignmentInputError(f"broker list {text!r} must name distinct broker ids")
    return brokers


def check_against_cluster(
    moves: Sequence[PartitionMove],
    partitions_of: Mapping[str, int],
    live_brokers: Sequence[int],
) -> None:
    """Unknown topics, partitions and brokers, found before anything is sent."""
    for move in moves:
        where = f"{move.topic}-{move.partition}"
        if move.topic not in partitions_of:
            raise ReassignmentInputError(f"{where}: topic {move.topic!r} does not exist")
        if move.partition >= partitions_of[move.topic]:
            raise ReassignmentInputError(
                f"{where}: topic {move.topic!r} has {partitions_of[move.topic]} partitions"
            )
        unknown = sorted(set(move.replicas) - set(live_brokers))
        if unknown:
            raise ReassignmentInputError(f"{where}: unknown broker(s) {unknown}")


def assignment_json(assignment: Mapping[tuple[str, int], Sequence[int]]) -> dict[str, Any]:
    """Kafka's JSON of an assignment (log_dirs all "any"), sorted by topic and partition."""
    return {
        "version": SUPPORTED_VERSION,
        "partitions": [
            {
                "topic": topic,
                "partition": partition,
                "replicas": list(replicas),
                "log_dirs": [ANY_LOG_DIR] * len(replicas),
            }
            for (topic, partition), replicas in sorted(assignment.items())
        ],
    }


Assign = Callable[[Sequence[int], int, int], Mapping[int, Sequence[int]]]
"""(brokers, partitions, replication factor) -> partition -> replicas."""


def propose(
    current: Mapping[tuple[str, int], Sequence[int]],
    topics: Sequence[str],
    brokers: Sequence[int],
    assign: Assign,
) -> dict[tuple[str, int], tuple[int, ...]]:
    """Kafka's --generate: each topic's partitions spread over ``brokers`` by the topic
    creation algorithm (``assign``), keeping each partition's replication factor."""
    proposed: dict[tuple[str, int], tuple[int, ...]] = {}
    for topic in topics:
        parts = sorted(p for t, p in current if t == topic)
        if not parts:
            raise ReassignmentInputError(f"topic {topic!r} does not exist")
        factor = len(current[(topic, parts[0])])
        if factor > len(brokers):
            raise ReassignmentInputError(
                f"topic {topic!r} has replication factor {factor} but the broker list has "
                f"{len(brokers)} broker(s)"
            )
        layout = assign(brokers, len(parts), factor)
        for partition in parts:
            proposed[(topic, partition)] = tuple(layout[partition])
    return proposed

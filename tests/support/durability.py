"""A durability checker: did the cluster keep every write it acknowledged?

Producers in a fault test send unique values and tell the checker what happened to each
send (attempted, retried, acknowledged at an offset, failed). After the faults heal, a
consumer reads every partition from its start and hands the checker what it read. The
checker then states the promises of an acks=all, min.insync.replicas >= 2 cluster:

1. every acknowledged value is present, at the offset its acknowledgement returned;
2. no offset of a partition holds two values (the read log has no repeated offsets);
3. no value appears twice, unless its send was retried (a retry after a lost response
   may legitimately append it again);
4. offsets only grow: within a partition the log reads back in strictly increasing
   offset order.

With idempotent producers (``DurabilityChecker(idempotent=True)``) two more:

5. no value appears twice, retried or not;
6. each producer's values read back, within a partition, in the order it sent them
   (``attempted(value, producer=name)`` records that order).

Violations are collected, not raised one by one, so a failing run shows all of them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class ReadRecord:
    topic: str
    partition: int
    offset: int
    value: bytes


@dataclass
class DurabilityReport:
    acknowledged: int
    read: int
    violations: list[str] = field(default_factory=list)
    lost: list[bytes] = field(default_factory=list)
    """The acknowledged values not read back where their acknowledgement said."""

    @property
    def ok(self) -> bool:
        return not self.violations

    def summary(self, limit: int = 20) -> str:
        head = f"{self.acknowledged} acknowledged, {self.read} read back"
        if self.ok:
            return head + ", no violations"
        shown = "\n  ".join(self.violations[:limit])
        more = len(self.violations) - limit
        tail = f"\n  ... and {more} more" if more > 0 else ""
        return f"{head}, {len(self.violations)} violations:\n  {shown}{tail}"


class DurabilityChecker:
    """Collects what producers saw, then checks what a consumer read back."""

    def __init__(self, *, idempotent: bool = False) -> None:
        self.idempotent = idempotent
        self._acks: dict[bytes, tuple[TopicPartition, int]] = {}
        self._retried: set[bytes] = set()
        self._attempted: set[bytes] = set()
        self._send_index: dict[bytes, tuple[str, int]] = {}  # value -> (producer, nth send)
        self._sent_by: dict[str, int] = defaultdict(int)

    def attempted(self, value: bytes, producer: str | None = None) -> None:
        if value in self._attempted:
            raise ValueError(f"value {value!r} was sent before: fault tests need unique values")
        self._attempted.add(value)
        if producer is not None:
            self._send_index[value] = (producer, self._sent_by[producer])
            self._sent_by[producer] += 1

    def retried(self, value: bytes) -> None:
        self._retried.add(value)

    def acknowledged(self, value: bytes, topic: str, partition: int, offset: int) -> None:
        self._acks[value] = ((topic, partition), offset)

    @property
    def acknowledged_count(self) -> int:
        return len(self._acks)

    def check(self, read: Iterable[ReadRecord]) -> DurabilityReport:
        violations: list[str] = []
        lost: list[bytes] = []
        at_offset: dict[tuple[TopicPartition, int], bytes] = {}
        seen: dict[bytes, list[tuple[TopicPartition, int]]] = defaultdict(list)
        last_offset: dict[TopicPartition, int] = {}
        last_sent: dict[tuple[TopicPartition, str], tuple[int, bytes]] = {}
        count = 0
        for record in read:
            count += 1
            tp = (record.topic, record.partition)
            key = (tp, record.offset)
            if key in at_offset:
                violations.append(
                    f"{tp} offset {record.offset} holds two values: "
                    f"{at_offset[key]!r} and {record.value!r}"
                )
            at_offset[key] = record.value
            previous = last_offset.get(tp)
            if previous is not None and record.offset <= previous:
                violations.append(
                    f"{tp} offsets went backwards: {record.offset} read after {previous}"
                )
            last_offset[tp] = record.offset
            seen[record.value].append(key)
            sent = self._send_index.get(record.value)
            if sent is not None:
                producer, index = sent
                before = last_sent.get((tp, producer))
                if before is not None and index <= before[0]:
                    violations.append(
                        f"{tp} offset {record.offset}: {producer}'s {record.value!r} reads "
                        f"after {before[1]!r}, which it sent later"
                    )
                last_sent[(tp, producer)] = (index, record.value)
        for value, (tp, offset) in self._acks.items():
            if offset < 0:  # acknowledged without an offset (a deduplicated retry)
                if not any(where[0] == tp for where in seen.get(value, ())):
                    violations.append(f"acknowledged {value!r} in {tp} is lost")
                    lost.append(value)
                continue
            found = at_offset.get((tp, offset))
            if found != value:
                lost.append(value)
                where = seen.get(value)
                detail = f"found instead at {where}" if where else "not found anywhere"
                violations.append(
                    f"acknowledged {value!r} at {tp} offset {offset} is lost ({detail}; "
                    f"that offset holds {found!r})"
                )
        for value, places in seen.items():
            if len(places) > 1 and self.idempotent:
                violations.append(f"{value!r} appears {len(places)} times: {places}")
            elif len(places) > 1 and value not in self._retried:
                violations.append(
                    f"{value!r} appears {len(places)} times without a retry: {places}"
                )
        return DurabilityReport(len(self._acks), count, violations, lost)

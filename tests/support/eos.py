"""The exactly-once checker of consume-transform-produce runs (tests/fault).

The application under test reads input records, writes one output per input in a
transaction together with its consumer offsets, and tells the checker what each
attempt (one transaction) wrote: ``attempted(attempt, outputs)`` before its commit,
``committed(attempt)`` when the commit returned. An output value is the input value,
``|``, and the attempt's number, so every visible output names its input and its
transaction.

``check(inputs, visible)`` reads what a read_committed consumer found in the output
topic and reports:

- ``missing``: an input with no visible output (its processing was lost);
- ``duplicated``: an input with more than one visible output (processed twice);
- ``torn``: an attempt only part of whose outputs are visible (not atomic);
- ``lost``: an attempt whose commit returned but whose outputs are not all visible;
- ``foreign``: a visible output no attempt wrote (an aborted or invented record would
  be caught by ``torn``/``duplicated`` first; this catches garbage).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field


def output_value(input_value: bytes, attempt: int) -> bytes:
    return b"%s|%d" % (input_value, attempt)


def parse_output(value: bytes) -> tuple[bytes, int] | None:
    source, sep, attempt = value.rpartition(b"|")
    if not sep or not attempt.isdigit():
        return None
    return source, int(attempt)


@dataclass
class EosReport:
    missing: list[bytes] = field(default_factory=list)
    duplicated: dict[bytes, int] = field(default_factory=dict)
    torn: list[int] = field(default_factory=list)
    lost: list[int] = field(default_factory=list)
    foreign: list[bytes] = field(default_factory=list)
    visible: int = 0
    attempts: int = 0
    committed: int = 0

    @property
    def ok(self) -> bool:
        return not (self.missing or self.duplicated or self.torn or self.lost or self.foreign)

    def summary(self) -> str:
        return (
            f"{self.visible} outputs visible from {self.attempts} transactions"
            f" ({self.committed} commits returned); missing {len(self.missing)}"
            f" {self.missing[:5]}, duplicated {len(self.duplicated)}"
            f" {list(self.duplicated.items())[:5]}, torn {self.torn[:5]}, lost"
            f" {self.lost[:5]}, foreign {self.foreign[:5]}"
        )


class EosChecker:
    def __init__(self) -> None:
        self.attempts: dict[int, set[bytes]] = {}
        self.commits: set[int] = set()

    def attempted(self, attempt: int, outputs: Iterable[bytes]) -> None:
        self.attempts[attempt] = set(outputs)

    def committed(self, attempt: int) -> None:
        self.commits.add(attempt)

    def check(self, inputs: Iterable[bytes], visible: Iterable[bytes]) -> EosReport:
        report = EosReport(attempts=len(self.attempts), committed=len(self.commits))
        seen = list(visible)
        report.visible = len(seen)
        per_input: Counter[bytes] = Counter()
        per_attempt: dict[int, set[bytes]] = {}
        for value in seen:
            parsed = parse_output(value)
            if parsed is None or value not in self.attempts.get(parsed[1], ()):
                report.foreign.append(value)
                continue
            per_input[parsed[0]] += 1
            per_attempt.setdefault(parsed[1], set()).add(value)
        report.missing = [value for value in inputs if per_input[value] == 0]
        report.duplicated = {value: n for value, n in per_input.items() if n > 1}
        report.torn = sorted(
            attempt for attempt, found in per_attempt.items() if found != self.attempts[attempt]
        )
        report.lost = sorted(
            attempt
            for attempt in self.commits
            if per_attempt.get(attempt, set()) != self.attempts[attempt]
        )
        return report

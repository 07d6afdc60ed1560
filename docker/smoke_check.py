"""The data scripts/docker-smoke produces and its check of the Spark report (host side).

    python3 docker/smoke_check.py lines FIRST LAST          # produce's stdin
    python3 docker/smoke_check.py report TOPIC PARTITIONS FILE

``lines`` prints ``key-N:record-N`` for N in FIRST..LAST: keyed records, so murmur2 of
the keys (Kafka's partitioner, the CLI's too) spreads them over every partition of the
topic, wherever the sticky partitioner would have put keyless ones (it once put all
2,000 on two of three partitions, and the report had no line for the third). The
values stay ``record-N``, what the smoke reads back.

``report`` checks the segment report's summary in FILE: no corruption, and records in
every partition 0..PARTITIONS-1 of TOPIC on some replica; otherwise it names the
partitions it missed and exits 1. Standard library only: it runs on the host's python3.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence

NO_CORRUPTION = "Corruption: none found"


def lines(first: int, last: int) -> list[str]:
    return [f"key-{n}:record-{n}" for n in range(first, last + 1)]


def report_problems(summary: str, topic: str, partitions: int) -> list[str]:
    """What is wrong with the report ``summary`` for ``topic`` (empty: nothing)."""
    problems = []
    if not any(line.startswith(NO_CORRUPTION) for line in summary.splitlines()):
        problems.append(f"no '{NO_CORRUPTION}' line")
    # "  smoke-0 @ /data/broker-1/logs-0: 339 records in 3 batches, ..." (or "@ broker 1
    # (/data/...)" when the log dir names its broker)
    replica = re.compile(rf"^\s+{re.escape(topic)}-(\d+) @ [^:]+: ([\d,]+) records")
    with_records = {
        int(found[1])
        for found in map(replica.match, summary.splitlines())
        if found is not None and int(found[2].replace(",", "")) > 0
    }
    missed = [f"{topic}-{p}" for p in range(partitions) if p not in with_records]
    if missed:
        problems.append(f"no records of {', '.join(missed)} on any replica")
    return problems


def main(argv: Sequence[str]) -> int:
    if len(argv) == 3 and argv[0] == "lines":
        print("\n".join(lines(int(argv[1]), int(argv[2]))))
        return 0
    if len(argv) == 4 and argv[0] == "report":
        with open(argv[3], encoding="utf-8", errors="replace") as f:
            problems = report_problems(f.read(), argv[1], int(argv[2]))
        print("; ".join(problems))
        return 1 if problems else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

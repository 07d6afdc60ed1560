"""Idempotent producers for tests/fault/test_network_partitions.py, run inside the
client's network namespace (the real client follows the brokers' advertised addresses,
which only exist there):

    ip netns exec NS python -m tests.fault.idempotent_workload \\
        --bootstrap H:P,... --topic T --seed S --producers N

It prints ``ready`` once every producer knows the topic's partitions, then writes
(tests/fault/test_idempotent_durability.py's ``write``) until its standard input closes,
waits until every delivery settled and exits. Every event is one JSON line on standard
output, for the test to replay into its own checker::

    {"attempted": VALUE, "producer": NAME}
    {"acked": VALUE, "topic": T, "partition": P, "offset": O}
    {"failed": "VALUE: error"}
"""

from __future__ import annotations

import argparse
import json
import sys

import trio

from tests.fault.test_idempotent_durability import idempotent_producers, write
from tests.support.durability import DurabilityChecker

DELIVERY_TIMEOUT_MS = 120_000  # beyond every fault and heal here: no delivery may expire


def emit(event: dict[str, object]) -> None:
    print(json.dumps(event), flush=True)


class ReportingChecker(DurabilityChecker):
    """Passes what the producers saw on to standard output."""

    def attempted(self, value: bytes, producer: str | None = None) -> None:
        super().attempted(value, producer)
        emit({"attempted": value.decode(), "producer": producer})

    def acknowledged(self, value: bytes, topic: str, partition: int, offset: int) -> None:
        super().acknowledged(value, topic, partition, offset)
        emit({"acked": value.decode(), "topic": topic, "partition": partition, "offset": offset})


async def main_async(bootstrap: str, topic: str, seed: int, count: int) -> None:
    checker = ReportingChecker(idempotent=True)
    failures: list[str] = []
    stop = trio.Event()
    async with idempotent_producers(bootstrap, count, topic, DELIVERY_TIMEOUT_MS) as producers:
        print("ready", flush=True)
        async with trio.open_nursery() as nursery:
            for i, producer in enumerate(producers):
                nursery.start_soon(write, producer, f"i{i}", seed, checker, failures, stop, topic)
            await trio.to_thread.run_sync(sys.stdin.buffer.read, abandon_on_cancel=True)
            stop.set()  # the writers return once every delivery settled
    for failure in failures:
        emit({"failed": failure})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--producers", type=int, default=2)
    args = parser.parse_args()
    trio.run(main_async, args.bootstrap, args.topic, args.seed, args.producers)


if __name__ == "__main__":
    main()

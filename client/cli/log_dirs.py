"""``minibroker log-dirs describe``: every broker's log dirs and the replicas in them.

Like kafka-log-dirs.sh --describe: ``--broker-list 1,2`` (default: every broker) and
``--topic-list t1,t2`` (default: every topic). The JSON on stdout is Kafka's::

    {"version":1,"brokers":[{"broker":1,"logDirs":[{"logDir":"/data/0","error":null,
      "partitions":[{"partition":"t-0","size":123,"offsetLag":0,"isFuture":false}]}]}]}

``error`` is the Kafka error name of an offline dir (KAFKA_STORAGE_ERROR), else null.
A partition of a compacted topic also has ``dirtyRatio``: the share of its log the
cleaner has not cleaned yet (0..1), what ``min.cleanable.dirty.ratio`` is compared to.
The two progress lines Kafka's tool prints go to stderr, so stdout is pure JSON.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from minibroker.client.admin import Admin, LogDirDescription
from minibroker.client.cli.common import add_bootstrap, command_security, print_json, run_async
from minibroker.client.reassignment import ReassignmentInputError, parse_broker_list
from minibroker.net.security import ClientSecurity
from minibroker.protocol.errors import UsageError

HELP = "describe the log dirs of brokers and the replicas in them"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("describe",), help="what to do (describe)")
    parser.add_argument("--broker-list", metavar="1,2", help="only these brokers")
    parser.add_argument("--topic-list", metavar="T1,T2", help="only these topics")
    add_bootstrap(parser)


def run(args: argparse.Namespace) -> int:
    brokers = None
    if args.broker_list is not None:
        try:
            brokers = parse_broker_list(args.broker_list)
        except ReassignmentInputError as exc:
            raise UsageError(str(exc)) from None
    topics = None
    if args.topic_list is not None:
        topics = {t for t in args.topic_list.split(",") if t}
    return run_async(_describe, args.bootstrap_server, brokers, topics, command_security(args))


async def _describe(
    bootstrap: str,
    brokers: list[int] | None,
    topics: set[str] | None,
    security: ClientSecurity | None,
) -> int:
    print("Querying brokers for log directories information", file=sys.stderr)
    async with Admin(bootstrap, config=security) as admin:
        if brokers is not None:
            known = {b.node_id for b in (await admin.describe_cluster()).brokers}
            unknown = sorted(set(brokers) - known)
            if unknown:
                raise UsageError(f"unknown broker(s) {unknown}")
        described = await admin.describe_log_dirs(brokers)
    document = log_dirs_json(described, topics)
    queried = ",".join(str(b["broker"]) for b in document["brokers"])
    print(f"Received log directory information from brokers {queried}", file=sys.stderr)
    print_json(document)
    return 0


def log_dirs_json(described: list[LogDirDescription], topics: set[str] | None) -> dict[str, Any]:
    by_broker: dict[int, list[dict[str, Any]]] = {}
    for d in described:
        partitions = [
            {
                "partition": f"{r.topic}-{r.partition}",
                "size": r.size,
                "offsetLag": r.offset_lag,
                "isFuture": r.is_future,
            }
            | ({"dirtyRatio": round(r.dirty_ratio, 4)} if r.dirty_ratio >= 0 else {})
            for r in d.replicas
            if topics is None or r.topic in topics
        ]
        by_broker.setdefault(d.broker, []).append(
            {"logDir": d.path, "error": d.error, "partitions": partitions}
        )
    return {
        "version": 1,
        "brokers": [{"broker": b, "logDirs": dirs} for b, dirs in sorted(by_broker.items())],
    }

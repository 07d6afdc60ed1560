"""``minibroker transactions list | describe ID | describe-producers TOPIC PARTITION |
abort --topic T --partition P --start-offset O``: kafka-transactions.sh with less
typing (client/admin_transactions.py does the work).

``--format json`` prints:

- ``list``: ``[{"transactional_id", "producer_id", "state", "coordinator"}]``;
- ``describe``: ``{"transactional_id", "coordinator", "state", "producer_id",
  "producer_epoch", "timeout_ms", "start_time_ms", "partitions": [{"topic",
  "partition"}]}``;
- ``describe-producers``: ``[{"producer_id", "producer_epoch", "last_sequence",
  "last_timestamp", "coordinator_epoch", "current_txn_start_offset"}]``;
- ``abort``: the aborted producer, as one ``describe-producers`` entry.
"""

from __future__ import annotations

import argparse
import dataclasses

from minibroker.client.admin import Admin
from minibroker.client.admin_transactions import (
    abort_transaction,
    describe_producers,
    describe_transaction,
    list_transactions,
)
from minibroker.client.cli.common import (
    add_bootstrap,
    add_format,
    command_security,
    print_json,
    print_table,
    run_async,
)

HELP = "list and describe transactions, their producers; abort a hanging one"


def configure(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", parser_class=type(parser))
    actions.required = True
    listing = actions.add_parser("list", help="every transactional id and its state")
    describe = actions.add_parser("describe", help="one transactional id's transaction")
    describe.add_argument("transactional_id", metavar="ID")
    producers = actions.add_parser(
        "describe-producers", help="a partition's active producers and open transactions"
    )
    producers.add_argument("topic", metavar="TOPIC")
    producers.add_argument("partition", type=int, metavar="PARTITION")
    abort = actions.add_parser(
        "abort", help="abort a hanging transaction: its ABORT marker, written by the leader"
    )
    abort.add_argument("--topic", required=True)
    abort.add_argument("--partition", type=int, required=True)
    abort.add_argument(
        "--start-offset",
        type=int,
        required=True,
        help="the first offset of the open transaction (describe-producers shows it)",
    )
    for sub in (listing, describe, producers, abort):
        add_bootstrap(sub)
        add_format(sub)


def run(args: argparse.Namespace) -> int:
    return run_async(_run, args)


async def _run(args: argparse.Namespace) -> int:
    async with Admin(args.bootstrap_server, config=command_security(args)) as admin:
        cluster = admin.cluster
        if args.action == "list":
            listed = await list_transactions(cluster)
            if args.format == "json":
                print_json([dataclasses.asdict(t) for t in listed])
            else:
                print_table(
                    ("TRANSACTIONAL-ID", "PRODUCER-ID", "STATE", "COORDINATOR"),
                    [(t.transactional_id, t.producer_id, t.state, t.coordinator) for t in listed],
                )
        elif args.action == "describe":
            d = await describe_transaction(cluster, args.transactional_id)
            if args.format == "json":
                described = dataclasses.asdict(d)
                described["partitions"] = [{"topic": t, "partition": p} for t, p in d.partitions]
                print_json(described)
            else:
                print_table(
                    (
                        "TRANSACTIONAL-ID",
                        "COORDINATOR",
                        "STATE",
                        "PRODUCER-ID",
                        "EPOCH",
                        "TIMEOUT-MS",
                        "START-TIME-MS",
                        "PARTITIONS",
                    ),
                    [
                        (
                            d.transactional_id,
                            d.coordinator,
                            d.state,
                            d.producer_id,
                            d.producer_epoch,
                            d.timeout_ms,
                            d.start_time_ms,
                            ",".join(f"{t}-{p}" for t, p in d.partitions) or "-",
                        )
                    ],
                )
        elif args.action == "describe-producers":
            producers = await describe_producers(cluster, args.topic, args.partition)
            if args.format == "json":
                print_json([dataclasses.asdict(p) for p in producers])
            else:
                print_table(
                    (
                        "PRODUCER-ID",
                        "EPOCH",
                        "LAST-SEQUENCE",
                        "LAST-TIMESTAMP",
                        "COORDINATOR-EPOCH",
                        "CURRENT-TXN-START-OFFSET",
                    ),
                    [
                        (
                            p.producer_id,
                            p.producer_epoch,
                            p.last_sequence,
                            p.last_timestamp,
                            p.coordinator_epoch,
                            p.current_txn_start_offset,
                        )
                        for p in producers
                    ],
                )
        else:
            aborted = await abort_transaction(
                cluster, args.topic, args.partition, args.start_offset
            )
            if args.format == "json":
                print_json(dataclasses.asdict(aborted))
            else:
                print(
                    f"Aborted the transaction of producer {aborted.producer_id} (epoch"
                    f" {aborted.producer_epoch}) starting at {args.topic}-{args.partition}"
                    f" offset {args.start_offset}"
                )
    return 0

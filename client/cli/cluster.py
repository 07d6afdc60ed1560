"""``minibroker cluster info``: the cluster id, the active controller and the brokers."""

from __future__ import annotations

import argparse

from minibroker.client.admin import Admin
from minibroker.client.cli.common import (
    add_bootstrap,
    add_format,
    command_security,
    print_json,
    print_table,
    run_async,
)

HELP = "show the cluster: id, active controller, brokers"


def configure(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", parser_class=type(parser))
    actions.required = True
    info = actions.add_parser("info", help="cluster id, controller and brokers")
    add_bootstrap(info)
    add_format(info)


def run(args: argparse.Namespace) -> int:
    return run_async(_run, args)


async def _run(args: argparse.Namespace) -> int:
    async with Admin(args.bootstrap_server, config=command_security(args)) as admin:
        cluster = await admin.describe_cluster()
    if args.format == "json":
        print_json(
            {
                "cluster_id": cluster.cluster_id,
                "controller_id": cluster.controller_id,
                "brokers": [
                    {
                        "id": b.node_id,
                        "host": b.host,
                        "port": b.port,
                        "rack": b.rack,
                        "kafka": b.kafka,
                    }
                    for b in cluster.brokers
                ],
            }
        )
        return 0
    print(f"Cluster: {cluster.cluster_id or '-'}")
    controller = cluster.controller_id if cluster.controller_id >= 0 else "none"
    print(f"Controller: {controller}")
    print_table(
        ("BROKER", "ADDRESS", "KAFKA", "RACK", "CONTROLLER"),
        [
            (
                b.node_id,
                b.address,
                b.kafka or "-",
                b.rack or "-",
                "*" if b.node_id == cluster.controller_id else "",
            )
            for b in cluster.brokers
        ],
    )
    return 0

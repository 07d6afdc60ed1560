"""``minibroker quotas describe|alter``: client quotas with kafka-configs' client-quota
options, through DescribeClientQuotas / AlterClientQuotas (client/quotas.py).

::

    minibroker quotas describe [--entity-type users --entity-name alice] --format json
    minibroker quotas alter --entity-type users --entity-name alice \\
        --add-config producer_byte_rate=1048576,consumer_byte_rate=2097152
    minibroker quotas alter --entity-type clients --entity-default \\
        --add-config request_percentage=50 --delete-config producer_byte_rate

Keys: ``producer_byte_rate`` and ``consumer_byte_rate`` (bytes/s per broker),
``request_percentage`` (percent of one request thread per broker). A quota on the
default entity applies to each user (client id) without its own, separately.

``describe --format json`` prints a list of ``{"entity": {"user": "alice"}, "quotas":
{"producer_byte_rate": 1048576}}`` (a default entity's name is null).
"""

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
from minibroker.client.cli.config_args import parse_add_config, parse_delete_config
from minibroker.client.cli.quota_entities import ENTITY_TYPE, parse_quota_values, quota_text
from minibroker.client.quotas import alter_client_quotas, describe_client_quotas
from minibroker.protocol.errors import UsageError

HELP = "describe or alter client quotas (users, client ids)"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("describe", "alter"), help="what to do")
    parser.add_argument("--entity-type", choices=tuple(ENTITY_TYPE), help="users or client ids")
    parser.add_argument("--entity-name", metavar="NAME", help="the user or client id")
    parser.add_argument("--entity-default", action="store_true", help="the type's default entity")
    parser.add_argument(
        "--add-config",
        action="append",
        default=[],
        metavar="K=V[,K=V]",
        help="quotas to set: producer_byte_rate, consumer_byte_rate, request_percentage",
    )
    parser.add_argument(
        "--delete-config", action="append", default=[], metavar="K[,K]", help="quotas to remove"
    )
    add_format(parser)
    add_bootstrap(parser)


def run(args: argparse.Namespace) -> int:
    named = args.entity_name is not None or args.entity_default
    if args.entity_name is not None and args.entity_default:
        raise UsageError("give one of --entity-name NAME and --entity-default")
    if (args.entity_type is None) == named:
        raise UsageError("--entity-type goes with --entity-name NAME or --entity-default")
    if args.action == "alter":
        if args.entity_type is None:
            raise UsageError("alter needs --entity-type and --entity-name or --entity-default")
        if not (args.add_config or args.delete_config):
            raise UsageError("alter needs --add-config K=V or --delete-config K")
    return run_async(_run, args)


async def _run(args: argparse.Namespace) -> int:
    entity = (
        None
        if args.entity_type is None
        else {ENTITY_TYPE[args.entity_type]: None if args.entity_default else args.entity_name}
    )
    async with Admin(args.bootstrap_server, config=command_security(args)) as admin:
        if args.action == "alter":
            assert entity is not None
            await alter_client_quotas(
                admin.cluster,
                entity,
                parse_quota_values(parse_add_config(args.add_config)),
                parse_delete_config(args.delete_config),
            )
            print(f"Completed updating quotas of {_label(entity)}.")
            return 0
        found = await describe_client_quotas(admin.cluster, entity)
    if args.format == "json":
        print_json([{"entity": e, "quotas": values} for e, values in found])
        return 0
    rows = [
        (_label(e), ",".join(f"{k}={quota_text(v)}" for k, v in sorted(values.items())))
        for e, values in found
    ]
    print_table(("ENTITY", "QUOTAS"), rows)
    return 0


def _label(entity: dict[str, str | None]) -> str:
    return " ".join(
        f"{kind}={'<default>' if name is None else name}" for kind, name in entity.items()
    )

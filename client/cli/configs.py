"""``minibroker configs describe|alter``: dynamic configs with kafka-configs' options.

::

    minibroker configs describe --entity-type topics --entity-name orders [--all]
    minibroker configs alter --entity-type topics --entity-name orders \\
        --add-config retention.ms=3600000,cleanup.policy=[compact,delete] \\
        --delete-config segment.ms
    minibroker configs alter --entity-type brokers --entity-default \\
        --add-config log.retention.ms=86400000
    minibroker configs alter --entity-type users --entity-name alice \\
        --add-config producer_byte_rate=1048576

Topics and brokers go through DescribeConfigs and IncrementalAlterConfigs (a broker is
named by its id; ``--entity-default`` is every broker's dynamic default). Users and
clients hold client quotas (DescribeClientQuotas / AlterClientQuotas, client/quotas.py)
and, for users, SCRAM credentials (``SCRAM-SHA-512=[password=...]``, through
AlterUserScramCredentials, client/scram.py). As in kafka-configs, ``describe`` lists what
was set dynamically; ``--all`` lists every key of a topic or broker.

``describe --format json`` prints::

    {"entity_type": "topics", "entity_name": "orders",
     "configs": [{"name": "retention.ms", "value": "3600000", "source": "TOPIC_CONFIG",
                  "read_only": false, "sensitive": false}]}

(a default entity's ``entity_name`` is null).
"""

from __future__ import annotations

import argparse
from typing import Any

from minibroker.client.admin import Admin, ConfigEntry, ConfigOp
from minibroker.client.cli.common import (
    add_bootstrap,
    add_format,
    command_security,
    print_json,
    run_async,
)
from minibroker.client.cli.config_args import parse_add_config, parse_delete_config
from minibroker.client.cli.quota_entities import run_entity
from minibroker.protocol.errors import UsageError
from minibroker.protocol.messages.admin import OP_DELETE, OP_SET
from minibroker.protocol.messages.cluster import RESOURCE_BROKER, RESOURCE_TOPIC

HELP = "describe or alter dynamic configs of topics, brokers, users and clients"

ENTITY_TYPES = ("topics", "brokers", "users", "clients")
SOURCE_NAMES = {
    1: "TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
}
"""Kafka's ConfigSource names, as kafka-configs prints them."""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("describe", "alter"), help="what to do")
    parser.add_argument(
        "--entity-type", choices=ENTITY_TYPES, required=True, help="what the configs belong to"
    )
    parser.add_argument("--entity-name", metavar="NAME", help="topic, broker id, user or client")
    parser.add_argument(
        "--entity-default", action="store_true", help="the type's default entity (not topics)"
    )
    parser.add_argument(
        "--add-config",
        action="append",
        default=[],
        metavar="K=V[,K=V]",
        help="keys to set; a list value in brackets: k=[a,b] (repeatable)",
    )
    parser.add_argument(
        "--delete-config",
        action="append",
        default=[],
        metavar="K[,K]",
        help="keys to remove (repeatable)",
    )
    parser.add_argument("--all", action="store_true", help="describe: every key, not only set ones")
    add_format(parser)
    add_bootstrap(parser)


def run(args: argparse.Namespace) -> int:
    if args.entity_default == (args.entity_name is not None):
        raise UsageError("give exactly one of --entity-name NAME and --entity-default")
    if args.entity_default and args.entity_type == "topics":
        raise UsageError("topics have no default entity: name a topic")
    if args.action == "alter" and not (args.add_config or args.delete_config):
        raise UsageError("alter needs --add-config K=V or --delete-config K")
    if args.action == "describe" and (args.add_config or args.delete_config):
        raise UsageError("--add-config and --delete-config are for alter")
    return run_async(_run, args)


async def _run(args: argparse.Namespace) -> int:
    async with Admin(args.bootstrap_server, config=command_security(args)) as admin:
        if args.entity_type in ("topics", "brokers"):
            return await _resource(admin, args)
        return await run_entity(admin, args)


async def _resource(admin: Admin, args: argparse.Namespace) -> int:
    resource_type = RESOURCE_TOPIC if args.entity_type == "topics" else RESOURCE_BROKER
    name = "" if args.entity_default else args.entity_name
    if resource_type == RESOURCE_BROKER and name and not name.isdigit():
        raise UsageError(f"--entity-name of a broker is its id, not {name!r}")
    label = _label(args.entity_type, name)
    if args.action == "alter":
        ops = [ConfigOp(k, OP_SET, v) for k, v in parse_add_config(args.add_config).items()]
        ops += [ConfigOp(k, OP_DELETE) for k in parse_delete_config(args.delete_config)]
        await admin.incremental_alter_configs(resource_type, name, ops)
        print(f"Completed updating config for {label}.")
        return 0
    entries = await admin.describe_configs(resource_type, name)
    shown = entries if args.all else [e for e in entries if e.is_dynamic]
    if args.format == "json":
        print_json(
            {
                "entity_type": args.entity_type,
                "entity_name": name or None,
                "configs": [entry_json(e) for e in shown],
            }
        )
        return 0
    print(f"{'All' if args.all else 'Dynamic'} configs for {label} are:")
    for entry in shown:
        value = "null" if entry.value is None else entry.value
        print(
            f"  {entry.name}={value} sensitive={str(entry.is_sensitive).lower()}"
            f" source={SOURCE_NAMES.get(entry.source, entry.source)}"
        )
    return 0


def entry_json(entry: ConfigEntry) -> dict[str, Any]:
    return {
        "name": entry.name,
        "value": entry.value,
        "source": SOURCE_NAMES.get(entry.source, str(entry.source)),
        "read_only": entry.read_only,
        "sensitive": entry.is_sensitive,
    }


def _label(entity_type: str, name: str) -> str:
    if entity_type == "topics":
        return f"topic {name}"
    return f"broker {name}" if name else "brokers' default"

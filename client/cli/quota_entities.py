"""``minibroker configs ... --entity-type users|clients``: what kafka-configs keeps for
users and client ids - SCRAM credentials (users only, AlterUserScramCredentials) and
client quotas (DescribeClientQuotas / AlterClientQuotas).

A SCRAM key is set as kafka-configs spells it, ``SCRAM-SHA-512=[iterations=8192,
password=...]`` (iterations optional), and removed with ``--delete-config
SCRAM-SHA-512``; every other key is a client quota."""

from __future__ import annotations

import argparse
from typing import Any

from minibroker.client.admin import Admin
from minibroker.client.cli.common import print_json
from minibroker.client.cli.config_args import parse_add_config, parse_delete_config
from minibroker.client.quotas import alter_client_quotas, describe_client_quotas
from minibroker.client.scram import alter_scram_users, describe_scram_users
from minibroker.protocol.errors import UsageError
from minibroker.protocol.sasl import DEFAULT_ITERATIONS, SCRAM_MECHANISMS

ENTITY_TYPE = {"users": "user", "clients": "client-id"}
"""kafka-configs' --entity-type -> the quota entity type of the protocol."""


def parse_quota_values(configs: dict[str, str]) -> dict[str, float]:
    values: dict[str, float] = {}
    for key, text in configs.items():
        try:
            values[key] = float(text)
        except ValueError:
            raise UsageError(f"{key}: a quota is a number, not {text!r}") from None
    return values


def quota_text(value: float) -> str:
    """A quota as kafka-configs prints it (whole numbers without ".0")."""
    return str(int(value)) if value == int(value) else str(value)


def parse_scram_value(key: str, value: str) -> tuple[str, int]:
    """``iterations=8192,password=x`` -> (password, iterations)."""
    fields = dict(part.partition("=")[::2] for part in value.split(",") if part)
    if "password" not in fields or not fields["password"]:
        raise UsageError(f"{key}: give [password=...] (and optionally iterations=N)")
    try:
        iterations = int(fields.get("iterations", DEFAULT_ITERATIONS))
    except ValueError:
        raise UsageError(f"{key}: iterations must be a number") from None
    return fields["password"], iterations


async def run_entity(admin: Admin, args: argparse.Namespace) -> int:
    is_user = args.entity_type == "users"
    name = None if args.entity_default else args.entity_name
    added = parse_add_config(args.add_config)
    deleted = parse_delete_config(args.delete_config)
    scram_added = {k: v for k, v in added.items() if k in SCRAM_MECHANISMS}
    scram_deleted = [k for k in deleted if k in SCRAM_MECHANISMS]
    if (scram_added or scram_deleted) and (not is_user or name is None):
        raise UsageError("SCRAM credentials belong to a named user (--entity-type users)")
    quota_added = {k: v for k, v in added.items() if k not in scram_added}
    quota_deleted = [k for k in deleted if k not in scram_deleted]
    entity = {ENTITY_TYPE[args.entity_type]: name}
    if args.action == "alter":
        if quota_added or quota_deleted:
            await alter_client_quotas(
                admin.cluster, entity, parse_quota_values(quota_added), quota_deleted
            )
        if scram_added or scram_deleted:
            assert name is not None
            for key, value in scram_added.items():
                password, iterations = parse_scram_value(key, value)
                await alter_scram_users(
                    admin.cluster, passwords={(name, key): password}, iterations=iterations
                )
            if scram_deleted:
                await alter_scram_users(
                    admin.cluster, deletions=[(name, key) for key in scram_deleted]
                )
        print(f"Completed updating config for {_label(args.entity_type, name)}.")
        return 0
    described: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for found, values in await describe_client_quotas(admin.cluster, entity, strict=True):
        if found == entity:
            described.update({k: quota_text(v) for k, v in sorted(values.items())})
            sources.update(dict.fromkeys(values, "CLIENT_QUOTA"))
    if is_user and name is not None:
        held = (await describe_scram_users(admin.cluster, [name])).get(name, {})
        described.update({m: f"iterations={i}" for m, i in sorted(held.items())})
        sources.update(dict.fromkeys(held, "SCRAM_CREDENTIAL"))
    if args.format == "json":
        configs = [{"name": k, "value": v, "source": sources[k]} for k, v in described.items()]
        print_json({"entity_type": args.entity_type, "entity_name": name, "configs": configs})
        return 0
    print(f"Configs for {_label(args.entity_type, name)} are:")
    for key, value in described.items():
        print(f"  {key}={value}")
    return 0


def _label(entity_type: str, name: str | None) -> str:
    kind = "user-principal" if entity_type == "users" else "client-id"
    return f"the default {kind}" if name is None else f"{kind} '{name}'"

"""``minibroker configs ... --entity-type users|clients``: the client quotas and SCRAM
credentials of users and client ids."""

from __future__ import annotations

import argparse

from minibroker.client.admin import Admin
from minibroker.client.cli.common import UsageError


async def run_entity(admin: Admin, args: argparse.Namespace) -> int:
    raise UsageError(f"--entity-type {args.entity_type} is not served yet")

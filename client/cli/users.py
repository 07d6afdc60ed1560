"""``minibroker users add|list|delete``: SCRAM users, through the brokers' KIP-554 APIs.

Every command goes to a broker (DescribeUserScramCredentials,
AlterUserScramCredentials; client/scram.py), which stores the salted credential in
ZooKeeper (/config/users/<name>) and announces it, so every broker knows a new user at
once; on a secure cluster it needs a login allowed to Describe / Alter the cluster
(``--command-config``). The password is read from ``--password-file`` (its first
line), else from stdin (prompted without echo on a terminal), salted here and never
sent or printed.

``--zookeeper HOST:PORT`` writes ZooKeeper directly instead, as ZooKeeper-era
``kafka-configs --zookeeper`` does: the way to create the first users (the brokers' own,
the first admin) before any broker can authenticate anyone.
"""

from __future__ import annotations

import argparse
import getpass
import sys
from pathlib import Path

from minibroker.client.admin import Admin
from minibroker.client.cli.common import (
    add_bootstrap,
    add_format,
    command_security,
    print_json,
    print_table,
    run_async,
)
from minibroker.client.scram import alter_scram_users, describe_scram_users
from minibroker.protocol.errors import UsageError
from minibroker.protocol.sasl import (
    DEFAULT_ITERATIONS,
    SCRAM_MECHANISMS,
    format_scram_credential,
    make_scram_credential,
)

HELP = "manage SCRAM users (add, list, delete)"


def configure(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", parser_class=type(parser))
    actions.required = True
    add = actions.add_parser("add", help="add a user or change its password")
    add.add_argument("name", help="the user name (the principal is User:NAME)")
    add.add_argument(
        "--mechanism",
        action="append",
        choices=SCRAM_MECHANISMS,
        help="SCRAM mechanism to store a credential for (repeatable; default both)",
    )
    add.add_argument("--password-file", type=Path, help="file whose first line is the password")
    add.add_argument(
        "--iterations", type=int, default=DEFAULT_ITERATIONS, help="PBKDF2 iterations (4096)"
    )
    listing = actions.add_parser("list", help="users and their mechanisms")
    add_format(listing)
    delete = actions.add_parser("delete", help="remove every SCRAM credential of a user")
    delete.add_argument("name", help="the user to remove")
    for sub in (add, listing, delete):
        add_bootstrap(sub)
        sub.add_argument(
            "--zookeeper",
            metavar="HOST:PORT[/chroot]",
            help="write the cluster's ZooKeeper directly (the first users, before a broker"
            " can log anyone in)",
        )


def run(args: argparse.Namespace) -> int:
    if args.action == "add":
        password = _read_password(args.password_file)
        mechanisms = args.mechanism or list(SCRAM_MECHANISMS)
        try:
            credentials = {
                m: format_scram_credential(
                    make_scram_credential(m, password, iterations=args.iterations)
                )
                for m in mechanisms
            }
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        return run_async(_add, args, credentials, password)
    return run_async(_list if args.action == "list" else _delete, args)


def _read_password(path: Path | None) -> str:
    if path is not None:
        lines = path.read_text(encoding="utf-8").splitlines()
        password = lines[0] if lines else ""
    elif sys.stdin.isatty():
        password = getpass.getpass("Password: ")
    else:
        password = sys.stdin.readline().rstrip("\n")
    if not password:
        raise UsageError("the password is empty")
    return password


async def _add(args: argparse.Namespace, credentials: dict[str, str], password: str) -> int:
    if args.zookeeper:
        from minibroker.zk.client import open_zk_client
        from minibroker.zk.scram_users import set_scram_credential

        async with open_zk_client(args.zookeeper) as zk:
            for mechanism, credential in credentials.items():
                await set_scram_credential(zk, args.name, mechanism, credential)
    else:
        async with _admin(args) as admin:
            await alter_scram_users(
                admin.cluster,
                passwords={(args.name, m): password for m in credentials},
                iterations=args.iterations,
            )
    print(f"User {args.name}: {', '.join(credentials)} credentials set")
    return 0


def _admin(args: argparse.Namespace) -> Admin:
    return Admin(args.bootstrap_server, config=command_security(args))


async def _list(args: argparse.Namespace) -> int:
    if args.zookeeper:
        from minibroker.zk.client import open_zk_client
        from minibroker.zk.scram_users import list_scram_users

        async with open_zk_client(args.zookeeper) as zk:
            users = await list_scram_users(zk)
    else:
        async with _admin(args) as admin:
            described = await describe_scram_users(admin.cluster)
            users = {name: sorted(mechanisms) for name, mechanisms in described.items()}
    if args.format == "json":
        print_json([{"name": name, "mechanisms": m} for name, m in sorted(users.items())])
    else:
        print_table(("USER", "MECHANISMS"), [(n, ",".join(m)) for n, m in sorted(users.items())])
    return 0


async def _delete(args: argparse.Namespace) -> int:
    if args.zookeeper:
        from minibroker.zk.client import open_zk_client
        from minibroker.zk.scram_users import delete_scram_user

        async with open_zk_client(args.zookeeper) as zk:
            deleted = await delete_scram_user(zk, args.name)
    else:
        async with _admin(args) as admin:
            held = (await describe_scram_users(admin.cluster, [args.name])).get(args.name, {})
            if held:
                await alter_scram_users(admin.cluster, deletions=[(args.name, m) for m in held])
            deleted = bool(held)
    if not deleted:
        print(f"minibroker users: error: no SCRAM user {args.name!r}", file=sys.stderr)
        return 1
    print(f"User {args.name} deleted")
    return 0

"""The `minibroker` command line: the composition root, above every layer.

How this works: every sub-command lives in its own module, in the layer it belongs to
(``broker`` in node/, ``zookeeper`` in zk/, ``dump-log`` in storage/, ``analyze`` in
analytics/, the rest in client/cli/), and exposes ``HELP`` (one line),
``configure(parser)`` (adds its arguments) and ``run(args) -> int`` (does the work,
returns the exit code). This package sits above them all, so it imports each with a
plain import that the import contracts see; ``load_command`` imports one only when it
is asked for, so a broker process never loads the analytics job's modules.

Exit codes follow the usual convention: 0 ok, 1 error, 2 usage. Errors are one line on
stderr; a traceback is a bug.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from types import ModuleType

from minibroker.protocol.errors import KafkaError, MinibrokerError, UsageError

COMMANDS: tuple[str, ...] = (
    "dump-log",
    "zookeeper",
    "broker",
    "analyze",
    "dev",
    "topic",
    "cluster",
    "produce",
    "consume",
    "groups",
    "transactions",
    "elect-leaders",
    "reassign",
    "log-dirs",
    "acl",
    "users",
    "configs",
    "quotas",
)
"""Every sub-command, in the order ``--help`` lists them."""


def load_command(name: str) -> ModuleType:
    """The module implementing sub-command ``name``, imported now."""
    match name:
        case "dump-log":
            from minibroker.storage import dump_log

            return dump_log
        case "zookeeper":
            from minibroker.zk import server_cli

            return server_cli
        case "broker":
            from minibroker.node import cli as broker_cli

            return broker_cli
        case "analyze":
            from minibroker.analytics import cli as analyze_cli

            return analyze_cli
        case "dev":
            from minibroker.client.cli import dev

            return dev
        case "topic":
            from minibroker.client.cli import topic

            return topic
        case "cluster":
            from minibroker.client.cli import cluster

            return cluster
        case "produce":
            from minibroker.client.cli import produce

            return produce
        case "consume":
            from minibroker.client.cli import consume

            return consume
        case "groups":
            from minibroker.client.cli import groups

            return groups
        case "transactions":
            from minibroker.client.cli import transactions

            return transactions
        case "elect-leaders":
            from minibroker.client.cli import elect_leaders

            return elect_leaders
        case "reassign":
            from minibroker.client.cli import reassign

            return reassign
        case "log-dirs":
            from minibroker.client.cli import log_dirs

            return log_dirs
        case "acl":
            from minibroker.client.cli import acl

            return acl
        case "users":
            from minibroker.client.cli import users

            return users
        case "configs":
            from minibroker.client.cli import configs

            return configs
        case "quotas":
            from minibroker.client.cli import quotas

            return quotas
    raise KeyError(name)


EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    """argparse with one-line usage errors (exit 2) instead of the usage banner."""

    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(EXIT_USAGE)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every sub-command, or of ``only`` that one: a broker process then
    never imports the analytics job's modules (pyarrow alone is ~20 MB of its RSS)."""
    parser = _Parser(prog="minibroker", description="a small Kafka-style commit log")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True
    for name in COMMANDS if only is None else (only,):
        module = load_command(name)
        sub = commands.add_parser(name, help=module.HELP, description=module.HELP)
        module.configure(sub)
        sub.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    given = sys.argv[1:] if argv is None else list(argv)
    command = given[0] if given and given[0] in COMMANDS else None
    args = build_parser(command).parse_args(given)
    try:
        code: int = args._run(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        _drop_stdout()
        return EXIT_OK  # the reader of our output left (`... | head`): as Unix tools do
    except UsageError as exc:
        print(f"minibroker {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (MinibrokerError, KafkaError) as exc:
        print(f"minibroker {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except OSError as exc:
        print(f"minibroker {args.command}: error: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_ERROR
    return code


def _drop_stdout() -> None:
    """Point stdout at /dev/null, so flushing it at exit cannot fail a second time."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


if __name__ == "__main__":
    sys.exit(main())

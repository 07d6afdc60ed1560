"""The `minibroker` command line.

How this works: every sub-command lives in its own module that exposes ``HELP`` (one
line), ``configure(parser)`` (adds its arguments) and ``run(args) -> int`` (does the
work, returns the exit code). Commands that belong to another layer (``broker``,
``zookeeper``, ``dump-log``, ``analyze``) live in that layer and are named here by
module path, so the client package never imports the broker at import time.

Exit codes follow the usual convention: 0 ok, 1 error, 2 usage. Errors are one line on
stderr; a traceback is a bug.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from types import ModuleType

from minibroker.protocol.errors import KafkaError, MinibrokerError, UsageError

# Sub-command name -> module implementing it. Order is the order `--help` lists them.
COMMANDS: dict[str, str] = {
    "dump-log": "minibroker.storage.dump_log",
    "zookeeper": "minibroker.zk.server_cli",
    "broker": "minibroker.node.cli",
    "analyze": "minibroker.analytics.cli",
    "dev": "minibroker.client.cli.dev",
    "topic": "minibroker.client.cli.topic",
    "cluster": "minibroker.client.cli.cluster",
    "produce": "minibroker.client.cli.produce",
    "consume": "minibroker.client.cli.consume",
    "groups": "minibroker.client.cli.groups",
    "transactions": "minibroker.client.cli.transactions",
    "elect-leaders": "minibroker.client.cli.elect_leaders",
    "reassign": "minibroker.client.cli.reassign",
    "log-dirs": "minibroker.client.cli.log_dirs",
    "acl": "minibroker.client.cli.acl",
    "users": "minibroker.client.cli.users",
    "configs": "minibroker.client.cli.configs",
    "quotas": "minibroker.client.cli.quotas",
}

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    """argparse with one-line usage errors (exit 2) instead of the usage banner."""

    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(EXIT_USAGE)


def _load(name: str) -> ModuleType:
    return importlib.import_module(COMMANDS[name])


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every sub-command, or of ``only`` that one: a broker process then
    never imports the analytics job's modules (pyarrow alone is ~20 MB of its RSS)."""
    parser = _Parser(prog="minibroker", description="a small Kafka-style commit log")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True
    for name in COMMANDS if only is None else (only,):
        module = _load(name)
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

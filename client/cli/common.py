"""Helpers shared by the client's CLI commands: common flags, output, running Trio.

Every read command takes ``--format json|text``: ``json`` prints one JSON document
(or, for streams such as ``consume``, one JSON object per line) so scripts never parse
tables; ``text`` is for people. Errors are raised as exceptions and become one line
on stderr in command/main.py.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import trio

from minibroker.client.metadata import ClusterClient, TopicInfo, parse_bootstrap
from minibroker.client.security import client_security, read_command_config
from minibroker.net.security import ClientSecurity
from minibroker.protocol.errors import (
    ConfigError,
    MinibrokerError,
    UnknownTopicOrPartitionError,
)

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
TOPIC_WAIT_S = 30.0  # how long a topic may go without leaders before a command gives up
MISSING_TOPIC_AFTER_S = 0.5
"""A topic the brokers keep calling unknown this long is missing, not late: one being
created (by `topic create` or on first use) is LEADER_NOT_AVAILABLE or appears sooner."""
T = TypeVar("T")


def bootstrap_list(text: str) -> str:
    """argparse type of ``--bootstrap-server``: checked here so a typo is a usage error."""
    try:
        parse_bootstrap(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def add_bootstrap(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap-server",
        type=bootstrap_list,
        default=DEFAULT_BOOTSTRAP,
        metavar="HOST:PORT[,HOST:PORT...]",
        help=f"brokers to bootstrap from (default {DEFAULT_BOOTSTRAP})",
    )
    parser.add_argument(
        "--command-config",
        metavar="FILE",
        help="client properties with Kafka's names (security.protocol, sasl.mechanism,"
        " sasl.username, sasl.password, ssl.ca.location, ...)",
    )


def command_security(args: argparse.Namespace) -> ClientSecurity | None:
    """The TLS / SASL settings of ``--command-config`` (None: plaintext)."""
    path = getattr(args, "command_config", None)
    return None if path is None else client_security(read_command_config(path))


def add_format(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--format", choices=("text", "json"), default="text", help="output format (default text)"
    )


def key_value(text: str) -> tuple[str, str]:
    """argparse type for ``k=v`` flags."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


async def topic_or_explain(cluster: ClusterClient, topic: str, why: str) -> TopicInfo:
    """The topic's metadata once it has leaders; a missing topic fails at once with a
    message that says how to create it (``why`` says why it was not created)."""
    try:
        return await cluster.topic(
            topic, timeout_s=TOPIC_WAIT_S, missing_after_s=MISSING_TOPIC_AFTER_S
        )
    except UnknownTopicOrPartitionError:
        raise MinibrokerError(
            f"topic {topic!r} does not exist ({why}); "
            f"create it with `minibroker topic create {topic}`"
        ) from None


def run_async(fn: Callable[..., Awaitable[T]], *args: Any) -> T:
    """``trio.run`` that re-raises a lone exception out of Trio's exception groups."""
    try:
        return trio.run(fn, *args)
    except BaseExceptionGroup as group:
        leaf = _single_leaf(group)
        if leaf is None:
            raise
        raise leaf from None


def _single_leaf(group: BaseExceptionGroup[Any]) -> BaseException | None:
    leaves: list[BaseException] = []

    def walk(exc: BaseException) -> None:
        if isinstance(exc, BaseExceptionGroup):
            for inner in exc.exceptions:
                walk(inner)
        else:
            leaves.append(exc)

    walk(group)
    interesting = [e for e in leaves if not isinstance(e, trio.Cancelled)]
    return interesting[0] if len(interesting) == 1 else None


def print_json(value: Any) -> None:
    json.dump(value, sys.stdout, separators=(",", ":"), sort_keys=False)
    sys.stdout.write("\n")


def print_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Left-aligned columns separated by two spaces (like rpk's tables)."""
    cells = [list(map(str, header))] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def progress(message: str) -> None:
    """A progress line on stderr, only when a person watches (stderr is a terminal)."""
    if sys.stderr.isatty():
        print(f"\r{message}", end="", file=sys.stderr, flush=True)


def progress_done() -> None:
    if sys.stderr.isatty():
        print(file=sys.stderr, flush=True)

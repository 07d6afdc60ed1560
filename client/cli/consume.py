"""``minibroker consume TOPIC``: print records as they arrive.

Like kafka-console-consumer.sh: all partitions (or ``--partition P``), from the end by
default, ``--from-beginning``, ``--offset N|earliest|latest`` (with ``--partition``) or
``--from-timestamp MS``; stops after ``--max-messages`` records or when nothing arrived
for ``--timeout-ms``. With ``--group G`` it joins consumer group G instead and reads the
partitions the group gives it, from the group's committed offsets (``--from-beginning``:
the log start where the group has none); it commits what it printed when it exits.

``--format`` is ``text`` (the value), ``json`` (one object per line) or a template with
``%t`` topic, ``%p`` partition, ``%o`` offset, ``%k`` key, ``%v`` value, ``%T``
timestamp (ms), ``%h`` headers (k=v,...), ``%%`` a percent sign, ``\\n`` / ``\\t``.

When stdout is a pipe whose reader goes away (``consume ... | head``), the command
stops as Unix tools do: at once, quietly, exit code 0 (command/main.py), whether it
found out by writing or, with no record to write, by watching the pipe.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import re
import select
import stat
import sys
from collections.abc import Callable

import trio

from minibroker.client.cli.common import (
    add_bootstrap,
    command_security,
    run_async,
    topic_or_explain,
)
from minibroker.client.consumer import Consumer, ConsumerRecord
from minibroker.client.group_coordinator import CommitFailedError
from minibroker.protocol.errors import MinibrokerError, UsageError

HELP = "print records of a topic"

_FIELD = re.compile(r"%[tpokvTh%]|\\n|\\t")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("topic", help="the topic to read")
    parser.add_argument(
        "--partition",
        type=int,
        action="append",
        default=[],
        help="read only this partition (repeatable; default all)",
    )
    start = parser.add_mutually_exclusive_group()
    start.add_argument(
        "--from-beginning",
        action="store_true",
        help="start at the log start offset (default: the end)",
    )
    start.add_argument("--offset", help="start offset: N, earliest or latest (needs --partition)")
    start.add_argument(
        "--from-timestamp",
        type=int,
        metavar="MS",
        help="start at the first record with timestamp >= MS (epoch ms)",
    )
    parser.add_argument(
        "--group", help="join this consumer group (its committed offsets, shared partitions)"
    )
    parser.add_argument("--max-messages", type=int, help="exit after this many records")
    parser.add_argument(
        "--isolation-level",
        choices=("read_uncommitted", "read_committed"),
        default="read_uncommitted",
        help="read_committed: only committed transactions' records (default"
        " read_uncommitted, as Kafka's console consumer)",
    )
    parser.add_argument(
        "--timeout-ms",
        type=int,
        help="exit when no record arrived for this long (default: wait forever)",
    )
    parser.add_argument(
        "--format",
        default="text",
        help="text (value), json, or a template such as '%%p:%%o %%k=%%v'",
    )
    add_bootstrap(parser)


def formatter(spec: str) -> Callable[[ConsumerRecord], str]:
    """A function rendering a record as ``--format`` asks."""
    if spec == "text":
        return lambda r: _text(r.value)
    if spec == "json":
        return _json
    if "%" not in spec and "\\" not in spec:
        raise UsageError(f"--format must be text, json or a template with %v etc., not {spec!r}")

    getters: dict[str, Callable[[ConsumerRecord], str]] = {
        "%t": lambda r: r.topic,
        "%p": lambda r: str(r.partition),
        "%o": lambda r: str(r.offset),
        "%k": lambda r: _text(r.key),
        "%v": lambda r: _text(r.value),
        "%T": lambda r: str(r.timestamp),
        "%h": lambda r: ",".join(f"{k}={_text(v)}" for k, v in r.headers),
    }
    literals = {"%%": "%", "\\n": "\n", "\\t": "\t"}
    parts: list[str | Callable[[ConsumerRecord], str]] = []
    pos = 0
    for match in _FIELD.finditer(spec):
        parts.append(spec[pos : match.start()])
        token = match.group(0)
        parts.append(literals[token] if token in literals else getters[token])
        pos = match.end()
    parts.append(spec[pos:])

    def render(record: ConsumerRecord) -> str:
        return "".join(p if isinstance(p, str) else p(record) for p in parts)

    return render


def _text(data: bytes | None) -> str:
    return "null" if data is None else data.decode("utf-8", "backslashreplace")


def _json_bytes(data: bytes | None) -> str | dict[str, str] | None:
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode()}


def _json(r: ConsumerRecord) -> str:
    return json.dumps(
        {
            "topic": r.topic,
            "partition": r.partition,
            "offset": r.offset,
            "timestamp": r.timestamp,
            "timestamp_type": r.timestamp_type.name,
            "key": _json_bytes(r.key),
            "value": _json_bytes(r.value),
            "headers": [[k, _json_bytes(v)] for k, v in r.headers],
        },
        separators=(",", ":"),
    )


def run(args: argparse.Namespace) -> int:
    render = formatter(args.format)
    if args.offset is not None:
        if len(args.partition) != 1:
            raise UsageError("--offset needs exactly one --partition")
        if args.offset not in ("earliest", "latest") and not args.offset.isdigit():
            raise UsageError(f"--offset must be a number, earliest or latest, not {args.offset!r}")
    if args.max_messages is not None and args.max_messages <= 0:
        raise UsageError("--max-messages must be > 0")
    if args.group is not None:
        if args.partition or args.offset is not None or args.from_timestamp is not None:
            raise UsageError("--group takes no --partition, --offset or --from-timestamp")
        return run_async(_run_group, args, render)
    return run_async(_run, args, render)


async def _run(args: argparse.Namespace, render: Callable[[ConsumerRecord], str]) -> int:
    async with Consumer(
        args.bootstrap_server,
        auto_offset_reset="latest",
        client_id="minibroker-cli-consumer",
        config=command_security(args),
        isolation_level=args.isolation_level,
    ) as consumer:
        info = await topic_or_explain(
            consumer.cluster, args.topic, "consumers do not create topics"
        )
        partitions = args.partition or [p.partition for p in info.partitions]
        for p in partitions:
            if not 0 <= p < len(info.partitions):
                raise MinibrokerError(
                    f"{args.topic}-{p}: topic {args.topic!r} has {len(info.partitions)} partitions"
                )
        tps = [(args.topic, p) for p in partitions]
        consumer.assign(tps)
        await _position(consumer, args, tps)
        await _print_records(consumer, args, render)
    return 0


async def _run_group(args: argparse.Namespace, render: Callable[[ConsumerRecord], str]) -> int:
    async with Consumer(
        args.bootstrap_server,
        group_id=args.group,
        auto_offset_reset="earliest" if args.from_beginning else "latest",
        client_id="minibroker-cli-consumer",
        config=command_security(args),
        isolation_level=args.isolation_level,
    ) as consumer:
        await topic_or_explain(consumer.cluster, args.topic, "consumers do not create topics")
        consumer.subscribe([args.topic])
        await consumer.wait_for_assignment()  # --timeout-ms counts from the first assignment
        await _print_records(consumer, args, render)
        # What was printed counts as consumed; mid-rebalance, closing commits it instead.
        with contextlib.suppress(CommitFailedError):
            await consumer.commit()
    return 0


async def _print_records(
    consumer: Consumer, args: argparse.Namespace, render: Callable[[ConsumerRecord], str]
) -> None:
    """Print records until --max-messages or --timeout-ms; BrokenPipeError when the
    reader of stdout left (then without the count: what was written may be unread)."""
    count = 0
    reader = _Reader()
    timeout_ms = args.timeout_ms if args.timeout_ms is not None else float("inf")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(reader.watch, sys.stdout.fileno(), nursery.cancel_scope)
        try:
            while args.max_messages is None or count < args.max_messages:
                want = 10_000 if args.max_messages is None else args.max_messages - count
                records = await consumer.poll(timeout_ms, want)
                if not records:
                    break
                sys.stdout.write("".join(render(r) + "\n" for r in records))
                sys.stdout.flush()
                count += len(records)
        except BrokenPipeError:
            reader.left = True
        finally:
            if not reader.left:
                print(f"Processed a total of {count} messages", file=sys.stderr)
        nursery.cancel_scope.cancel()
    if reader.left:
        raise BrokenPipeError("the reader of stdout went away")


class _Reader:
    """Whether whoever reads our stdout is still there."""

    def __init__(self) -> None:
        self.left = False

    async def watch(self, fd: int, scope: trio.CancelScope) -> None:
        """Cancel ``scope`` once nobody reads the pipe ``fd`` writes to (never, when
        it is not a pipe): a consumer waiting for records ends with its reader, not at
        the next record it would print."""
        try:
            is_pipe = stat.S_ISFIFO(os.fstat(fd).st_mode)
        except OSError:
            is_pipe = False
        if not is_pipe:
            return
        await trio.to_thread.run_sync(_wait_for_pipe_error, fd, abandon_on_cancel=True)
        self.left = True
        scope.cancel()


def _wait_for_pipe_error(fd: int) -> None:
    """Block until ``fd`` reports an error: for a pipe's writing end, its reader left.
    Polling for no event at all still reports POLLERR / POLLHUP."""
    poller = select.poll()
    poller.register(fd, 0)
    while not poller.poll():
        pass


async def _position(
    consumer: Consumer, args: argparse.Namespace, tps: list[tuple[str, int]]
) -> None:
    if args.from_beginning or args.offset == "earliest":
        await consumer.seek_to_beginning(tps)
    elif args.offset is not None and args.offset != "latest":
        consumer.seek(tps[0][0], tps[0][1], int(args.offset))
    elif args.from_timestamp is not None:
        found = await consumer.offsets_for_times(dict.fromkeys(tps, args.from_timestamp))
        end = await consumer.end_offsets(tps)
        for tp in tps:
            hit = found[tp]
            consumer.seek(tp[0], tp[1], hit[0] if hit is not None else end[tp])
    else:
        await consumer.seek_to_end(tps)

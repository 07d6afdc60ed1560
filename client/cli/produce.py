"""``minibroker produce TOPIC``: one record per stdin line.

Like kafka-console-producer.sh: ``--key-separator SEP`` splits each line into key and
value at the first SEP; ``--header k=v`` adds headers to every record; ``--acks``,
``--partition``, ``--compression``, ``--linger-ms``. ``--null-value`` writes tombstones
(records with a null value, what deletes a key of a compacted topic): each line is
then the key. Lines are sent as they arrive
(interactive use works) and everything is flushed at end of input; the exit code is 1
if any record failed, with the first failure on stderr.
"""

from __future__ import annotations

import argparse
import sys
from typing import BinaryIO

import trio

from minibroker.client.accumulator import Delivery
from minibroker.client.cli.common import (
    UsageError,
    add_bootstrap,
    command_security,
    key_value,
    progress,
    progress_done,
    run_async,
    topic_or_explain,
)
from minibroker.client.producer import Producer
from minibroker.protocol.compression import CODEC_NAMES
from minibroker.protocol.errors import KafkaError, MinibrokerError

HELP = "produce stdin lines as records"

READ_CHUNK = 1 << 16  # bytes read from stdin per thread hop
PROGRESS_EVERY_S = 1.0  # how often the progress line is redrawn


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("topic", help="the topic (created on first use if the brokers allow)")
    parser.add_argument(
        "--key-separator",
        metavar="SEP",
        help="split each line into KEY SEP VALUE (default: no key)",
    )
    parser.add_argument(
        "--header",
        type=key_value,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="header on every record (repeatable)",
    )
    parser.add_argument(
        "--acks",
        choices=("all", "-1", "0", "1"),
        default="all",
        help="acknowledgements to wait for (default all)",
    )
    parser.add_argument("--partition", type=int, help="write every record to this partition")
    parser.add_argument(
        "--null-value",
        action="store_true",
        help="write tombstones: each line is a key, the value is null (compacted topics)",
    )
    parser.add_argument(
        "--compression",
        choices=tuple(CODEC_NAMES),
        default="none",
        help="batch compression (default none)",
    )
    parser.add_argument(
        "--linger-ms", type=float, default=5.0, help="how long a batch waits to fill (default 5)"
    )
    parser.add_argument(
        "--batch-size", type=int, default=16384, help="largest batch in bytes (default 16384)"
    )
    add_bootstrap(parser)


def run(args: argparse.Namespace) -> int:
    if args.key_separator == "":
        raise UsageError("--key-separator must not be empty")
    if args.partition is not None and args.partition < 0:
        raise UsageError("--partition must be >= 0")
    return run_async(_run, args, sys.stdin.buffer)


async def _read_lines(stream: BinaryIO, send: trio.MemorySendChannel[list[bytes]]) -> None:
    """Chunks of stdin split into lines; a thread reads so Trio never blocks on stdin."""
    read = getattr(stream, "read1", stream.read)
    async with send:
        rest = b""
        while True:
            chunk = await trio.to_thread.run_sync(read, READ_CHUNK, abandon_on_cancel=True)
            if not chunk:
                if rest:
                    await send.send([rest])
                return
            lines = (rest + chunk).split(b"\n")
            rest = lines.pop()
            if lines:
                await send.send(lines)


async def _run(args: argparse.Namespace, stream: BinaryIO) -> int:
    headers = [(k, v.encode()) for k, v in args.header] or None
    separator = args.key_separator.encode() if args.key_separator else None
    sent = 0
    deliveries: list[Delivery] = []
    send, lines = trio.open_memory_channel[list[bytes]](4)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_read_lines, stream, send)
        async with Producer(
            args.bootstrap_server,
            acks=args.acks,
            linger_ms=args.linger_ms,
            batch_size=args.batch_size,
            compression=None if args.compression == "none" else args.compression,
            client_id="minibroker-cli-producer",
            config=command_security(args),
        ) as producer:
            # Fail fast on a topic that does not exist (instead of max_block_ms per record).
            await topic_or_explain(
                producer.cluster,
                args.topic,
                "the brokers do not create topics on first use (auto.create.topics.enable=false)",
            )
            next_progress = trio.current_time() + PROGRESS_EVERY_S
            async for chunk in lines:
                for line in chunk:
                    if line.endswith(b"\r"):
                        line = line[:-1]
                    key = None
                    value: bytes | None = line
                    if args.null_value:
                        key, value = line, None
                    elif separator is not None:
                        key, found, value = line.partition(separator)
                        if not found:
                            raise MinibrokerError(
                                f"line {sent + 1}: no key separator {args.key_separator!r}"
                            )
                    deliveries.append(
                        await producer.enqueue(
                            args.topic, value, key=key, headers=headers, partition=args.partition
                        )
                    )
                    sent += 1
                if trio.current_time() >= next_progress:
                    progress(f"produced {sent} records")
                    next_progress = trio.current_time() + PROGRESS_EVERY_S
            await producer.flush()
        nursery.cancel_scope.cancel()
        progress_done()
    return _report(deliveries)


def _report(deliveries: list[Delivery]) -> int:
    failures = [e for e in (d.exception() for d in deliveries) if e is not None]
    if failures:
        first: KafkaError = failures[0]
        print(
            f"minibroker produce: error: {len(failures)} of {len(deliveries)} records "
            f"failed; first: {first}",
            file=sys.stderr,
        )
        return 1
    return 0

"""``minibroker produce TOPIC``: one record per stdin line.

Like kafka-console-producer.sh: ``--key-separator SEP`` splits each line into key and
value at the first SEP; ``--header k=v`` adds headers to every record; ``--acks``,
``--partition``, ``--compression``, ``--linger-ms``. ``--null-value`` writes tombstones
(records with a null value, what deletes a key of a compacted topic): each line is
then the key. Lines are sent as they arrive
(interactive use works) and everything is flushed at end of input; the exit code is 1
if any record failed, with the first failure on stderr.

Records a partition refuses for a while (NOT_ENOUGH_REPLICAS: fewer in-sync replicas
than min.insync.replicas; no leader) are retried until ``delivery.timeout.ms`` (Kafka's
120 s) runs out; meanwhile a line on stderr says which partition waits and why, again
every ``WAIT_REPORT_EVERY_S``. Kafka's ``--request-timeout-ms`` and ``--producer-property
KEY=VALUE`` (``delivery.timeout.ms``, ...) set the bounds.

``--transactional-id ID`` writes in transactions (a transactional producer: it fences
any earlier one with the same id): the whole input is one transaction, committed at its
end, or one per ``--transaction-size N`` lines; a record that fails aborts the
transaction it is in (exit 1), so read_committed consumers see none of it.
"""

from __future__ import annotations

import argparse
import sys
from typing import BinaryIO

import trio

from minibroker.client.accumulator import Delivery
from minibroker.client.cli.common import (
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
from minibroker.protocol.errors import KafkaError, MinibrokerError, UsageError

HELP = "produce stdin lines as records"

READ_CHUNK = 1 << 16  # bytes read from stdin per thread hop
PROGRESS_EVERY_S = 1.0  # how often the progress line is redrawn
WAIT_CHECK_S = 0.5  # how often the partitions waiting for a retry are looked at
WAIT_REPORT_EVERY_S = 10.0  # how often a partition still waiting is reported again
DELIVERY_TIMEOUT_MS = 120_000  # Kafka's delivery.timeout.ms default
REQUEST_TIMEOUT_MS = 30_000  # Kafka's request.timeout.ms default (its console producer: 1500)
PRODUCER_PROPERTIES = {
    "delivery.timeout.ms": "delivery_timeout_ms",
    "request.timeout.ms": "request_timeout_ms",
    "retry.backoff.ms": "retry_backoff_ms",
    "linger.ms": "linger_ms",
    "batch.size": "batch_size",
    "max.block.ms": "max_block_ms",
}
"""The Kafka producer properties ``--producer-property`` takes (all numbers), and the
Producer argument each sets."""


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
    parser.add_argument(
        "--request-timeout-ms",
        type=int,
        default=REQUEST_TIMEOUT_MS,
        metavar="MS",
        help=f"how long one produce request may take (default {REQUEST_TIMEOUT_MS})",
    )
    parser.add_argument(
        "--producer-property",
        type=key_value,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Kafka producer property: "
        f"{', '.join(PRODUCER_PROPERTIES)} (delivery.timeout.ms, default "
        f"{DELIVERY_TIMEOUT_MS}, bounds how long a record is retried)",
    )
    parser.add_argument(
        "--transactional-id",
        metavar="ID",
        help="write in transactions under this transactional id (acks=all)",
    )
    parser.add_argument(
        "--transaction-size",
        type=int,
        metavar="N",
        help="commit a transaction every N lines (default: one for the whole input)",
    )
    add_bootstrap(parser)


def run(args: argparse.Namespace) -> int:
    if args.key_separator == "":
        raise UsageError("--key-separator must not be empty")
    if args.transaction_size is not None and (
        args.transactional_id is None or args.transaction_size <= 0
    ):
        raise UsageError("--transaction-size N needs --transactional-id and N > 0")
    if args.transactional_id is not None and args.acks not in ("all", "-1"):
        raise UsageError("--transactional-id needs --acks all")
    if args.partition is not None and args.partition < 0:
        raise UsageError("--partition must be >= 0")
    args.producer_settings = producer_settings(args)
    return run_async(_run, args, sys.stdin.buffer)


def producer_settings(args: argparse.Namespace) -> dict[str, float]:
    """The Producer's timeouts and batching from the flags and --producer-property (which
    wins, as the later and more specific setting)."""
    settings: dict[str, float] = {
        "linger_ms": args.linger_ms,
        "batch_size": args.batch_size,
        "request_timeout_ms": args.request_timeout_ms,
        "delivery_timeout_ms": DELIVERY_TIMEOUT_MS,
    }
    for key, value in args.producer_property:
        argument = PRODUCER_PROPERTIES.get(key)
        if argument is None:
            raise UsageError(
                f"--producer-property {key}: not one of {', '.join(PRODUCER_PROPERTIES)}"
            )
        try:
            number = float(value)
        except ValueError:
            raise UsageError(f"--producer-property {key}: not a number: {value!r}") from None
        if number < 0 or (number == 0 and key != "linger.ms"):
            raise UsageError(f"--producer-property {key}: must be > 0, got {value}")
        settings[argument] = number
    if settings["request_timeout_ms"] <= 0:
        raise UsageError("--request-timeout-ms must be > 0")
    settings["batch_size"] = int(settings["batch_size"])
    return settings


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
            compression=None if args.compression == "none" else args.compression,
            client_id="minibroker-cli-producer",
            config=command_security(args),
            transactional_id=args.transactional_id,
            **args.producer_settings,
        ) as producer:
            transactional = args.transactional_id is not None
            if transactional:
                await producer.init_transactions()
                producer.begin_transaction()
            in_transaction = 0
            nursery.start_soon(_report_waits, producer, args.producer_settings)
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
                    in_transaction += 1
                    if transactional and in_transaction == args.transaction_size:
                        await producer.commit_transaction()
                        producer.begin_transaction()
                        in_transaction = 0
                if trio.current_time() >= next_progress:
                    progress(f"produced {sent} records")
                    next_progress = trio.current_time() + PROGRESS_EVERY_S
            if transactional:
                await _end_transaction(producer, in_transaction)
            else:
                await producer.flush()
        nursery.cancel_scope.cancel()
        progress_done()
    return _report(deliveries)


async def _end_transaction(producer: Producer, records: int) -> None:
    """Commit the last transaction (abort it when a record failed: then raise)."""
    try:
        await producer.commit_transaction()
    except MinibrokerError:
        await producer.abort_transaction()
        raise


async def _report_waits(producer: Producer, settings: dict[str, float]) -> None:
    """Say on stderr which partitions wait for a retry and why, when that starts or
    changes and every WAIT_REPORT_EVERY_S while it lasts: a produce that cannot complete
    is otherwise silent until delivery.timeout.ms runs out."""
    reported: dict[tuple[str, int], tuple[str, float]] = {}
    limit_s = settings["delivery_timeout_ms"] / 1000
    while True:
        await trio.sleep(WAIT_CHECK_S)
        now = trio.current_time()
        waiting = producer.retrying()
        for tp in reported.keys() - waiting.keys():
            del reported[tp]
        for tp, error in sorted(waiting.items()):
            last = reported.get(tp)
            if last is not None and last[0] == error.name and now - last[1] < WAIT_REPORT_EVERY_S:
                continue
            reported[tp] = (error.name, now)
            print(
                f"minibroker produce: waiting: {error}; retrying each record for up to "
                f"delivery.timeout.ms={limit_s * 1000:.0f} ms "
                "(--producer-property delivery.timeout.ms=MS)",
                file=sys.stderr,
                flush=True,
            )


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

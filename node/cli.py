"""``minibroker broker``: run one broker until SIGTERM / SIGINT.

    minibroker broker --config server.properties [--broker-id N] [--listen HOST:PORT]
        [--kafka-listen HOST:PORT] [--log-dirs A,B] [--zookeeper HOST:PORT[/chroot]]
        [--metrics-port N]
        [--set key=value ...]

Flags override the file; ``--set`` takes any Kafka property. Without ``--zookeeper``
(and no ``zookeeper.connect`` in the file) the broker runs standalone: no controller,
partitions are assigned by whoever sends it LeaderAndIsr. A signal stops it cleanly
(logs flushed, checkpoints and ``.kafka_cleanshutdown`` written); exit code 0.

Two environment variables are switches for benchmarks and crash tests, read here once
and handed to the broker (``BrokerOptions``): ``MINIBROKER_METRICS=off`` (no
request-path counters) and ``MINIBROKER_CLEANER_STOP_AT=<swap step>`` (the log cleaner
freezes the broker there).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Mapping

import trio

from minibroker.broker.config.broker_config import BrokerConfig
from minibroker.broker.options import PRODUCTION, BrokerOptions
from minibroker.node.process_limits import raise_open_files_limit, share_the_gil
from minibroker.protocol.errors import ConfigError
from minibroker.protocol.heap import keep_freed_memory

HELP = "run a broker (Kafka .properties config; flags override it)"

METRICS_SWITCH_ENV = "MINIBROKER_METRICS"
"""Set to ``off`` to measure the broker without request-path counters (benchmarks)."""
CLEANER_STOP_AT_ENV = "MINIBROKER_CLEANER_STOP_AT"
"""A log cleaner swap step at which the broker freezes (tests/fault/test_cleaner_crash.py)."""

CONTROLLED_SHUTDOWN_ATTEMPT_S = 5.0
"""How long one controlled-shutdown attempt may wait for ZooKeeper and the controller;
with either unreachable it would wait for ever."""


def controlled_shutdown_deadline_s(config: BrokerConfig) -> float:
    """Longest a signalled broker spends on controlled shutdown before stopping anyway:
    1 + ``controlled.shutdown.max.retries`` attempts, ``.retry.backoff.ms`` apart."""
    attempts = config.controlled_shutdown_max_retries + 1
    backoff_s = config.controlled_shutdown_retry_backoff_ms / 1000
    return attempts * CONTROLLED_SHUTDOWN_ATTEMPT_S + (attempts - 1) * backoff_s


LOG_FORMAT = "%(asctime)s %(levelname)s [broker %(broker_id)s] %(name)s: %(message)s"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE", help="Kafka-style .properties file")
    parser.add_argument("--broker-id", type=int, metavar="N", help="broker.id")
    parser.add_argument("--listen", metavar="HOST:PORT", help="listeners (port 0 = any)")
    parser.add_argument(
        "--kafka-listen",
        metavar="HOST:PORT",
        help="kafka.listeners: also serve Kafka's binary protocol here (port 0 = any)",
    )
    parser.add_argument("--log-dirs", metavar="A,B", help="log.dirs")
    parser.add_argument("--zookeeper", metavar="HOST:PORT[/chroot]", help="zookeeper.connect")
    parser.add_argument("--metrics-port", type=int, metavar="N", help="metrics.port")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any broker property (repeatable)",
    )
    parser.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="least severe log lines written to stderr (default INFO)",
    )


def overrides_from(args: argparse.Namespace) -> dict[str, str]:
    """The Kafka properties the command-line flags set."""
    values: dict[str, str] = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set expects KEY=VALUE, got {item!r}")
        values[key.strip()] = value.strip()
    flags = {
        "broker.id": args.broker_id,
        "listeners": args.listen,
        "kafka.listeners": args.kafka_listen,
        "log.dirs": args.log_dirs,
        "zookeeper.connect": args.zookeeper,
        "metrics.port": args.metrics_port,
    }
    values.update({key: str(value) for key, value in flags.items() if value is not None})
    return values


def options_from(environ: Mapping[str, str]) -> BrokerOptions:
    """The benchmarks' and crash tests' switches, from the command's environment."""
    return BrokerOptions(
        request_metrics=environ.get(METRICS_SWITCH_ENV, "").lower() != "off",
        cleaner_stop_at=environ.get(CLEANER_STOP_AT_ENV) or None,
    )


def run(args: argparse.Namespace) -> int:
    config = BrokerConfig.from_properties(args.config, overrides_from(args))
    options = options_from(os.environ)
    _setup_logging(args.log_level, config.broker_id)
    keep_freed_memory()
    share_the_gil()
    raise_open_files_limit()
    try:
        trio.run(serve_until_signalled, config, options)
    except BaseExceptionGroup as group:
        raise _single_error(group) from None
    return 0


def _single_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The one error a nursery wrapped (so the CLI prints one line), else the group."""
    leaves: list[BaseException] = []
    pending: list[BaseException] = [group]
    while pending:
        exc = pending.pop()
        if isinstance(exc, BaseExceptionGroup):
            pending.extend(exc.exceptions)
        else:
            leaves.append(exc)
    return leaves[0] if len(leaves) == 1 else group


async def serve_until_signalled(config: BrokerConfig, options: BrokerOptions = PRODUCTION) -> None:
    """Run a broker and its controller candidate; the first SIGTERM or SIGINT stops them
    cleanly, at any time.

    A signal during start-up (ZooKeeper not answering yet) cancels the start; after it,
    the broker asks the controller to move leadership away, for at most
    ``controlled_shutdown_deadline_s`` (ZooKeeper or the controller may never answer),
    then stops.
    """
    from minibroker.node.node import Node  # the storage layer loads only when a broker runs

    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            node = Node(config, options=options)
            started = trio.Event()

            async def start() -> None:
                broker = await nursery.start(node.run)
                print(f"broker {config.broker_id} listening on port {broker.port}", flush=True)
                if broker.kafka_address is not None:
                    kafka = _joined(broker.kafka_address)
                    print(f"broker {config.broker_id} Kafka protocol on {kafka}", flush=True)
                started.set()

            nursery.start_soon(start)
            async for signum in signals:
                logging.getLogger(__name__).info(
                    "received %s, stopping", signal.Signals(signum).name
                )
                if started.is_set():
                    # A second signal during the controlled shutdown stops at once.
                    with trio.move_on_after(controlled_shutdown_deadline_s(config)) as scope:
                        nursery.start_soon(_cancel_on_next_signal, signals, scope)
                        await node.stop()
                    if scope.cancelled_caught:
                        logging.getLogger(__name__).warning(
                            "controlled shutdown gave up; stopping without it"
                        )
                nursery.cancel_scope.cancel()
                break


async def _cancel_on_next_signal(signals: AsyncIterator[int], scope: trio.CancelScope) -> None:
    async for _ in signals:
        scope.cancel()
        return


def _setup_logging(level: str, broker_id: int) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_FORMAT, defaults={"broker_id": broker_id}))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)


def _joined(address: tuple[str, int]) -> str:
    host, port = address
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

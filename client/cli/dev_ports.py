"""The ports `minibroker dev up` takes: where they go by default, whether they are in
range, and whether something already listens on them."""

from __future__ import annotations

import argparse
import socket

from minibroker.client.cli.dev_state import DevError, cluster_using_port
from minibroker.protocol.errors import UsageError

# Without --kafka-base-port, broker i's Kafka listener is this far above its msgpack port:
# `dev up` alone serves Kafka's clients and tools on 19092, 19093, ...
KAFKA_PORT_OFFSET = 10_000


def default_kafka_base_port(base_port: int, brokers: int) -> int | None:
    """Where the Kafka listeners go without --kafka-base-port: KAFKA_PORT_OFFSET above the
    msgpack ones; none when those take any free port (0) or the offset runs out of ports."""
    kafka_base = base_port + KAFKA_PORT_OFFSET
    if not base_port or kafka_base + brokers > 65536:
        return None
    return kafka_base


def check_port_ranges(args: argparse.Namespace) -> None:
    """Refuse a base port whose brokers' ports would run past 65535."""
    for flag in ("base_port", "zookeeper_port", "metrics_base_port", "kafka_base_port"):
        port = getattr(args, flag)
        span = args.brokers if flag != "zookeeper_port" else 1
        if port and not 0 < port + span < 65536:
            raise UsageError(f"--{flag.replace('_', '-')} out of range: {port}")


def probe_socket() -> socket.socket:
    """A socket bound as the servers bind theirs: SO_REUSEADDR (trio's listeners,
    ZooKeeper, the metrics server), so a port in TIME_WAIT is free and only a listener
    makes it busy."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    return sock


def free_port() -> int:
    with probe_socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def check_ports_free(args: argparse.Namespace) -> None:
    """Refuse ports something already listens on, naming who wanted them."""
    wanted = [(args.zookeeper_port, "ZooKeeper")]
    for i in range(args.brokers):
        if args.base_port:
            wanted.append((args.base_port + i, f"broker {i + 1}"))
        if args.metrics_base_port:
            wanted.append((args.metrics_base_port + i, f"broker {i + 1} metrics"))
        if args.kafka_base_port:
            wanted.append((args.kafka_base_port + i, f"broker {i + 1} Kafka listener"))
    for port, who in wanted:
        if not port:
            continue
        with probe_socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
                sock.listen(1)
            except OSError:
                holder = cluster_using_port(port)
                culprit = (
                    "is another cluster running?"
                    if holder is None
                    else f"the dev cluster in {holder.data_dir} has it (pid "
                    f"{holder.supervisor_pid}; `minibroker dev down --data-dir "
                    f"{holder.data_dir}` stops it)"
                )
                raise DevError(
                    f"port {port} ({who}) is in use: {culprit} (--base-port, "
                    "--zookeeper-port, --metrics-base-port and --kafka-base-port choose others)"
                ) from None

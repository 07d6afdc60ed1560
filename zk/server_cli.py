"""``minibroker zookeeper``: run a standalone ZooKeeper in the foreground.

Prints the connect string once the server answers, then waits until Ctrl-C (SIGINT)
or SIGTERM and stops the JVM before returning. Exit code 0 after a requested stop,
1 if ZooKeeper could not start or died on its own.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from minibroker.zk.server import ZooKeeperError, ZooKeeperServer

HELP = "run a standalone ZooKeeper server (jars from the pyspark wheel) until Ctrl-C"

DEFAULT_PORT = 2181
DEFAULT_DATA_DIR = ".minibroker/zookeeper"
# How often the foreground loop checks that the JVM is still alive.
WATCH_INTERVAL_S = 0.5


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"client port (default {DEFAULT_PORT})"
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path(DEFAULT_DATA_DIR),
        help=f"snapshots, transaction log, zoo.cfg and zookeeper.log (default {DEFAULT_DATA_DIR})",
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)"
    )


def run(args: argparse.Namespace) -> int:
    if not 0 < args.port < 65536:
        raise ZooKeeperError(f"--port must be 1..65535, got {args.port}")
    server = ZooKeeperServer(args.data_dir, port=args.port, host=args.host)
    stop = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.start()
        print(f"ZooKeeper running: zookeeper.connect={server.connect_string}", flush=True)
        print(f"data dir {server.data_dir}, log {server.log_path}; Ctrl-C stops it", flush=True)
        while not stop.wait(WATCH_INTERVAL_S):
            if not server.is_running():
                raise ZooKeeperError(f"ZooKeeper exited unexpectedly; see {server.log_path}")
        print("stopping ZooKeeper", file=sys.stderr, flush=True)
        return 0
    finally:
        server.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)

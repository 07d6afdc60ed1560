"""``minibroker dev up|down|status|stop-broker|start-broker|restart-broker``: a whole
local cluster (ZooKeeper + N brokers) in one command, and control of its brokers.

How this works. ``dev up`` is a supervisor: it starts ``minibroker zookeeper`` and then
N ``minibroker broker`` processes (``sys.executable -m minibroker ...``),
each in its own session so the terminal's Ctrl-C reaches only the supervisor, which then
stops them in order: SIGTERM to one broker at a time, highest id first (each stops
cleanly: controlled shutdown, logs flushed, ``.kafka_cleanshutdown`` written), then
ZooKeeper. One at a time because a controlled shutdown moves the broker's leaderships
to brokers that stay: brokers stopped all at once have nowhere to move them and each
retries until it gives up. Each child
writes its output to ``<data-dir>/logs/<name>.log``; readiness is read from those logs
(the line a child prints once it listens) and then from the Metadata API: an active
controller and every broker registered. The other commands (client/cli/dev_control.py)
act on the processes dev.json lists; dev.json and how a command finds it from any
directory are in client/cli/dev_state.py.

Layout under ``--data-dir`` (reused by the next ``dev up``, so topics survive)::

    zookeeper/            ZooKeeper's snapshots and transaction log
    broker-<id>/logs-0,1  the broker's two log.dirs (two, so log-dir moves can be tried)
    logs/<name>.log       each child's output
    dev.json              the running cluster: supervisor pid, children, addresses

Ports: broker i (1-based) listens on ``base_port + i - 1`` and exports metrics on
``metrics_base_port + i - 1``; a port of 0 means "any free port" (tests use that;
the actual ports are in dev.json and printed). Ports are probed the way the servers
bind them (SO_REUSEADDR), so sockets of a cluster just stopped, in TIME_WAIT, do not
count as in use.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
from dataclasses import asdict
from pathlib import Path
from typing import Any

import trio

from minibroker.client.cli import dev_secure
from minibroker.client.cli.common import add_format, run_async
from minibroker.client.cli.dev_control import (
    BROKER_READY,
    KAFKA_READY,
    STOP_TIMEOUT_S,
    broker_argv,
    child_env,
    cli_argv,
    down,
    log_header,
    security_of,
    start_broker,
    status,
    status_all,
    stop_broker,
    terminate_pids,
    wait_for_line,
    wait_for_registered,
)
from minibroker.client.cli.dev_ports import (
    KAFKA_PORT_OFFSET,
    check_port_ranges,
    check_ports_free,
    default_kafka_base_port,
    free_port,
)
from minibroker.client.cli.dev_state import (
    DEFAULT_DATA_DIR,
    STATE_FILE,
    ChildInfo,
    DevError,
    DevState,
    find_data_dir,
    forget_location,
    pid_running,
    record_location,
)
from minibroker.protocol.errors import UsageError

__all__ = ["ChildInfo", "DevError", "DevState", "down", "pid_running", "state_of"]

HELP = "run a local cluster: ZooKeeper and brokers, and stop or restart one broker"

ZOOKEEPER_READY = re.compile(rb"zookeeper\.connect=([\w.\-]+):(\d+)")
METRICS_PORT = re.compile(rb"metrics on port (\d+)")


def configure(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", parser_class=type(parser))
    actions.required = True
    up = actions.add_parser("up", help="start ZooKeeper and brokers; Ctrl-C stops them")
    up.add_argument("--brokers", type=int, default=3, help="number of brokers (default 3)")
    up.add_argument(
        "--base-port",
        type=int,
        default=9092,
        help="port of broker 1; broker i gets base+i-1 (default 9092; 0 = any)",
    )
    up.add_argument(
        "--zookeeper-port", type=int, default=2181, help="ZooKeeper's port (default 2181; 0 = any)"
    )
    up.add_argument(
        "--metrics-base-port",
        type=int,
        default=9308,
        help="metrics port of broker 1 (default 9308; 0 = any)",
    )
    up.add_argument(
        "--kafka-base-port",
        type=int,
        default=None,
        help="Kafka's binary protocol: broker i on base+i-1 (0 = any; default: --base-port "
        f"+ {KAFKA_PORT_OFFSET}, so 19092; none when --base-port is 0)",
    )
    up.add_argument(
        "--secure",
        action="store_true",
        help="SASL_SSL listeners, a local CA, SCRAM users and ACLs; writes "
        "<data-dir>/client.properties for clients",
    )
    up.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="broker property for every broker (repeatable)",
    )
    down_ = actions.add_parser("down", help="stop the cluster `dev up` runs")
    status_ = actions.add_parser("status", help="each process of the cluster: pid, ports, alive")
    add_format(status_)
    status_.add_argument(
        "--all",
        action="store_true",
        help="every dev cluster of this user instead: data dir, state and ports",
    )
    stop = actions.add_parser("stop-broker", help="stop one broker (SIGTERM: controlled shutdown)")
    start = actions.add_parser("start-broker", help="start a stopped broker again")
    restart = actions.add_parser("restart-broker", help="stop one broker, then start it again")
    for sub in (stop, start, restart):
        sub.add_argument(
            "broker_id", type=int, metavar="N", help="the broker's id, as `dev status` lists it"
        )
    for sub in (stop, restart):
        sub.add_argument(
            "--kill", action="store_true", help="SIGKILL it instead (no controlled shutdown)"
        )
    up.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help=f"where data, logs and dev.json live (default {DEFAULT_DATA_DIR})",
    )
    for sub in (down_, status_, stop, start, restart):
        sub.add_argument(
            "--data-dir",
            type=Path,
            default=None,
            help=f"the cluster's data dir (default: {DEFAULT_DATA_DIR} here, else the "
            "one the last `dev up` recorded)",
        )


def run(args: argparse.Namespace) -> int:
    if args.action == "up":
        return _run_up(args)
    if args.action == "status" and args.all:
        if args.data_dir is not None:
            raise UsageError("--all lists every cluster: it takes no --data-dir")
        return status_all(args.format)
    data_dir = find_data_dir(args.data_dir)
    if args.action == "down":
        return down(data_dir)
    if args.action == "status":
        return status(data_dir, args.format)
    if args.action == "stop-broker":
        return stop_broker(data_dir, args.broker_id, kill=args.kill)
    if args.action == "start-broker":
        return run_async(start_broker, data_dir, args.broker_id)
    stop_broker(data_dir, args.broker_id, kill=args.kill)
    return run_async(start_broker, data_dir, args.broker_id)


def _run_up(args: argparse.Namespace) -> int:
    if not 1 <= args.brokers <= 100:
        raise UsageError("--brokers must be 1..100")
    if args.kafka_base_port is None:
        args.kafka_base_port = default_kafka_base_port(args.base_port, args.brokers)
    check_port_ranges(args)
    if args.data_dir is None:
        args.data_dir = DEFAULT_DATA_DIR
    return run_async(_up, args)


# --- dev up --------------------------------------------------------------------------


def transaction_settings(brokers: int) -> list[str]:
    """``__transaction_state`` settings that fit ``brokers``: Kafka's replication factor
    3 and min ISR 2 from three brokers on; below that every broker holds a replica and
    one in sync is enough, so transactions go on while a broker restarts."""
    return [
        f"transaction.state.log.replication.factor={min(3, brokers)}",
        f"transaction.state.log.min.isr={2 if brokers >= 3 else 1}",
    ]


class _Supervisor:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.data_dir: Path = args.data_dir.resolve()
        settings = [*transaction_settings(args.brokers), *args.set]  # a --set wins
        self.state = DevState(os.getpid(), str(self.data_dir), settings=settings)
        self.processes: dict[str, trio.Process] = {}
        self.stopping = False

    async def _spawn(self, name: str, argv: list[str]) -> tuple[trio.Process, Path]:
        log = self.data_dir / "logs" / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as out:
            out.write(log_header(name))
            out.flush()
            process = await trio.lowlevel.open_process(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                start_new_session=True,
                env=child_env(),
            )
        self.processes[name] = process
        return process, log

    async def start(self) -> None:
        args = self.args
        zk_dir = self.data_dir / "zookeeper"
        zk_log = self.data_dir / "logs" / "zookeeper.log"
        offset = zk_log.stat().st_size if zk_log.exists() else 0
        print(f"starting ZooKeeper (data in {zk_dir})", flush=True)
        zk, _ = await self._spawn(
            "zookeeper",
            cli_argv(
                "zookeeper",
                *("--port", str(args.zookeeper_port or free_port()), "--data-dir", str(zk_dir)),
            ),
        )
        found = await wait_for_line("zookeeper", zk_log, ZOOKEEPER_READY, offset, zk.poll)
        zk_port = int(found.group(2))
        self.state.zookeeper = ChildInfo("zookeeper", zk.pid, zk_port, str(zk_log))
        if args.secure:
            secure = dev_secure.prepare(self.data_dir)
            await dev_secure.create_users(f"127.0.0.1:{zk_port}", secure)
            self.state.settings = [*secure.settings, *self.state.settings]
            self.state.client_config = str(secure.client_properties)
        self.state.save()
        record_location(self.data_dir, Path.cwd())
        for i in range(1, args.brokers + 1):
            await self._start_broker(i, zk_port)
        print(f"waiting for a controller and {args.brokers} registered brokers", flush=True)
        await wait_for_registered(
            self.state.bootstrap,
            set(self.state.brokers),
            self._check_alive,
            self.data_dir / "logs",
            security_of(self.state.client_config),
        )
        self.state.ready = True
        self.state.save()

    def _check_alive(self) -> None:
        for name, process in self.processes.items():
            if process.poll() is not None:
                raise DevError(
                    f"{name} exited with code {process.returncode}; see "
                    f"{self.data_dir / 'logs' / (name + '.log')}"
                )

    async def _start_broker(self, broker_id: int, zk_port: int) -> None:
        args = self.args
        name = f"broker-{broker_id}"
        port = args.base_port + broker_id - 1 if args.base_port else 0
        metrics = args.metrics_base_port + broker_id - 1 if args.metrics_base_port else 0
        log = self.data_dir / "logs" / f"{name}.log"
        offset = log.stat().st_size if log.exists() else 0
        kafka_base = args.kafka_base_port
        kafka = None if kafka_base is None else (kafka_base + broker_id - 1 if kafka_base else 0)
        argv = broker_argv(
            self.data_dir,
            broker_id,
            port,
            metrics,
            zk_port,
            self.state.settings,
            kafka,
            secure=self.state.client_config is not None,
        )
        process, _ = await self._spawn(name, argv)
        found = await wait_for_line(name, log, BROKER_READY, offset, process.poll)
        actual = int(found.group(2))
        if not metrics:
            with log.open("rb") as f:
                f.seek(offset)
                exported = METRICS_PORT.search(f.read())
            metrics = int(exported.group(1)) if exported else 0
        kafka_port = None
        if kafka is not None:
            kafka_line = await wait_for_line(name, log, KAFKA_READY, offset, process.poll)
            kafka_port = int(kafka_line.group(2))
        self.state.brokers[broker_id] = ChildInfo(
            name, process.pid, actual, str(log), metrics, kafka_port
        )
        self.state.save()
        print(f"  broker {broker_id} listening on 127.0.0.1:{actual} (log {log})", flush=True)

    def report(self) -> None:
        zk = self.state.zookeeper
        assert zk is not None
        print("\nminibroker dev cluster is up", flush=True)
        print(f"  bootstrap servers   {self.state.bootstrap}")
        if self.state.kafka_bootstrap:
            print(f"  Kafka bootstrap     {self.state.kafka_bootstrap}  (kcat, Kafka clients)")
        print(f"  zookeeper.connect   127.0.0.1:{zk.port}")
        for broker_id, b in sorted(self.state.brokers.items()):
            metrics = f"http://127.0.0.1:{b.metrics_port}/metrics" if b.metrics_port else "-"
            label = f"broker {broker_id}"
            print(f"  {label:<20}127.0.0.1:{b.port}  metrics {metrics}")
        if self.state.client_config:
            print(f"  client config       {self.state.client_config}  (SASL_SSL, user admin;")
            print("                      --command-config for minibroker, -F for kcat)")
        print(f"  data dir            {self.data_dir}")
        print(f"  logs                {self.data_dir / 'logs'}")
        print(
            f"Ctrl-C (or `minibroker dev down` here, `--data-dir {self.data_dir}` elsewhere) "
            "stops it; data stays for the "
            "next `dev up`. `minibroker dev status` lists the processes; `dev stop-broker N`, "
            "`dev start-broker N` and `dev restart-broker N [--kill]` drill failures.",
            flush=True,
        )

    async def watch(self) -> None:
        """Report children that exit while the cluster runs (fault drills kill them)."""
        reported: set[str] = set()
        while True:
            for name, process in self.processes.items():
                if name not in reported and process.poll() is not None and not self.stopping:
                    print(f"{name} exited with code {process.returncode}", flush=True)
                    reported.add(name)
            await trio.sleep(0.5)

    async def stop(self) -> None:
        """SIGTERM the brokers one at a time (controlled shutdown), then ZooKeeper;
        SIGKILL what is still running at the deadline. Brokers `dev start-broker` started
        are not our children: dev.json has them."""
        self.stopping = True
        brokers = [
            p for n, p in sorted(self.processes.items(), key=_broker_order) if n != "zookeeper"
        ]
        ours = {p.pid for p in self.processes.values()}
        recorded = DevState.load(self.data_dir) or self.state
        others = [b.pid for b in recorded.brokers.values() if b.pid not in ours]
        await trio.to_thread.run_sync(terminate_pids, others, STOP_TIMEOUT_S)
        await _terminate_in_turn(brokers, STOP_TIMEOUT_S)
        zk = self.processes.get("zookeeper")
        if zk is not None:
            await _terminate([zk], 30.0)
        (self.data_dir / STATE_FILE).unlink(missing_ok=True)
        forget_location(self.data_dir)


def _broker_order(item: tuple[str, trio.Process]) -> int:
    """Highest broker id first: the controller is usually the first broker started, and
    stopping it last spares the others a controller election each."""
    name = item[0]
    return -int(name.rsplit("-", 1)[1]) if name.startswith("broker-") else 0


async def _terminate_in_turn(processes: list[trio.Process], timeout_s: float) -> None:
    """SIGTERM each process after the one before has exited; all within ``timeout_s``,
    then SIGKILL whatever still runs."""
    with trio.move_on_after(timeout_s):
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                await process.wait()
    for process in processes:
        if process.poll() is None:
            process.kill()
            await process.wait()


async def _terminate(processes: list[trio.Process], timeout_s: float) -> None:
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    with trio.move_on_after(timeout_s):
        for process in processes:
            await process.wait()
    for process in processes:
        if process.poll() is None:
            process.kill()
            await process.wait()


async def _up(args: argparse.Namespace) -> int:
    data_dir: Path = args.data_dir
    existing = DevState.load(data_dir)
    if existing is not None and pid_running(existing.supervisor_pid):
        raise DevError(
            f"a dev cluster is already running (pid {existing.supervisor_pid}); "
            f"`minibroker dev down --data-dir {data_dir}` stops it"
        )
    check_ports_free(args)
    data_dir.mkdir(parents=True, exist_ok=True)
    supervisor = _Supervisor(args)
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        try:
            async with trio.open_nursery() as nursery:

                async def start_then_watch() -> None:
                    await supervisor.start()
                    supervisor.report()
                    await supervisor.watch()

                nursery.start_soon(start_then_watch)
                async for signum in signals:
                    print(
                        f"\n{signal.Signals(signum).name}: stopping brokers, then ZooKeeper",
                        flush=True,
                    )
                    break
                nursery.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True):
                await supervisor.stop()
    print("dev cluster stopped", flush=True)
    return 0


def state_of(data_dir: Path) -> dict[str, Any] | None:
    """The recorded state of a dev cluster (for tests and scripts), or None."""
    state = DevState.load(data_dir)
    return None if state is None else asdict(state)

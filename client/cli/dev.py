"""``minibroker dev up|down``: a whole local cluster (ZooKeeper + N brokers) in one command.

How this works. ``dev up`` is a supervisor: it starts ``minibroker zookeeper`` and then
N ``minibroker broker`` processes (``sys.executable -m client.cli.main ...``), each in
its own session so the terminal's Ctrl-C reaches only the supervisor, which then stops
them in order: SIGTERM to every broker (a broker stops cleanly: controlled shutdown,
logs flushed, ``.kafka_cleanshutdown`` written), then ZooKeeper. Each child writes its
output to ``<data-dir>/logs/<name>.log``; readiness is read from those logs (the line
a child prints once it listens) and then from the Metadata API: an active controller
and every broker registered.

Layout under ``--data-dir`` (reused by the next ``dev up``, so topics survive)::

    zookeeper/            ZooKeeper's snapshots and transaction log
    broker-<id>/logs-0,1  the broker's two log.dirs (two, so log-dir moves can be tried)
    logs/<name>.log       each child's output
    dev.json              the running cluster: supervisor pid, children, addresses

Ports: broker i (1-based) listens on ``base_port + i - 1`` and exports metrics on
``metrics_base_port + i - 1``; a port of 0 means "any free port" (tests use that;
the actual ports are in dev.json and printed). ``dev down`` sends SIGTERM to the
supervisor recorded in dev.json and waits for it to finish stopping the cluster.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import trio

from minibroker.client.admin import Admin
from minibroker.client.cli.common import UsageError, run_async
from minibroker.protocol.errors import KafkaError, MinibrokerError

HELP = "run a local cluster: `dev up` starts ZooKeeper and brokers, `dev down` stops it"

STATE_FILE = "dev.json"
ZOOKEEPER_READY = re.compile(rb"zookeeper\.connect=([\w.\-]+):(\d+)")
BROKER_READY = re.compile(rb"broker (\d+) listening on port (\d+)")
METRICS_PORT = re.compile(rb"metrics on port (\d+)")
KAFKA_READY = re.compile(rb"broker (\d+) Kafka protocol on \S*:(\d+)")
START_TIMEOUT_S = 120.0  # ZooKeeper's JVM start plus broker registration on a slow machine
STOP_TIMEOUT_S = 60.0  # controlled shutdown moves leadership away before a broker exits
POLL_S = 0.1  # how often logs and the cluster are checked while starting


class DevError(MinibrokerError):
    """dev up/down could not do what was asked (the message says why and where to look)."""


@dataclass
class ChildInfo:
    name: str
    pid: int
    port: int
    log: str
    metrics_port: int | None = None
    kafka_port: int | None = None


@dataclass
class DevState:
    supervisor_pid: int
    data_dir: str
    zookeeper: ChildInfo | None = None
    brokers: dict[int, ChildInfo] = field(default_factory=dict)
    ready: bool = False

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{b.port}" for b in self.brokers.values())

    @property
    def kafka_bootstrap(self) -> str:
        """Kafka clients' bootstrap.servers ("" when no broker has a Kafka listener)."""
        return ",".join(
            f"127.0.0.1:{b.kafka_port}" for b in self.brokers.values() if b.kafka_port is not None
        )

    def save(self) -> None:
        path = Path(self.data_dir) / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2) + "\n")
        tmp.replace(path)

    @classmethod
    def load(cls, data_dir: Path) -> DevState | None:
        try:
            raw = json.loads((data_dir / STATE_FILE).read_text())
        except (OSError, ValueError):
            return None
        zk = ChildInfo(**raw["zookeeper"]) if raw.get("zookeeper") else None
        brokers = {int(k): ChildInfo(**v) for k, v in raw.get("brokers", {}).items()}
        return cls(raw["supervisor_pid"], raw["data_dir"], zk, brokers, raw.get("ready", False))


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
    up.add_argument("--zookeeper-port", type=int, default=2181, help="(default 2181; 0 = any)")
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
        help="also serve Kafka's binary protocol: broker i on base+i-1 (0 = any; "
        "default: no Kafka listener)",
    )
    up.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="broker property for every broker (repeatable)",
    )
    down = actions.add_parser("down", help="stop the cluster `dev up` runs")
    for sub in (up, down):
        sub.add_argument(
            "--data-dir",
            type=Path,
            default=Path(".minibroker"),
            help="where data, logs and dev.json live (default .minibroker)",
        )


def run(args: argparse.Namespace) -> int:
    if args.action == "down":
        return down(args.data_dir)
    if not 1 <= args.brokers <= 100:
        raise UsageError("--brokers must be 1..100")
    for flag in ("base_port", "zookeeper_port", "metrics_base_port", "kafka_base_port"):
        port = getattr(args, flag)
        span = args.brokers if flag != "zookeeper_port" else 1
        if port and not 0 < port + span < 65536:
            raise UsageError(f"--{flag.replace('_', '-')} out of range: {port}")
    return run_async(_up, args)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _check_ports_free(args: argparse.Namespace) -> None:
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
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                raise DevError(
                    f"port {port} ({who}) is in use: is another cluster running? "
                    "(--base-port, --zookeeper-port and --metrics-base-port choose others)"
                ) from None


def pid_running(pid: int) -> bool:
    """True while ``pid`` runs; a zombie (exited, not yet reaped) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # Linux: an orphan's zombie lingers where init does not reap (containers)
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"


# --- dev down ------------------------------------------------------------------------


def down(data_dir: Path) -> int:
    state = DevState.load(data_dir)
    if state is None:
        raise DevError(f"no dev cluster recorded in {data_dir / STATE_FILE}")
    if pid_running(state.supervisor_pid):
        print(f"stopping the dev cluster (supervisor pid {state.supervisor_pid})", flush=True)
        os.kill(state.supervisor_pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S + 15
        while pid_running(state.supervisor_pid) and time.monotonic() < deadline:
            time.sleep(POLL_S)
        if pid_running(state.supervisor_pid):
            raise DevError(f"supervisor pid {state.supervisor_pid} did not stop in time")
    # A supervisor killed with SIGKILL leaves its children: stop those directly.
    children = list(state.brokers.values()) + ([state.zookeeper] if state.zookeeper else [])
    leftovers = [c for c in children if pid_running(c.pid)]
    for child in leftovers:
        os.kill(child.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while any(pid_running(c.pid) for c in leftovers) and time.monotonic() < deadline:
        time.sleep(POLL_S)
    for child in leftovers:
        if pid_running(child.pid):
            os.kill(child.pid, signal.SIGKILL)
    (data_dir / STATE_FILE).unlink(missing_ok=True)
    print("dev cluster stopped", flush=True)
    return 0


# --- dev up --------------------------------------------------------------------------


class _Supervisor:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.data_dir: Path = args.data_dir.resolve()
        self.state = DevState(os.getpid(), str(self.data_dir))
        self.processes: dict[str, trio.Process] = {}
        self.stopping = False

    def _command(self, *argv: str) -> list[str]:
        return [sys.executable, "-m", "minibroker.client.cli.main", *argv]

    async def _spawn(self, name: str, argv: list[str]) -> tuple[trio.Process, Path]:
        log = self.data_dir / "logs" / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as out:
            out.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting {name}\n".encode())
            out.flush()
            env = dict(os.environ, PYTHONUNBUFFERED="1")
            repo_root = str(Path(__file__).resolve().parents[2])
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [repo_root, env.get("PYTHONPATH")]))
            process = await trio.lowlevel.open_process(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                start_new_session=True,
                env=env,
            )
        self.processes[name] = process
        return process, log

    async def _wait_for_line(
        self, name: str, log: Path, pattern: re.Pattern[bytes], start: int
    ) -> re.Match[bytes]:
        process = self.processes[name]
        with trio.move_on_after(START_TIMEOUT_S):
            while True:
                with log.open("rb") as f:
                    f.seek(start)
                    found = pattern.search(f.read())
                if found:
                    return found
                if process.poll() is not None:
                    raise DevError(f"{name} exited with code {process.returncode}; see {log}")
                await trio.sleep(POLL_S)
        raise DevError(f"{name} did not start within {START_TIMEOUT_S:g} s; see {log}")

    async def start(self) -> None:
        args = self.args
        zk_dir = self.data_dir / "zookeeper"
        zk_log = self.data_dir / "logs" / "zookeeper.log"
        offset = zk_log.stat().st_size if zk_log.exists() else 0
        print(f"starting ZooKeeper (data in {zk_dir})", flush=True)
        zk, _ = await self._spawn(
            "zookeeper",
            self._command(
                "zookeeper",
                "--port",
                str(args.zookeeper_port or _free_port()),
                "--data-dir",
                str(zk_dir),
            ),
        )
        found = await self._wait_for_line("zookeeper", zk_log, ZOOKEEPER_READY, offset)
        zk_port = int(found.group(2))
        self.state.zookeeper = ChildInfo("zookeeper", zk.pid, zk_port, str(zk_log))
        self.state.save()
        for i in range(1, args.brokers + 1):
            await self._start_broker(i, zk_port)
        print(f"waiting for a controller and {args.brokers} registered brokers", flush=True)
        await self._wait_for_cluster()
        self.state.ready = True
        self.state.save()

    async def _start_broker(self, broker_id: int, zk_port: int) -> None:
        args = self.args
        name = f"broker-{broker_id}"
        home = self.data_dir / name
        dirs = [home / "logs-0", home / "logs-1"]
        for d in dirs:
            d.mkdir(parents=True, exist_ok=True)
        port = args.base_port + broker_id - 1 if args.base_port else 0
        metrics = args.metrics_base_port + broker_id - 1 if args.metrics_base_port else 0
        log = self.data_dir / "logs" / f"{name}.log"
        offset = log.stat().st_size if log.exists() else 0
        argv = self._command(
            "broker",
            "--broker-id",
            str(broker_id),
            "--listen",
            f"127.0.0.1:{port}",
            "--log-dirs",
            ",".join(str(d) for d in dirs),
            "--zookeeper",
            f"127.0.0.1:{zk_port}",
            "--metrics-port",
            str(metrics),
        )
        kafka_base = args.kafka_base_port
        if kafka_base is not None:
            kafka = kafka_base + broker_id - 1 if kafka_base else 0
            argv += ["--kafka-listen", f"127.0.0.1:{kafka}"]
        for item in args.set:
            argv += ["--set", item]
        process, _ = await self._spawn(name, argv)
        found = await self._wait_for_line(name, log, BROKER_READY, offset)
        actual = int(found.group(2))
        if not metrics:
            with log.open("rb") as f:
                f.seek(offset)
                exported = METRICS_PORT.search(f.read())
            metrics = int(exported.group(1)) if exported else 0
        kafka_port = None
        if kafka_base is not None:
            kafka_port = int((await self._wait_for_line(name, log, KAFKA_READY, offset)).group(2))
        self.state.brokers[broker_id] = ChildInfo(
            name, process.pid, actual, str(log), metrics, kafka_port
        )
        self.state.save()
        print(f"  broker {broker_id} listening on 127.0.0.1:{actual} (log {log})", flush=True)

    async def _wait_for_cluster(self) -> None:
        wanted = set(self.state.brokers)
        last = ""
        with trio.move_on_after(START_TIMEOUT_S):
            while True:
                for name, process in self.processes.items():
                    if process.poll() is not None:
                        raise DevError(
                            f"{name} exited with code {process.returncode}; see "
                            f"{self.data_dir / 'logs' / (name + '.log')}"
                        )
                try:
                    with trio.fail_after(5):
                        async with Admin(self.state.bootstrap, request_timeout_ms=3000) as admin:
                            cluster = await admin.describe_cluster()
                    registered = {b.node_id for b in cluster.brokers}
                    if cluster.controller_id >= 0 and wanted <= registered:
                        return
                    now = f"controller {cluster.controller_id}, brokers {sorted(registered)}"
                except (KafkaError, trio.TooSlowError, OSError) as exc:
                    now = f"not answering yet ({exc})"
                if now != last:
                    print(f"  {now}", flush=True)
                    last = now
                await trio.sleep(POLL_S * 3)
        raise DevError(
            f"no active controller with {len(wanted)} registered brokers after "
            f"{START_TIMEOUT_S:g} s (last seen: {last}); see {self.data_dir / 'logs'}"
        )

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
        print(f"  logs                {self.data_dir / 'logs'}")
        print(
            "Ctrl-C (or `minibroker dev down`) stops it; data stays for the next `dev up`.",
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
        """SIGTERM every broker, wait (controlled shutdown), then ZooKeeper; SIGKILL late ones."""
        self.stopping = True
        brokers = [p for n, p in self.processes.items() if n != "zookeeper"]
        await _terminate(brokers, STOP_TIMEOUT_S)
        zk = self.processes.get("zookeeper")
        if zk is not None:
            await _terminate([zk], 30.0)
        (self.data_dir / STATE_FILE).unlink(missing_ok=True)


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
    _check_ports_free(args)
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

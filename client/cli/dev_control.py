"""``dev down|status|stop-broker|start-broker|restart-broker``: one running dev cluster.

How this works. These commands act on the processes ``dev.json`` lists, by pid, not
through the supervisor: they work the same whether or not the supervisor still runs.
``stop-broker`` sends SIGTERM (the broker's controlled shutdown moves leadership away
first) or, with ``--kill``, SIGKILL, and waits until the process is gone.
``start-broker`` starts ``minibroker broker`` with the id, port, metrics port, log dirs
and ``--set`` properties ``dev up`` gave it, in its own session, its output appended to
the same log, records the new pid in dev.json, and returns once the broker is
registered in the cluster. The supervisor stops such a broker too at ``dev down`` or
Ctrl-C (it reads dev.json then).

The argv of a broker and the waits (a log line, registration) are shared with ``dev
up`` (client/cli/dev.py).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import trio

from minibroker.client.admin import Admin
from minibroker.client.cli.common import print_json, print_table
from minibroker.client.cli.dev_secure import listen_scheme
from minibroker.client.cli.dev_state import (
    STATE_FILE,
    ChildInfo,
    DevError,
    DevState,
    forget_location,
    is_running,
    load_state,
    pid_running,
    recorded_clusters,
    registry_dir,
    updating_state,
)
from minibroker.client.security import client_security, read_command_config
from minibroker.net.security import ClientSecurity
from minibroker.protocol.errors import KafkaError

BROKER_READY = re.compile(rb"broker (\d+) listening on port (\d+)")
KAFKA_READY = re.compile(rb"broker (\d+) Kafka protocol on \S*:(\d+)")
START_TIMEOUT_S = 120.0  # ZooKeeper's JVM start plus broker registration on a slow machine
STOP_TIMEOUT_S = 60.0  # controlled shutdown moves leadership away before a broker exits
KILL_WAIT_S = 10.0  # a SIGKILLed process is gone as soon as the kernel reaps it
POLL_S = 0.1  # how often logs, processes and the cluster are checked while waiting


def cli_argv(*argv: str) -> list[str]:
    return [sys.executable, "-m", "minibroker", *argv]


def child_env() -> dict[str, str]:
    """Unbuffered output, and this checkout's packages first (the children run our code)."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    repo_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [repo_root, env.get("PYTHONPATH")]))
    return env


def broker_argv(
    data_dir: Path,
    broker_id: int,
    port: int,
    metrics_port: int,
    zk_port: int,
    settings: list[str],
    kafka_port: int | None = None,
    *,
    secure: bool = False,
) -> list[str]:
    """``minibroker broker ...`` for broker ``broker_id`` of the cluster in ``data_dir``
    (with a Kafka listener on ``kafka_port`` unless it is None; 0 = any port)."""
    home = data_dir / f"broker-{broker_id}"
    dirs = [home / "logs-0", home / "logs-1"]
    for d in dirs:
        d.mkdir(parents=True, exist_ok=True)
    argv = cli_argv(
        "broker",
        *("--broker-id", str(broker_id), "--listen", f"{listen_scheme(secure)}127.0.0.1:{port}"),
        *("--log-dirs", ",".join(str(d) for d in dirs)),
        *("--zookeeper", f"127.0.0.1:{zk_port}", "--metrics-port", str(metrics_port)),
    )
    if kafka_port is not None:
        argv += ["--kafka-listen", f"127.0.0.1:{kafka_port}"]
    for item in settings:
        argv += ["--set", item]
    return argv


def log_header(name: str) -> bytes:
    return f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting {name}\n".encode()


async def wait_for_line(
    name: str,
    log: Path,
    pattern: re.Pattern[bytes],
    start: int,
    exit_code: Callable[[], int | None],
) -> re.Match[bytes]:
    """The first match of ``pattern`` in ``log`` past byte ``start``; fails if the
    process exits first (``exit_code()`` not None) or after START_TIMEOUT_S."""
    with trio.move_on_after(START_TIMEOUT_S):
        while True:
            with log.open("rb") as f:
                f.seek(start)
                found = pattern.search(f.read())
            if found:
                return found
            code = exit_code()
            if code is not None:
                raise DevError(f"{name} exited with code {code}; see {log}")
            await trio.sleep(POLL_S)
    raise DevError(f"{name} did not start within {START_TIMEOUT_S:g} s; see {log}")


def security_of(client_config: str | None) -> ClientSecurity | None:
    """The login of a secure dev cluster's client.properties (None: plaintext)."""
    return None if client_config is None else client_security(read_command_config(client_config))


async def wait_for_registered(
    bootstrap: str,
    wanted: set[int],
    check_alive: Callable[[], None],
    logs: Path,
    security: ClientSecurity | None = None,
) -> None:
    """Return once a controller is active and every broker in ``wanted`` is registered;
    ``check_alive()`` raises if a process died meanwhile. Progress goes to stdout."""
    last = ""
    with trio.move_on_after(START_TIMEOUT_S):
        while True:
            check_alive()
            try:
                with trio.fail_after(5):
                    async with Admin(bootstrap, request_timeout_ms=3000, config=security) as admin:
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
        f"no active controller with brokers {sorted(wanted)} registered after "
        f"{START_TIMEOUT_S:g} s (last seen: {last}); see {logs}"
    )


def wait_gone(pids: list[int], timeout_s: float) -> bool:
    """Wait until none of ``pids`` runs; False if one still does after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while any(pid_running(p) for p in pids):
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_S)
    return True


def terminate_pids(pids: list[int], timeout_s: float) -> None:
    """SIGTERM, wait up to ``timeout_s``, then SIGKILL whatever still runs."""
    running = [p for p in pids if pid_running(p)]
    for pid in running:
        _signal(pid, signal.SIGTERM)
    if not wait_gone(running, timeout_s):
        for pid in running:
            if pid_running(pid):
                _signal(pid, signal.SIGKILL)
        wait_gone(running, KILL_WAIT_S)


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)


# --- dev down --------------------------------------------------------------------------


def down(data_dir: Path) -> int:
    state = load_state(data_dir)
    if pid_running(state.supervisor_pid):
        print(f"stopping the dev cluster in {data_dir} (supervisor pid {state.supervisor_pid})")
        os.kill(state.supervisor_pid, signal.SIGTERM)
        if not wait_gone([state.supervisor_pid], STOP_TIMEOUT_S + 15):
            raise DevError(f"supervisor pid {state.supervisor_pid} did not stop in time")
    # A supervisor killed with SIGKILL leaves its children: stop those directly. Reread:
    # a broker started again by `dev start-broker` is recorded there.
    state = DevState.load(data_dir) or state
    brokers = [b.pid for b in state.brokers.values()]
    terminate_pids(brokers, STOP_TIMEOUT_S)
    if state.zookeeper is not None:
        terminate_pids([state.zookeeper.pid], STOP_TIMEOUT_S)
    (data_dir / STATE_FILE).unlink(missing_ok=True)
    forget_location(data_dir)
    print("dev cluster stopped", flush=True)
    return 0


# --- one broker ------------------------------------------------------------------------


def _broker(state: DevState, broker_id: int) -> ChildInfo:
    info = state.brokers.get(broker_id)
    if info is None:
        known = ", ".join(map(str, sorted(state.brokers))) or "none"
        raise DevError(f"the dev cluster has no broker {broker_id} (brokers: {known})")
    return info


def stop_broker(data_dir: Path, broker_id: int, *, kill: bool) -> int:
    state = load_state(data_dir)
    info = _broker(state, broker_id)
    if not pid_running(info.pid):
        print(f"broker {broker_id} is not running")
        return 0
    how = "SIGKILL" if kill else "SIGTERM, controlled shutdown"
    print(f"stopping broker {broker_id} (pid {info.pid}, {how})", flush=True)
    _signal(info.pid, signal.SIGKILL if kill else signal.SIGTERM)
    if not wait_gone([info.pid], KILL_WAIT_S if kill else STOP_TIMEOUT_S):
        raise DevError(
            f"broker {broker_id} (pid {info.pid}) still runs after "
            f"{STOP_TIMEOUT_S:g} s; `minibroker dev stop-broker {broker_id} --kill` ends it"
        )
    print(f"broker {broker_id} stopped", flush=True)
    return 0


async def start_broker(data_dir: Path, broker_id: int) -> int:
    state = load_state(data_dir)
    info = _broker(state, broker_id)
    if pid_running(info.pid):
        raise DevError(
            f"broker {broker_id} is running (pid {info.pid}); "
            f"`minibroker dev restart-broker {broker_id}` restarts it"
        )
    zk = state.zookeeper
    if zk is None or not pid_running(zk.pid):
        raise DevError(f"ZooKeeper of the dev cluster in {data_dir} is not running; `dev up` it")
    log = Path(info.log)
    offset = log.stat().st_size if log.exists() else 0
    argv = broker_argv(
        data_dir.resolve(),
        broker_id,
        info.port,
        info.metrics_port or 0,
        zk.port,
        state.settings,
        info.kafka_port,
        secure=state.client_config is not None,
    )
    with log.open("ab") as out:
        out.write(log_header(info.name))
        out.flush()
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,  # outlives this command, like the supervisor's children
            env=child_env(),
        )
    await wait_for_line(info.name, log, BROKER_READY, offset, process.poll)
    with updating_state(data_dir) as latest:
        latest.brokers[broker_id].pid = process.pid
    print(f"broker {broker_id} started (pid {process.pid}), waiting for it to register")

    def check_alive() -> None:
        if process.poll() is not None:
            raise DevError(f"{info.name} exited with code {process.returncode}; see {log}")

    await wait_for_registered(
        state.bootstrap, {broker_id}, check_alive, log, security_of(state.client_config)
    )
    print(f"broker {broker_id} is up on 127.0.0.1:{info.port}", flush=True)
    return 0


# --- dev status ------------------------------------------------------------------------


def status_of(state: DevState) -> dict[str, Any]:
    """dev.json plus, for each process, whether it runs now."""
    zk = state.zookeeper
    return {
        "data_dir": state.data_dir,
        "bootstrap": state.bootstrap,
        "ready": state.ready,
        "supervisor": {"pid": state.supervisor_pid, "alive": pid_running(state.supervisor_pid)},
        "zookeeper": None if zk is None else asdict(zk) | {"alive": pid_running(zk.pid)},
        "brokers": [
            {"id": broker_id} | asdict(b) | {"alive": pid_running(b.pid)}
            for broker_id, b in sorted(state.brokers.items())
        ],
    }


def status(data_dir: Path, output_format: str) -> int:
    report = status_of(load_state(data_dir))
    if output_format == "json":
        print_json(report)
        return 0
    print(f"dev cluster in {report['data_dir']}")
    print(f"bootstrap servers {report['bootstrap'] or '-'}\n")
    rows: list[tuple[Any, ...]] = [
        ("supervisor", report["supervisor"]["pid"], "-", "-", _yes(report["supervisor"]), "-")
    ]
    zk = report["zookeeper"]
    if zk is not None:
        rows.append(("zookeeper", zk["pid"], zk["port"], "-", _yes(zk), zk["log"]))
    for b in report["brokers"]:
        rows.append((b["name"], b["pid"], b["port"], b["metrics_port"] or "-", _yes(b), b["log"]))
    print_table(("PROCESS", "PID", "PORT", "METRICS", "ALIVE", "LOG"), rows)
    return 0


def status_all(output_format: str) -> int:
    """Every recorded cluster of this user: where, whether it runs, its ports."""
    reports = [status_of(state) | {"running": is_running(state)} for state in recorded_clusters()]
    if output_format == "json":
        print_json(reports)
        return 0
    if not reports:
        print(f"no dev cluster recorded in {registry_dir()}")
        return 0
    rows = []
    for report in reports:
        brokers = report["brokers"]
        zk = report["zookeeper"]
        rows.append(
            (
                report["data_dir"],
                "running" if report["running"] else "stopped",
                zk["port"] if zk else "-",
                _ports(b["port"] for b in brokers),
                _ports(b["kafka_port"] for b in brokers),
                _ports(b["metrics_port"] for b in brokers),
            )
        )
    print_table(("DATA DIR", "STATE", "ZOOKEEPER", "BROKERS", "KAFKA", "METRICS"), rows)
    return 0


def _ports(ports: Iterable[int | None]) -> str:
    return ",".join(str(p) for p in ports if p) or "-"


def _yes(process: dict[str, Any]) -> str:
    return "yes" if process["alive"] else "no"

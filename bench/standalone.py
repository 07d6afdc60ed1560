"""A standalone broker for the client benchmarks: ``minibroker broker`` without ZooKeeper.

With no controller, this module plays one: it sends the broker a LeaderAndIsr making it
the only replica and leader of the topic's partitions, and an UpdateMetadata so the
broker's Metadata API shows them to the client. Used by bench/producer_perf.py and
bench/consumer_perf.py when no ``--bootstrap-server`` is given.
"""

from __future__ import annotations

import contextlib
import cProfile
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import trio

from minibroker.net.connection import Connection
from minibroker.net.security import ClientSecurity
from minibroker.protocol.api import ApiKey

ROOT = Path(__file__).resolve().parents[1]
BROKER_ID = 1
CONTROLLER_ID = 3000  # not a broker id: only used as the sender of controller requests
START_TIMEOUT_S = 30.0
LEAD_TIMEOUT_S = 120.0
_LISTENING = re.compile(r"listening on port (\d+)")
# ``python -c`` program: run module argv[2] as __main__ under cProfile, timed by the
# process's CPU time rather than the wall clock (on a busy machine the wall clock mostly
# measures waiting for a core), and dump the profile to argv[1] when it exits.
_CPU_PROFILED_MAIN = """
import cProfile, runpy, sys, time
path, module = sys.argv[1], sys.argv[2]
sys.argv = [module, *sys.argv[3:]]
profiler = cProfile.Profile(time.process_time)
profiler.enable()
try:
    runpy.run_module(module, run_name="__main__", alter_sys=True)
except SystemExit:
    pass
finally:
    profiler.disable()
    profiler.dump_stats(path)
"""
_BROKER_PIDS: dict[str, int] = {}  # host:port -> pid of the standalone broker serving it


@contextlib.contextmanager
def standalone_broker(*properties: str, listen: str = "127.0.0.1:0") -> Iterator[str]:
    """Run a broker process on a free port with a temporary log dir; yields host:port.
    ``listen`` may name the listener (``SSL://127.0.0.1:0``)."""
    with standalone_broker_process(*properties, listen=listen) as (bootstrap, _):
        yield bootstrap


@contextlib.contextmanager
def standalone_broker_process(
    *properties: str, listen: str = "127.0.0.1:0", profile: str | None = None
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``standalone_broker`` that also yields the process (to read its CPU time); with
    ``profile`` the broker runs under cProfile, dumped to that file when it stops."""
    with tempfile.TemporaryDirectory(prefix="minibroker-bench-") as tmp:
        profiler = ["-c", _CPU_PROFILED_MAIN, profile] if profile else ["-m"]
        argv = [
            sys.executable,
            *profiler,
            "minibroker",
            "broker",
            "--broker-id",
            str(BROKER_ID),
            "--listen",
            listen,
            "--log-dirs",
            str(Path(tmp) / "logs"),
            "--metrics-port",
            "-1",
            "--log-level",
            "WARNING",
            "--set",  # lead() below plays the controller for this standalone broker
            "standalone.accept.controller.requests=true",
        ]
        for item in properties:
            argv += ["--set", item]
        env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)
        try:
            assert process.stdout is not None
            deadline = time.monotonic() + START_TIMEOUT_S
            port = None
            while port is None and time.monotonic() < deadline:
                line = process.stdout.readline()
                if not line:
                    raise RuntimeError(f"broker exited with code {process.wait()}")
                found = _LISTENING.search(line)
                port = int(found.group(1)) if found else None
            if port is None:
                raise RuntimeError("broker did not start listening in time")
            address = f"127.0.0.1:{port}"
            _BROKER_PIDS[address] = process.pid
            try:
                yield address, process
            finally:
                del _BROKER_PIDS[address]
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


async def lead(
    bootstrap: str,
    topic: str,
    partitions: int,
    kafka: str | None = None,
    security: ClientSecurity | None = None,
) -> None:
    """Make the standalone broker leader of ``topic``'s partitions (as a controller would);
    ``kafka`` is its Kafka listener's host:port, if it has one; ``security`` how to
    reach a TLS / SASL listener."""
    host, _, port_text = bootstrap.rpartition(":")
    port = int(port_text)
    states: list[dict[str, Any]] = [
        {
            "topic_name": topic,
            "partition_index": p,
            "controller_epoch": 1,
            "leader": BROKER_ID,
            "leader_epoch": 0,
            "isr": [BROKER_ID],
            "zk_version": 0,
            "replicas": [BROKER_ID],
        }
        for p in range(partitions)
    ]
    me: dict[str, Any] = {"id": BROKER_ID, "host": host, "port": port}
    if kafka is not None:
        kafka_host, _, kafka_port = kafka.rpartition(":")
        me |= {"kafka_host": kafka_host, "kafka_port": int(kafka_port)}
    header = {"controller_id": CONTROLLER_ID, "controller_epoch": 1, "broker_epoch": -1}
    # LeaderAndIsr of thousands of partitions creates their logs: slow on a busy machine.
    async with Connection(host, port, security=security, request_timeout=LEAD_TIMEOUT_S) as conn:
        body = {
            **header,
            "partition_states": [s | {"is_new": True} for s in states],
            "live_leaders": [me],
        }
        response = await conn.request(ApiKey.LEADER_AND_ISR, body)
        if response["error_code"] or any(e["error_code"] for e in response["partition_errors"]):
            raise RuntimeError(f"LeaderAndIsr failed: {response}")
        body = {**header, "partition_states": states, "live_brokers": [me]}
        response = await conn.request(ApiKey.UPDATE_METADATA, body)
        if response["error_code"]:
            raise RuntimeError(f"UpdateMetadata failed: {response}")


def run_perf_tool(
    args: Any,
    measure: Callable[[Any], Awaitable[dict[str, Any]]],
    fill: Callable[[Any], Awaitable[None]] | None = None,
) -> None:
    """The perf tools' main: ``measure(args)`` against ``args.bootstrap_server``, or,
    when none is given, against a standalone broker made leader of ``args.topic``'s
    ``args.partitions`` partitions (and filled by ``fill`` first). Under cProfile when
    ``args.profile`` is set; prints the figures as one JSON line."""
    standalone = args.bootstrap_server is None
    given = contextlib.nullcontext(args.bootstrap_server)
    with standalone_broker() if standalone else given as bootstrap:
        args.bootstrap_server = bootstrap
        if standalone:
            trio.run(lead, bootstrap, args.topic, args.partitions)
            if fill is not None:
                trio.run(fill, args)
        pid = _BROKER_PIDS.get(bootstrap) if standalone else None
        broker_cpu = process_cpu_seconds(pid)
        load = os.getloadavg()[0]
        figures = _run_measured(measure, args, args.profile)
        if pid is not None:
            # CPU seconds, unlike wall time, hardly depend on what else the machine runs.
            figures["broker_cpu_seconds"] = round(process_cpu_seconds(pid) - broker_cpu, 3)
        figures["load_average"] = round((load + os.getloadavg()[0]) / 2, 2)
    figures["standalone_broker"] = standalone
    print(json.dumps(figures))


def process_cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux /proc), 0 without one."""
    if pid is None:
        return 0.0
    # Fields after the ")" that ends the command name: utime and stime are the 12th and
    # 13th (proc(5) numbers them 14 and 15, counting pid and comm).
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _run_measured(
    measure: Callable[[Any], Awaitable[dict[str, Any]]], args: Any, profile: str | None
) -> dict[str, Any]:
    """``trio.run(measure, args)``; under cProfile, dumped to ``profile``, when it is set."""
    profiler = cProfile.Profile() if profile else None
    if profiler:
        profiler.enable()
    figures = trio.run(measure, args)
    if profiler:
        profiler.disable()
        profiler.dump_stats(profile)
    return figures

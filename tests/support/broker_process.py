"""One ``minibroker broker`` subprocess for tests: start it, wait until it listens, signal it.

``BrokerProcess`` runs ``python -m minibroker broker`` listening on 127.0.0.1 only,
over its own log dirs and a ZooKeeper connect string, in a session of its own (a Ctrl-C
of the test run reaches pytest, which cleans up). Its output is appended to
``out_path``, so the file keeps every incarnation's output in order. ``start()`` waits
for the line the broker prints once it listens and keeps the port it reports: a restart
asks for that port again, so metadata held elsewhere stays right. After kill -9 the old
ZooKeeper session holds /brokers/ids/N until it times out; a start that loses that race
exits, and is tried again (bounded).

Faults are signals: ``kill`` (SIGKILL, the files stay as they were), ``pause`` /
``resume`` (SIGSTOP / SIGCONT), ``stop`` (SIGTERM: controlled shutdown; SIGKILL if it
takes longer than its timeout). ``kill`` and ``stop`` also reap the process.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import trio

ROOT = Path(__file__).resolve().parents[2]
READY = re.compile(rb"broker (\d+) listening on port (\d+)")
START_TIMEOUT_S = 30.0
"""A broker starts in well under a second; loaded CI machines and log recovery add up."""
START_ATTEMPTS = 20
"""Bounds the retries of a start that exits while its old registration is still there."""
RETRY_BACKOFF_S = 0.5  # lets the old ZooKeeper session come closer to its expiry
POLL_S = 0.05  # how often the output file is read while waiting for the ready line
STOP_TIMEOUT_S = 30.0  # a controlled shutdown moves leadership away; that takes seconds


def child_env() -> dict[str, str]:
    """The environment of every process a test starts: this checkout's packages first,
    and unbuffered output, so a killed process leaves all it printed in its log file."""
    return dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")


@dataclass
class BrokerProcess:
    broker_id: int
    log_dirs: Sequence[Path]
    zk_connect: str
    out_path: Path
    settings: Sequence[str] = ()
    """``--set key=value`` items, in order (a later one wins)."""
    metrics_port: int | None = None
    """``--metrics-port``; None leaves the flag off (the broker's configured default)."""
    start_timeout: float = START_TIMEOUT_S
    port: int = 0
    listen_host: str = "127.0.0.1"
    command_prefix: Sequence[str] = ()
    """Run the broker through this (e.g. ``ip netns exec NS``: a network namespace)."""
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    paused: bool = False

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def argv(self) -> list[str]:
        argv = [
            *self.command_prefix,
            sys.executable,
            "-m",
            "minibroker",
            "broker",
            "--broker-id",
            str(self.broker_id),
            "--listen",
            f"{self.listen_host}:{self.port}",
            "--log-dirs",
            ",".join(str(d) for d in self.log_dirs),
            "--zookeeper",
            self.zk_connect,
        ]
        if self.metrics_port is not None:
            argv += ["--metrics-port", str(self.metrics_port)]
        for item in self.settings:
            argv += ["--set", item]
        return argv

    async def start(self) -> None:
        """Start the broker and return once it listens; raise if no attempt got there."""
        for _ in range(START_ATTEMPTS):
            if await self._spawn():
                return
            await trio.sleep(RETRY_BACKOFF_S)
        raise AssertionError(f"broker {self.broker_id} did not start: {self.output()[-2000:]}")

    async def _spawn(self) -> bool:
        self.out_path.parent.mkdir(parents=True, exist_ok=True)
        # Measured before the process exists: the ready line cannot slip in ahead of it.
        offset = self.out_path.stat().st_size if self.out_path.exists() else 0
        with self.out_path.open("ab") as out:
            self.proc = subprocess.Popen(
                self.argv(),
                cwd=ROOT,
                env=child_env(),
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.paused = False
        with trio.move_on_after(self.start_timeout):
            while self.proc.poll() is None:
                with self.out_path.open("rb") as out:
                    out.seek(offset)
                    found = READY.search(out.read())
                if found:
                    self.port = int(found.group(2))
                    return True
                await trio.sleep(POLL_S)
            return False  # it exited (e.g. its old registration is still there)
        self.kill()
        return False

    def output(self) -> str:
        """Everything every incarnation of this broker printed."""
        path = self.out_path
        return path.read_text(errors="replace") if path.exists() else ""

    def kill(self) -> None:
        """SIGKILL (a stopped process dies too) and reap it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        self.paused = False

    def pause(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)
        self.paused = False

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM, wait up to ``timeout`` (blocking), then SIGKILL; the exit code."""
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return proc.returncode

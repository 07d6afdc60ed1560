"""A real, standalone ZooKeeper server run as a child process, for local use and tests.

How this works: the pyspark wheel ships ZooKeeper's server jars (``pyspark/jars/
zookeeper-*.jar`` plus jute, netty, slf4j and log4j), so no system install is needed.
``ZooKeeperServer.start()`` writes three files into its data directory and launches

    java -cp <ZooKeeper's jars> org.apache.zookeeper.server.quorum.QuorumPeerMain zoo.cfg

The class path names only the ~40 jars ZooKeeper uses (``ZOOKEEPER_JAR_PREFIXES``),
not all ~280 of ``pyspark/jars/*``: log4j and ServiceLoader scan every jar on the path
at start-up, and the short path halves the start time of a cold JVM.

``zoo.cfg``           clientPort, dataDir, tickTime, session timeout bounds, no admin
                      HTTP server, four-letter words ``ruok,stat,srvr`` only.
``log4j2.properties`` sends ZooKeeper's own log to ``zookeeper.log`` (not our stdout).
``zookeeper.out``     the JVM's stdout/stderr (normally empty).

Readiness is the ``srvr`` four-letter word answered with the server's version: ``ruok``
says ``imok`` as soon as the port listens, while the database may still be loading and
sessions are refused, so it only serves as a liveness check. ZooKeeper
cannot listen on port 0, so with ``port=0`` we ask the kernel for a free port (bind
127.0.0.1:0, read it, close) and, if another process grabs it before Java binds, the
JVM exits with a BindException and we retry with a fresh port.

Stopping sends SIGTERM (the JVM runs ZooKeeper's shutdown hook), then SIGKILL after
``STOP_GRACE_S``. On Linux the child also gets SIGKILL if the thread that started it
dies (PR_SET_PDEATHSIG), so a killed test run leaves no stray JVM behind; that is only
armed when starting from the main thread, because the signal follows the starting
*thread*, not the process.

The sync API (``start``/``stop``/``with``) serves the CLI and pytest's session
fixture; ``open_zookeeper`` and ``ZooKeeperServer.run`` serve Trio code.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from types import TracebackType

import trio

from minibroker.protocol.errors import MinibrokerError

MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
# 500 ms ticks keep the minimum session timeout (2 ticks by default) low for tests.
TICK_TIME_MS = 500
# Tests expire sessions on purpose; 1 s lets them do it quickly.
MIN_SESSION_TIMEOUT_MS = 1000
# Brokers may ask for Kafka's 18 s default and more.
MAX_SESSION_TIMEOUT_MS = 60_000
# A cold JVM serves in about a second; a loaded CI machine needs more slack.
START_TIMEOUT_S = 30.0
# ZooKeeper's shutdown hook closes the database in well under a second.
STOP_GRACE_S = 5.0
# Only the free-port race is retried; any other start failure is reported at once.
BIND_ATTEMPTS = 5
# How often readiness is polled, and how long one four-letter-word probe may take.
POLL_INTERVAL_S = 0.05
PROBE_TIMEOUT_S = 1.0
# Small heap, serial GC: a test ZooKeeper holds a few thousand znodes at most.
# C1-only JIT: starts about twice as fast, and ZooKeeper's load here never needs C2.
JVM_OPTIONS = (
    "-Xms32m",
    "-Xmx512m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Djava.awt.headless=true",
)
# Jars of pyspark/jars that ZooKeeper's server needs (itself, jute, its logging and
# netty/metrics/commons dependencies, snappy for compressed snapshots).
ZOOKEEPER_JAR_PREFIXES = (
    "zookeeper-",
    "audience-annotations-",
    "slf4j-api-",
    "log4j-api-",
    "log4j-core-",
    "log4j-slf4j2-impl-",
    "netty-",
    "metrics-",
    "commons-",
    "snappy-java-",
    "jline-",
)
# TLS natives for a secure client port we never open; large, and scanned like the rest.
_SKIPPED_JAR_MARKERS = ("tcnative",)

_PR_SET_PDEATHSIG = 1
_LOG_FILES = ("zookeeper.log", "zookeeper.out")


class ZooKeeperError(MinibrokerError):
    """The ZooKeeper server could not be found, started or stopped (one-line message)."""


def find_java() -> str:
    """Path of the ``java`` executable: ``$JAVA_HOME/bin/java``, else the one on PATH."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("java")
    if found is None:
        raise ZooKeeperError(
            "java not found: install a Java runtime (11 or newer) or set JAVA_HOME"
        )
    return found


def find_jars_dir() -> Path:
    """The pyspark ``jars`` directory that holds ZooKeeper's server jars.

    Located without importing pyspark (that import is slow and pulls in py4j).
    """
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise ZooKeeperError(
            "pyspark is not installed: it ships the ZooKeeper jars (pip install pyspark)"
        )
    for location in spec.submodule_search_locations:
        jars = Path(location) / "jars"
        if any(jars.glob("zookeeper-[0-9]*.jar")):
            return jars
    raise ZooKeeperError(f"no zookeeper-*.jar under {Path(location) / 'jars'}")


def zookeeper_classpath(jars: Path) -> str:
    """The class path for ZooKeeper's server out of pyspark's jars directory."""
    selected = sorted(
        str(jar)
        for jar in jars.glob("*.jar")
        if jar.name.startswith(ZOOKEEPER_JAR_PREFIXES)
        and not any(marker in jar.name for marker in _SKIPPED_JAR_MARKERS)
    )
    return os.pathsep.join(selected)


def pick_free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on right now (another process may still take it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def _check_port_free(host: str, port: int) -> None:
    """Refuse a port something already listens on: its answers would fool readiness."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # SO_REUSEADDR ignores TIME_WAIT leftovers but still fails on a live listener.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise ZooKeeperError(f"cannot listen on {host}:{port}: {exc.strerror}") from exc


def four_letter_word(host: str, port: int, word: str, timeout: float = PROBE_TIMEOUT_S) -> bytes:
    """ZooKeeper's whole answer to a four-letter word; b"" if nobody answers."""
    chunks = []
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(word.encode())
            while chunk := sock.recv(4096):  # the server closes after answering
                chunks.append(chunk)
    except OSError:
        pass
    return b"".join(chunks)


def ruok(host: str, port: int, timeout: float = PROBE_TIMEOUT_S) -> bool:
    """True when something answers ``ruok`` with ``imok`` (the JVM listens; it may not
    serve sessions yet: see ``is_serving``)."""
    return four_letter_word(host, port, "ruok", timeout) == b"imok"


def is_serving(host: str, port: int, timeout: float = PROBE_TIMEOUT_S) -> bool:
    """True when the server at host:port accepts sessions (``srvr`` reports its version
    instead of "not currently serving requests")."""
    return four_letter_word(host, port, "srvr", timeout).startswith(b"Zookeeper version:")


def packets_received(host: str, port: int, timeout: float = PROBE_TIMEOUT_S) -> int:
    """How many packets (requests, pings included) the server has received since it
    started (``srvr``'s "Received"); -1 if it does not say. Benchmarks and tests count
    the requests an operation costs with it."""
    found = re.search(rb"Received: (\d+)", four_letter_word(host, port, "srvr", timeout))
    return int(found.group(1)) if found else -1


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _arm_parent_death_signal() -> Callable[[], None] | None:
    """A preexec_fn killing the child when the starting thread dies (Linux only)."""
    if not sys.platform.startswith("linux"):
        return None
    if threading.current_thread() is not threading.main_thread():
        return None
    libc = ctypes.CDLL(None, use_errno=True)

    def arm() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)

    return arm


class ZooKeeperServer:
    """One standalone ZooKeeper server process (see the module docstring).

    Not thread-safe: start and stop it from one thread (or one Trio task).
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        *,
        port: int = 0,
        host: str = "127.0.0.1",
        force_sync: bool = True,
        start_timeout: float = START_TIMEOUT_S,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.host = host
        self._requested_port = port
        self.port = port
        # Tests turn fsync off: their data is thrown away and fsync dominates write time.
        self.force_sync = force_sync
        self.start_timeout = start_timeout
        self._process: subprocess.Popen[bytes] | None = None
        self._log_offsets: dict[str, int] = {}

    @property
    def connect_string(self) -> str:
        """``host:port`` for ``zookeeper.connect`` (append ``/chroot`` as needed)."""
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "zookeeper.log"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def is_running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    # -- sync API -------------------------------------------------------------------

    def start(self) -> None:
        """Launch the server and block until it serves sessions (or raise)."""
        for attempt in range(BIND_ATTEMPTS):
            self._launch()
            try:
                ready = self._wait_ready()
            except BaseException:  # Ctrl-C while waiting must not leave a JVM behind
                self.stop()
                raise
            if ready:
                return
            if not self._lost_port_race() or attempt == BIND_ATTEMPTS - 1:
                break
        raise ZooKeeperError(self._failure_message())

    def stop(self) -> None:
        """SIGTERM, wait up to ``STOP_GRACE_S``, then SIGKILL. Idempotent."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def __enter__(self) -> ZooKeeperServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- Trio API ---------------------------------------------------------------------

    async def start_async(self) -> None:
        """``start()`` for Trio: the JVM is forked from the Trio thread (so the
        parent-death signal follows it), the readiness wait runs in a worker thread."""
        for attempt in range(BIND_ATTEMPTS):
            self._launch()
            try:
                ready = await trio.to_thread.run_sync(self._wait_ready)
            except BaseException:
                await self.stop_async()
                raise
            if ready:
                return
            if not self._lost_port_race() or attempt == BIND_ATTEMPTS - 1:
                break
        raise ZooKeeperError(self._failure_message())

    async def stop_async(self) -> None:
        """``stop()`` for Trio; shielded, so a cancelled caller still reaps the JVM."""
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(self.stop)

    async def run(
        self, *, task_status: trio.TaskStatus[ZooKeeperServer] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Start, report ``self`` to ``nursery.start``, run until cancelled, stop.

        Raises ZooKeeperError if the JVM exits on its own.
        """
        await self.start_async()
        try:
            task_status.started(self)
            while self.is_running():
                await trio.sleep(0.5)
            raise ZooKeeperError(f"ZooKeeper exited unexpectedly; see {self.log_path}")
        finally:
            await self.stop_async()

    # -- internals --------------------------------------------------------------------

    def _launch(self) -> None:
        java = find_java()
        jars = find_jars_dir()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self._requested_port:
            _check_port_free(self.host, self._requested_port)
        self.port = self._requested_port or pick_free_port(self.host)
        config = self._write_config_files()
        # Logs are appended across restarts; failures are diagnosed from this launch's part.
        self._log_offsets = {name: _size(self.data_dir / name) for name in _LOG_FILES}
        command = [
            java,
            *JVM_OPTIONS,
            f"-Dlog4j2.configurationFile={self.data_dir / 'log4j2.properties'}",
            # ZooKeeper's JMX log4j bean only adds a noisy status line.
            "-Dzookeeper.jmx.log4j.disable=true",
            "-cp",
            zookeeper_classpath(jars),
            MAIN_CLASS,
            str(config),
        ]
        with open(self.data_dir / "zookeeper.out", "ab") as out:
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.data_dir,
                # Our own process group: a terminal's Ctrl-C reaches us, and we stop
                # the JVM in order instead of racing it.
                start_new_session=True,
                preexec_fn=_arm_parent_death_signal(),
            )

    def _write_config_files(self) -> Path:
        config = self.data_dir / "zoo.cfg"
        config.write_text(
            "\n".join(
                [
                    f"tickTime={TICK_TIME_MS}",
                    f"dataDir={self.data_dir.resolve()}",
                    f"clientPort={self.port}",
                    f"clientPortAddress={self.host}",
                    f"minSessionTimeout={MIN_SESSION_TIMEOUT_MS}",
                    f"maxSessionTimeout={MAX_SESSION_TIMEOUT_MS}",
                    # Tests open many clients from one address; 0 means unlimited.
                    "maxClientCnxns=0",
                    "admin.enableServer=false",
                    "4lw.commands.whitelist=ruok,stat,srvr",
                    f"forceSync={'yes' if self.force_sync else 'no'}",
                    "",
                ]
            )
        )
        log_config = self.data_dir / "log4j2.properties"
        log_config.write_text(
            "\n".join(
                [
                    "status = error",
                    "appender.file.type = File",
                    "appender.file.name = file",
                    f"appender.file.fileName = {self.log_path.resolve()}",
                    "appender.file.layout.type = PatternLayout",
                    "appender.file.layout.pattern = %d{ISO8601} %-5p [%t] %c{1}: %m%n",
                    "rootLogger.level = info",
                    "rootLogger.appenderRef.file.ref = file",
                    "",
                ]
            )
        )
        return config

    def _wait_ready(self) -> bool:
        """Block until the server serves (True) or the JVM exits (False); raise on timeout."""
        assert self._process is not None
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                return False
            if is_serving(self.host, self.port):
                # Restarts keep the port: clients already hold this connect string.
                self._requested_port = self.port
                return True
            time.sleep(POLL_INTERVAL_S)
        self.stop()
        raise ZooKeeperError(
            f"ZooKeeper did not answer on {self.connect_string} within "
            f"{self.start_timeout:g} s; see {self.log_path}"
        )

    def _lost_port_race(self) -> bool:
        """True when the JVM died because a port we picked was taken meanwhile."""
        return self._requested_port == 0 and "BindException" in self._log_tail()

    def _log_tail(self) -> str:
        """What this launch wrote to the server log and the JVM's output."""
        text = ""
        for name in _LOG_FILES:
            with contextlib.suppress(OSError), open(self.data_dir / name, "rb") as log:
                log.seek(self._log_offsets.get(name, 0))
                text += log.read().decode(errors="replace")
        return text

    def _failure_message(self) -> str:
        code = self._process.returncode if self._process is not None else None
        self._process = None
        lines = [line.strip() for line in self._log_tail().splitlines()]
        # The exception line names the cause ("java.net.BindException: Address already
        # in use"); ERROR lines around it only say that ZooKeeper gave up.
        causes = [line for line in lines if "Exception:" in line or "Error:" in line]
        errors = [line for line in lines if " ERROR " in line]
        reason = (causes or errors or [f"exit code {code}"])[-1]
        return (
            f"ZooKeeper failed to start on {self.connect_string}: {reason} (log: {self.log_path})"
        )


@contextlib.asynccontextmanager
async def open_zookeeper(
    data_dir: str | os.PathLike[str],
    *,
    port: int = 0,
    host: str = "127.0.0.1",
    force_sync: bool = True,
) -> AsyncIterator[ZooKeeperServer]:
    """``async with open_zookeeper(dir) as zk: zk.connect_string`` — stopped on exit."""
    server = ZooKeeperServer(data_dir, port=port, host=host, force_sync=force_sync)
    await server.start_async()
    try:
        yield server
    finally:
        await server.stop_async()

"""The ``minibroker`` command line as a user runs it: its own process, from the repo root.

``run_cli("topic", "list", bootstrap=b)`` runs ``python -m minibroker topic list
--bootstrap-server b`` with ``child_env()`` (this checkout's packages first), captures
stdout and stderr as text and returns a ``CompletedProcess`` whatever the exit code: tests
assert on the code and the output. ``bootstrap`` goes last, where a user types it.
``stdin`` is the text the command reads; without it stdin is empty, never the test
run's own. ``run_cli_sync`` is the same for synchronous tests. A command that outlives
``timeout`` is stopped, and the caller sees the timeout error instead of a hung test.

A long-running command (``broker``, ``zookeeper``) that a test reads while it runs and
then signals is ``open_cli(...)``: a ``Popen`` with text pipes, which the test reaps.
"""

from __future__ import annotations

import subprocess
import sys

import trio

from tests.support.broker_process import ROOT, child_env

CLI_TIMEOUT_S = 60.0
"""A CLI command against a local cluster takes a second or two; produce/consume of many
records on a loaded machine takes longer, and those callers pass their own timeout."""


def cli_command(*argv: str, bootstrap: str | None = None) -> list[str]:
    """``python -m minibroker ARGV [--bootstrap-server BOOTSTRAP]``."""
    command = [sys.executable, "-m", "minibroker", *argv]
    if bootstrap is not None:
        command += ["--bootstrap-server", bootstrap]
    return command


def open_cli(*argv: str) -> subprocess.Popen[str]:
    """Start ``minibroker ARGV`` and return at once; stdout and stderr are text pipes."""
    return subprocess.Popen(
        cli_command(*argv),
        cwd=ROOT,
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


async def run_cli(
    *argv: str,
    bootstrap: str | None = None,
    stdin: str | None = None,
    timeout: float = CLI_TIMEOUT_S,
) -> subprocess.CompletedProcess[str]:
    """Run ``minibroker ARGV`` to its end; never raises on a non-zero exit code.

    Raises ``trio.TooSlowError`` past ``timeout`` seconds, once trio has stopped the
    process (SIGTERM, then SIGKILL if it lingers)."""
    with trio.fail_after(timeout):
        done = await trio.run_process(
            cli_command(*argv, bootstrap=bootstrap),
            stdin=b"" if stdin is None else stdin.encode(),
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            cwd=ROOT,
            env=child_env(),
        )
    return _decoded(done)


def run_cli_sync(
    *argv: str,
    bootstrap: str | None = None,
    stdin: str | None = None,
    timeout: float = CLI_TIMEOUT_S,
) -> subprocess.CompletedProcess[str]:
    """``run_cli`` for synchronous tests; raises ``subprocess.TimeoutExpired`` past
    ``timeout`` seconds (the process is killed first)."""
    done = subprocess.run(
        cli_command(*argv, bootstrap=bootstrap),
        input=b"" if stdin is None else stdin.encode(),
        capture_output=True,
        timeout=timeout,
        check=False,
        cwd=ROOT,
        env=child_env(),
    )
    return _decoded(done)


def _decoded(done: subprocess.CompletedProcess[bytes]) -> subprocess.CompletedProcess[str]:
    # Both twins decode the same way (UTF-8, no newline translation), so a test reads the
    # same text whichever one ran the command.
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(), done.stderr.decode()
    )

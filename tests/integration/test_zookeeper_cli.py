"""`minibroker zookeeper` in the foreground: prints the connect string, stops on signal."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from controller.zookeeper_server import pick_free_port, ruok

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(60)
def test_command_serves_until_ctrl_c_then_stops_zookeeper(tmp_path: Path) -> None:
    port = pick_free_port()
    command = [
        sys.executable,
        "-m",
        "client.cli.main",
        "zookeeper",
        "--port",
        str(port),
        "--data-dir",
        str(tmp_path),
    ]
    with subprocess.Popen(
        command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as process:
        try:
            assert process.stdout is not None
            first_line = process.stdout.readline()
            assert first_line.strip().endswith(f"zookeeper.connect=127.0.0.1:{port}")
            assert ruok("127.0.0.1", port)
            process.send_signal(signal.SIGINT)  # SIGTERM takes the same path
            assert process.wait(timeout=30) == 0
        finally:
            process.kill()
    assert not ruok("127.0.0.1", port)


def test_bad_port_is_a_one_line_error(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "client.cli.main",
            "zookeeper",
            "--port",
            "70000",
            "--data-dir",
            str(tmp_path),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "minibroker zookeeper: error: --port must be 1..65535, got 70000"
    ]

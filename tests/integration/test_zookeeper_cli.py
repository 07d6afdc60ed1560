"""`minibroker zookeeper` in the foreground: prints the connect string, stops on signal."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from minibroker.zk.server import pick_free_port, ruok
from tests.support.cli import open_cli, run_cli_sync


@pytest.mark.timeout(60)
def test_command_serves_until_ctrl_c_then_stops_zookeeper(tmp_path: Path) -> None:
    port = pick_free_port()
    with open_cli("zookeeper", "--port", str(port), "--data-dir", str(tmp_path)) as process:
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
    result = run_cli_sync("zookeeper", "--port", "70000", "--data-dir", str(tmp_path), timeout=30)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "minibroker zookeeper: error: --port must be 1..65535, got 70000"
    ]

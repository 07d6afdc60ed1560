"""CLI against a broker that is not there: one line on stderr, exit code 1, no traceback."""

from __future__ import annotations

import socket

import pytest

from tests.support.cli import run_cli_sync

pytestmark = pytest.mark.timeout(60)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port  # nothing listens once the socket is closed


@pytest.mark.parametrize(
    "argv",
    [
        ["cluster", "info"],
        ["topic", "list"],
        ["topic", "create", "t", "--partitions", "1"],
        ["consume", "t", "--max-messages", "1"],
        ["produce", "t"],
        ["elect-leaders", "--all-topic-partitions"],
    ],
    ids=" ".join,
)
def test_broker_down_is_one_line_naming_the_address_and_exit_code_1(argv: list[str]) -> None:
    address = f"127.0.0.1:{_closed_port()}"
    result = run_cli_sync(*argv, bootstrap=address, stdin="a line\n", timeout=45)
    err = result.stderr
    assert result.returncode == 1, err
    assert err.count("\n") == 1, err
    assert f"cannot reach any broker at {address}" in err
    assert err.startswith(f"minibroker {argv[0]}: error:")

"""CLI against a broker that is not there, or a port that is no broker's msgpack listener:
one line on stderr, exit code 1, no traceback."""

from __future__ import annotations

import socket
from concurrent.futures import ThreadPoolExecutor

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


def test_a_port_that_hangs_up_on_requests_is_named_as_maybe_not_a_msgpack_port() -> None:
    # What a Kafka-protocol listener does with minibroker's own client's first request.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        listener.settimeout(30)
        address = f"127.0.0.1:{listener.getsockname()[1]}"
        with ThreadPoolExecutor(1) as pool:
            hanging_up = pool.submit(_read_a_request_then_close, listener)
            result = run_cli_sync("topic", "list", bootstrap=address, timeout=45)
            hanging_up.result(timeout=30)

    err = result.stderr
    assert result.returncode == 1, err
    assert err == (
        f"minibroker topic: error: cannot reach any broker at {address} "
        f"(connection closed by {address}: is it a broker's msgpack port?)\n"
    )


def _read_a_request_then_close(listener: socket.socket) -> None:
    conn, _ = listener.accept()
    with conn:
        conn.settimeout(30)
        assert conn.recv(4096)  # the client's first request, never answered

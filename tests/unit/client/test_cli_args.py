"""CLI usage errors: one line on stderr, exit code 2, and no network needed to say so."""

from __future__ import annotations

import subprocess
import sys

import pytest

from minibroker.client.cli.topic import parse_assignment
from minibroker.command.main import main

USAGE_ERRORS = [
    ["topic", "create"],  # the topic is required
    ["topic", "frobnicate"],
    ["topic", "create", "t", "--partitions", "three"],
    ["topic", "create", "t", "--replica-assignment", "1:1"],
    ["topic", "create", "t", "--replica-assignment", "1:x"],
    ["topic", "create", "t", "--replica-assignment", "1:2", "--partitions", "3"],
    ["topic", "create", "t", "--config", "novalue"],
    ["topic", "alter-config", "t"],
    ["topic", "list", "--format", "yaml"],
    ["produce", "t", "--acks", "2"],
    ["produce", "t", "--key-separator", ""],
    ["produce", "t", "--header", "nokey"],
    ["consume", "t", "--offset", "5"],  # --offset needs exactly one --partition
    ["consume", "t", "--partition", "0", "--offset", "five"],
    ["consume", "t", "--from-beginning", "--offset", "0"],
    ["consume", "t", "--format", "plain"],
    ["consume", "t", "--max-messages", "0"],
    ["cluster", "info", "--bootstrap-server", "no-port-here"],
    ["cluster", "info", "--bootstrap-server", "127.0.0.1:99999"],
    ["elect-leaders"],
    ["elect-leaders", "--topic", "t", "--all-topic-partitions"],
    ["elect-leaders", "--partition", "1", "--all-topic-partitions"],
    ["dev", "up", "--brokers", "0"],
    ["dev"],
    ["no-such-command"],
]


@pytest.mark.parametrize("argv", USAGE_ERRORS, ids=" ".join)
def test_usage_error_is_one_line_and_exit_code_2(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors exit from inside parse_args
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    assert code == 2
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert "error:" in lines[0]
    assert "Traceback" not in captured.err


def test_replica_assignment_lists_partitions_by_comma_and_brokers_by_colon() -> None:
    assert parse_assignment("1:2,2:3,3:1") == {0: [1, 2], 1: [2, 3], 2: [3, 1]}
    assert parse_assignment("4") == {0: [4]}


def test_help_lists_every_client_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for command in ("dev", "topic", "cluster", "produce", "consume", "elect-leaders"):
        assert command in out


def test_a_command_loads_only_its_own_module() -> None:
    """A broker process never imports the analytics job (pyarrow is ~20 MB of RSS)."""
    program = (
        "import sys; from minibroker.command.main import build_parser;"
        " build_parser('broker').parse_args(['broker', '--broker-id', '1']);"
        " print(sorted(m for m in ('minibroker.analytics.cli', 'pyarrow') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]"

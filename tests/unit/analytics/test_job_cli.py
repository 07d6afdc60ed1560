"""The job's arguments, ``minibroker analyze``'s command line, and the printed summary
(no Spark started here)."""

from __future__ import annotations

import argparse
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from minibroker.analytics import cli
from minibroker.analytics.datasource import package_zip
from minibroker.analytics.jobargs import (
    DRIVER_JAVA_OPTIONS,
    OneLineParser,
    add_job_arguments,
    job_argv,
    options_from_args,
)
from minibroker.analytics.segment_report import main as job_main
from minibroker.analytics.summary import format_summary, show_key

pytestmark = pytest.mark.timeout(30)


def _args(*argv: str) -> argparse.Namespace:
    parser = OneLineParser(prog="t")
    add_job_arguments(parser)
    return parser.parse_args(list(argv))


def _analyze_args(*argv: str) -> argparse.Namespace:
    parser = OneLineParser(prog="minibroker analyze")
    cli.configure(parser)
    return parser.parse_args(list(argv))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--log-dirs", ",", "--out", "o"], "--log-dirs names no directory"),
        (["--log-dirs", "a", "--out", "o", "--from-timestamp", "-1"], "must be >= 0"),
        (
            ["--log-dirs", "a", "--out", "o", "--from-timestamp", "9", "--to-timestamp", "9"],
            "--from-timestamp must be before --to-timestamp",
        ),
        (["--log-dirs", "a", "--out", "o", "--top-keys", "0"], "--top-keys must be >= 1"),
    ],
)
def test_job_rejects_bad_arguments_with_one_line_and_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert job_main(argv) == 2

    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


def test_job_rejects_an_unparseable_number_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        job_main(["--log-dirs", "a", "--out", "o", "--to-timestamp", "soon"])

    assert exited.value.code == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_job_names_a_missing_log_dir_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = job_main(["--log-dirs", f"{tmp_path},{tmp_path}/gone", "--out", str(tmp_path / "o")])

    assert code == 1
    assert (
        capsys.readouterr().err
        == f"segment_report: error: log dir {tmp_path}/gone does not exist\n"
    )


def test_analyze_runs_pysparks_spark_submit_on_the_job_file_with_the_same_arguments() -> None:
    args = _args("--log-dirs", "a,b", "--out", "o", "--topics", "t1", "--from-timestamp", "5")

    command = cli.submit_command(args)

    assert Path(command[0]).name == "spark-submit" and Path(command[0]).is_file()
    assert command[1:3] == ["--master", "local[*]"]
    assert command[3].endswith("analytics/segment_report.py")
    assert command[4:] == [
        "--log-dirs", "a,b", "--out", "o", "--topics", "t1", "--from-timestamp", "5",
        "--top-keys", "10", "--html", str(Path("o") / "report.html"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("flags", "html"),
    [
        ([], "out/report.html"),
        (["--html", "elsewhere/page.html"], "elsewhere/page.html"),
        (["--no-html"], None),
    ],
)
def test_the_html_report_goes_beside_the_summary_unless_placed_or_turned_off(
    flags: list[str], html: str | None
) -> None:
    options = options_from_args(_args("--log-dirs", "a", "--out", "out", *flags))

    assert options.html == html
    again = options_from_args(_args(*job_argv(options)))
    assert again == options  # spark-submit's job gets the same choice


def test_read_committed_reaches_the_job_and_defaults_to_every_record(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert options_from_args(_args("--log-dirs", "a", "--out", "o")).isolation_level == (
        "read_uncommitted"
    )
    options = options_from_args(
        _args("--log-dirs", "a", "--out", "o", "--isolation-level", "read_committed")
    )
    assert "--isolation-level" in job_argv(options)
    assert options_from_args(_args(*job_argv(options))) == options
    with pytest.raises(SystemExit) as exited:
        job_main(["--log-dirs", "a", "--out", "o", "--isolation-level", "dirty"])
    assert exited.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_html_and_no_html_together_are_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        job_main(["--log-dirs", "a", "--out", "o", "--html", "r.html", "--no-html"])

    assert exited.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_html_naming_a_directory_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert job_main(["--log-dirs", str(tmp_path), "--out", "o", "--html", str(tmp_path)]) == 2

    assert "--html must name a file" in capsys.readouterr().err


def test_analyze_always_passes_the_jobs_jvm_options_and_unix_socket_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = _analyze_args("--log-dirs", str(tmp_path), "--out", str(tmp_path / "o"), "--verbose")
    seen: list[list[str]] = []

    def fake_run(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        seen.append(command)
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(cli.subprocess, "run", fake_run)

    assert cli.run(args) == 0
    (command,) = seen
    assert command[3:7] == [
        "--conf",
        f"spark.driver.extraJavaOptions={DRIVER_JAVA_OPTIONS}",
        "--conf",
        "spark.python.unix.domain.socket.enabled=true",
    ]


def test_executors_import_the_shipped_packages_compiled_from_the_zip(tmp_path: Path) -> None:
    archive = package_zip(tmp_path)
    with zipfile.ZipFile(archive) as z:
        names = set(z.namelist())
    sources = {n for n in names if n.endswith(".py") and n != "minibroker/__init__.py"}

    loaded = subprocess.run(
        [sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
         "import minibroker.analytics.layout as m; print(m.__file__)", str(archive)],
        cwd=tmp_path, capture_output=True, text=True, check=True, timeout=20,
    ).stdout.strip()  # fmt: skip

    assert sources and {n + "c" for n in sources} <= names
    assert loaded == f"{archive}/minibroker/analytics/layout.pyc"


def test_analyze_checks_arguments_before_starting_spark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad_range = _analyze_args("--log-dirs", str(tmp_path), "--out", "o", "--from-timestamp",
                              "3", "--to-timestamp", "2")  # fmt: skip
    missing = _analyze_args("--log-dirs", str(tmp_path / "gone"), "--out", "o")

    assert cli.run(bad_range) == 2
    assert cli.run(missing) == 1
    assert len(capsys.readouterr().err.splitlines()) == 2


def test_analyze_is_a_minibroker_subcommand() -> None:
    from minibroker.command.main import COMMANDS, load_command

    assert "analyze" in COMMANDS and load_command("analyze") is cli
    assert cli.HELP


def test_summary_reports_divergence_corruption_keys_and_transactions_readably() -> None:
    tables = {
        "partitions": [],
        "corruption": [
            {
                "segment": "/l/t-0/00000000000000000000.log",
                "position": 170,
                "length": 142,
                "batch_base_offset": 5,
                "reason": "batch at 170 has CRC 0x1, computed 0x2",
            }
        ],
        "divergence": [
            {
                "topic": "t",
                "partition": 0,
                "replicas": ["/a", "/b"],
                "agree": False,
                "first_diverging_offset": 9,
                "diverging_offsets": 3,
                "compared_offsets": 12,
                "common_start": 0,
                "smallest_end": 12,
            }
        ],
        "top_keys": [{"topic": "t", "rank": 1, "key": b"\xff\x00", "records": 2}],
        "transactions": [
            {
                "topic": "t",
                "partition": 1,
                "transactional_producers": 2,
                "committed": 1204,
                "aborted": 3,
                "open_transactions": 1,
            }
        ],
    }

    text = format_summary(tables, ["/a", "/b"])

    assert "@ byte 170: 142 B unreadable (batch at offset 5): batch at 170 has CRC" in text
    assert "t-0: replicas DIVERGE from offset 9 (3 of 12 offsets" in text
    assert "t: 0xff00 x2" in text
    assert "t-1: 1,204 committed, 3 aborted, 1 open (2 transactional producer(s))" in text
    assert "Transactions: none" in format_summary({"partitions": []}, ["/a"])
    assert show_key(b"user-1") == "'user-1'" and show_key(None) == "null"
    named = format_summary(tables, ["/a", "/b"], html="/o/report.html")
    assert named.splitlines()[-1] == "HTML report: /o/report.html"
    assert "HTML report" not in text  # --no-html: no page to name

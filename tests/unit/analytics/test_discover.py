"""Which log dirs ``minibroker analyze`` reads, and what it tells the user (no Spark)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from minibroker.analytics import cli
from minibroker.analytics.discover import log_dirs_of_config, log_dirs_under
from minibroker.analytics.summary import SegmentFileRead, format_summary

pytestmark = pytest.mark.timeout(30)

SEGMENT = "00000000000000000000.log"


def _dev_data_dir(root: Path) -> Path:
    """The layout `dev up` leaves: two log dirs per broker, partitions in both, plus
    ZooKeeper's and the children's output dirs, which are not log dirs."""
    for broker in (1, 2):
        for index, topic in ((0, "events-0"), (1, "events-1")):
            partition = root / f"broker-{broker}" / f"logs-{index}" / topic
            partition.mkdir(parents=True)
            (partition / SEGMENT).write_bytes(b"x" * 10)
    (root / "broker-3" / "logs-0").mkdir(parents=True)  # a broker with no partitions yet
    (root / "broker-3" / "logs-0" / "recovery-point-offset-checkpoint").write_text("0\n0\n")
    (root / "zookeeper" / "version-2").mkdir(parents=True)
    (root / "logs").mkdir()
    (root / "logs" / "broker-1.log").write_text("started\n")
    return root


def _analyze_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.configure(parser)
    return parser.parse_args(list(argv))


def test_every_log_dir_of_every_broker_is_found_under_a_dev_data_dir(tmp_path: Path) -> None:
    root = _dev_data_dir(tmp_path)

    found = log_dirs_under(root)

    assert found == [
        root / "broker-1" / "logs-0",
        root / "broker-1" / "logs-1",
        root / "broker-2" / "logs-0",
        root / "broker-2" / "logs-1",
        root / "broker-3" / "logs-0",
    ]


def test_log_dirs_come_from_a_broker_config_file(tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_text(f"broker.id=1\nlog.dirs={tmp_path}/a,{tmp_path}/b\n")

    assert log_dirs_of_config(config) == [tmp_path / "a", tmp_path / "b"]


def test_analyze_reads_data_dirs_configs_and_named_dirs_once_each(tmp_path: Path) -> None:
    root = _dev_data_dir(tmp_path / "dev")
    config = tmp_path / "server.properties"
    config.write_text(f"log.dirs={root}/broker-1/logs-0,{tmp_path}/other\n")

    args = _analyze_args("--data-dir", str(root), "--config", str(config),
                         "--log-dirs", f"{tmp_path}/other")  # fmt: skip

    assert cli.resolve_log_dirs(args) == [
        *(str(root / f"broker-{b}" / f"logs-{i}") for b in (1, 2) for i in (0, 1)),
        str(root / "broker-3" / "logs-0"),
        f"{tmp_path}/other",
    ]


def test_analyze_without_arguments_reads_the_dev_data_dir_of_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _dev_data_dir(tmp_path / ".minibroker")
    monkeypatch.chdir(tmp_path)

    found = cli.resolve_log_dirs(_analyze_args())

    assert len(found) == 5 and all(d.startswith(".minibroker/broker-") for d in found)


def test_analyze_says_when_a_data_dir_holds_no_log_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "empty").mkdir()

    code = cli.run(_analyze_args("--data-dir", str(tmp_path / "empty")))

    assert code == 1
    assert capsys.readouterr().err == (
        f"minibroker analyze: error: no log dirs found under {tmp_path / 'empty'}\n"
    )


def test_default_report_dir_is_outside_the_repository(monkeypatch: pytest.MonkeyPatch) -> None:
    repo = Path(__file__).resolve().parents[3]
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)

    out = cli.default_out_dir()

    assert repo not in out.parents and out.name.startswith("segment-report-")


def test_spark_console_progress_is_off_unless_verbose(tmp_path: Path) -> None:
    args = _analyze_args("--log-dirs", str(tmp_path), "--out", str(tmp_path / "o"))

    quiet = cli.submit_command(args, cli.QUIET_SPARK_CONF)

    assert quiet[3:5] == ["--conf", "spark.ui.showConsoleProgress=false"]


def test_summary_lists_every_log_dir_read_and_its_segment_files() -> None:
    read = {
        "/d/broker-1/logs-0": [SegmentFileRead(f"/d/broker-1/logs-0/events-0/{SEGMENT}", 2048)],
        "/d/broker-1/logs-1": [],
    }

    text = format_summary({"partitions": []}, list(read), read)

    assert "  /d/broker-1/logs-0: 1 segment file(s) of 1 partition(s), 2.0 KiB" in text
    assert "  /d/broker-1/logs-1: no segment files" in text
    assert f"  events-0/{SEGMENT} (2.0 KiB) in /d/broker-1/logs-0" in text


def test_a_failed_job_is_reported_by_its_own_error_line_not_sparks_log(tmp_path: Path) -> None:
    log = tmp_path / "spark.log"
    log.write_text(
        "WARN NativeCodeLoader: Unable to load native-hadoop library\n"
        "segment_report: error: Permission denied\n"
        "INFO ShutdownHookManager: Shutdown hook called\n"
    )

    assert cli._job_error(log) == "Permission denied"

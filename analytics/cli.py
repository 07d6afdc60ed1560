"""``minibroker analyze``: run the segment report job with spark-submit.

What it reads: every log dir under ``--data-dir`` (a ``dev up`` cluster's data dir, the
default being ``.minibroker``), the ``log.dirs`` of each broker ``--config`` file, and
any ``--log-dirs`` named outright (``analytics.discover``). It prints the dirs it found
before Spark starts, and the report lists every dir and segment file it read, so a
partition left out shows.

How it runs: pyspark's own ``bin/spark-submit`` (the installed pyspark bundles Spark)
on ``analytics/segment_report.py``, with PYSPARK_PYTHON / PYSPARK_DRIVER_PYTHON set to
this interpreter. The job's progress lines and summary come to the terminal; Spark's own
log lines (stderr) go to ``<out>/spark.log`` unless ``--verbose``, and on failure the
job's error line is shown with that path. Arguments are validated here first (same
rules as the job: ``analytics.jobargs``), so a typo costs no JVM start.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

from minibroker.analytics.discover import log_dirs_of_config, log_dirs_under
from minibroker.analytics.jobargs import (
    EXIT_ERROR,
    EXIT_USAGE,
    JOB_CONF,
    add_filter_arguments,
    first_missing_dir,
    job_argv,
    options_from_args,
)
from minibroker.protocol.errors import MinibrokerError, UsageError

HELP = "analyse segment files offline with Spark: every log dir of a dev cluster or broker"
DEFAULT_MASTER = "local[*]"
DEFAULT_DATA_DIR = ".minibroker"  # where `minibroker dev up` keeps its data by default
JOB_FILE = Path(__file__).resolve().parent / "segment_report.py"
SPARK_LOG = "spark.log"
JOB_ERROR_PREFIX = "segment_report: error:"
QUIET_SPARK_CONF = ("spark.ui.showConsoleProgress=false",)
"""Spark's console progress bar redraws one stderr line; the job prints its own progress."""
JOB_SPARK_CONF = tuple(f"{key}={value}" for key, value in JOB_CONF.items())
"""Always passed: the settings the job runs best with (``jobargs.JOB_CONF``)."""
LOOPBACK = "127.0.0.1"
"""Where a local analysis listens: Spark's driver would otherwise bind every interface
and advertise whatever address the host name resolves to (or the first interface's)."""
LOCAL_SPARK_CONF = (f"spark.driver.host={LOOPBACK}", f"spark.driver.bindAddress={LOOPBACK}")
NO_SPARK_UI_CONF = ("spark.ui.enabled=false",)
"""Spark's web UI (port 4040 up) only with ``--spark-ui``: nobody watches it by default."""


def spark_submit_path() -> Path:
    """pyspark's bundled ``bin/spark-submit``."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise MinibrokerError("pyspark is not installed: pip install pyspark")
    path = Path(spec.origin).parent / "bin" / "spark-submit"
    if not path.is_file():
        raise MinibrokerError(f"spark-submit not found at {path}")
    return path


def submit_command(args: argparse.Namespace, spark_conf: tuple[str, ...] = ()) -> list[str]:
    """The full spark-submit command line for validated ``args``."""
    options = options_from_args(args)
    master = options.master or DEFAULT_MASTER
    conf = [part for item in spark_conf for part in ("--conf", item)]
    return [str(spark_submit_path()), "--master", master, *conf, str(JOB_FILE),
            *job_argv(options)]  # fmt: skip


def default_out_dir(now: float | None = None) -> Path:
    """A fresh directory under the user's cache dir: never inside the repository."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    return cache / "minibroker" / "reports" / f"segment-report-{stamp}"


def configure(parser: argparse.ArgumentParser) -> None:
    where = parser.add_argument_group(
        "what to read (any mix; default: --data-dir .minibroker, the data dir of `dev up`)"
    )
    where.add_argument(
        "--data-dir",
        action="append",
        default=[],
        metavar="DIR",
        help="every log dir found under DIR (a dev cluster's data dir: all its brokers)",
    )
    where.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="FILE",
        help="the log.dirs of a broker's .properties file (repeat for more brokers)",
    )
    where.add_argument("--log-dirs", metavar="A,B", help="comma-separated log dirs")
    parser.add_argument(
        "--out",
        metavar="DIR",
        help="directory for the Parquet reports and summary.txt "
        "(default: a new directory under ~/.cache/minibroker/reports)",
    )
    parser.add_argument(
        "--verbose", action="store_true", help="show Spark's own log lines in the terminal"
    )
    parser.add_argument(
        "--spark-ui",
        action="store_true",
        help="start Spark's web UI (http://127.0.0.1:4040, or the next free port) for the job",
    )
    add_filter_arguments(parser)


def is_local(master: str) -> bool:
    return master == "local" or master.startswith("local[")


def spark_placement(master: str, spark_ui: bool) -> tuple[tuple[str, ...], dict[str, str]]:
    """Spark settings and environment that keep a local job on loopback and its UI off
    unless asked; a cluster master's own settings are left alone (its workers must
    reach the driver), apart from the UI."""
    conf = () if spark_ui else NO_SPARK_UI_CONF
    if not is_local(master):
        return conf, {}
    # SPARK_LOCAL_IP is what Spark's UI binds to and what spares the host name lookup.
    return LOCAL_SPARK_CONF + conf, {"SPARK_LOCAL_IP": LOOPBACK}


def resolve_log_dirs(args: argparse.Namespace) -> list[str]:
    """Every log dir the arguments name, in order, each once. Raises UsageError when a
    --data-dir holds none or nothing at all was found; MinibrokerError for a bad config."""
    data_dirs = list(args.data_dir)
    if not data_dirs and not args.config and not args.log_dirs:
        if not Path(DEFAULT_DATA_DIR).is_dir():
            raise UsageError(
                f"nothing to read: no {DEFAULT_DATA_DIR}/ here; "
                "pass --data-dir DIR, --config FILE or --log-dirs A,B"
            )
        data_dirs = [DEFAULT_DATA_DIR]
    found: list[str] = []
    for data_dir in data_dirs:
        if not Path(data_dir).is_dir():
            raise MinibrokerError(f"data dir {data_dir} does not exist")
        under = log_dirs_under(Path(data_dir))
        if not under:
            raise MinibrokerError(f"no log dirs found under {data_dir}")
        found += [str(d) for d in under]
    for config in args.config:
        found += [str(d) for d in log_dirs_of_config(Path(config))]
    if args.log_dirs:
        found += [d.strip() for d in args.log_dirs.split(",") if d.strip()]
    return list(dict.fromkeys(found))


def _job_error(log: Path) -> str:
    """The job's own error line from Spark's log, else its last line."""
    try:
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "spark-submit failed"
    errors = [line for line in lines if line.startswith(JOB_ERROR_PREFIX)]
    picked = errors[-1] if errors else (lines[-1] if lines else "spark-submit failed")
    return picked.removeprefix(JOB_ERROR_PREFIX).strip()


def run(args: argparse.Namespace) -> int:
    try:
        log_dirs = resolve_log_dirs(args)
        args.log_dirs = ",".join(log_dirs)
        out = Path(args.out) if args.out else default_out_dir()
        args.out = str(out)
        quiet = () if args.verbose else QUIET_SPARK_CONF
        placement, spark_env = spark_placement(args.master or DEFAULT_MASTER, args.spark_ui)
        command = submit_command(args, JOB_SPARK_CONF + placement + quiet)
    except UsageError as exc:
        print(f"minibroker analyze: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except MinibrokerError as exc:
        print(f"minibroker analyze: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    missing = first_missing_dir(log_dirs)
    if missing is not None:
        print(f"minibroker analyze: error: log dir {missing} does not exist", file=sys.stderr)
        return EXIT_ERROR
    print(f"reading {len(log_dirs)} log dir(s): {', '.join(log_dirs)}", flush=True)
    print(f"writing the report to {out}", flush=True)
    if args.spark_ui and spark_env:
        print("Spark's UI: http://127.0.0.1:4040 (or the next free port) while the job runs")
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    env.update(spark_env)
    if args.verbose:
        return subprocess.run(command, env=env, check=False).returncode
    out.mkdir(parents=True, exist_ok=True)
    log = out / SPARK_LOG
    with log.open("wb") as stderr:
        code = subprocess.run(command, env=env, stderr=stderr, check=False).returncode
    if code != 0:
        print(f"minibroker analyze: error: {_job_error(log)} (Spark's log: {log})", file=sys.stderr)
    return code

"""``minibroker analyze``: run the segment report job with spark-submit.

Finds ``analytics/segment_report.py`` next to this module and pyspark's own
``bin/spark-submit`` (the installed pyspark bundles Spark), and runs it with
PYSPARK_PYTHON / PYSPARK_DRIVER_PYTHON set to this interpreter, so the driver and the
executors use the Python that has the project's dependencies. Arguments are validated
here first (same rules as the job: ``analytics.jobargs``), so a typo costs no JVM start.
``--master`` goes to spark-submit (default ``local[*]``).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from minibroker.analytics.jobargs import (
    EXIT_ERROR,
    EXIT_USAGE,
    UsageError,
    add_job_arguments,
    first_missing_dir,
    job_argv,
    options_from_args,
)
from minibroker.protocol.errors import MinibrokerError

HELP = "Analyse segment files offline with Spark (spark-submit analytics/segment_report.py)."
DEFAULT_MASTER = "local[*]"
JOB_FILE = Path(__file__).resolve().parent / "segment_report.py"


def spark_submit_path() -> Path:
    """pyspark's bundled ``bin/spark-submit``."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise MinibrokerError("pyspark is not installed: pip install pyspark")
    path = Path(spec.origin).parent / "bin" / "spark-submit"
    if not path.is_file():
        raise MinibrokerError(f"spark-submit not found at {path}")
    return path


def submit_command(args: argparse.Namespace) -> list[str]:
    """The full spark-submit command line for validated ``args``."""
    options = options_from_args(args)
    master = options.master or DEFAULT_MASTER
    return [str(spark_submit_path()), "--master", master, str(JOB_FILE), *job_argv(options)]


def configure(parser: argparse.ArgumentParser) -> None:
    add_job_arguments(parser)


def run(args: argparse.Namespace) -> int:
    try:
        command = submit_command(args)
    except UsageError as exc:
        print(f"minibroker analyze: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    missing = first_missing_dir(options_from_args(args).log_dirs)
    if missing is not None:
        print(f"minibroker analyze: error: log dir {missing} does not exist", file=sys.stderr)
        return EXIT_ERROR
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    return subprocess.run(command, env=env, check=False).returncode

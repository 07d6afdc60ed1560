"""Arguments of the segment report job, shared by ``segment_report.py`` (the job run by
spark-submit) and ``minibroker analyze`` (which runs spark-submit), so both accept
exactly the same flags and reject bad ones the same way.

No Spark here: ``minibroker analyze`` validates before paying for a JVM start.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from minibroker.analytics.html_report import REPORT_FILE
from minibroker.analytics.isolation import ISOLATION_LEVELS, READ_UNCOMMITTED
from minibroker.analytics.report import DEFAULT_TOP_KEYS
from minibroker.protocol.errors import UsageError

EXIT_ERROR = 1
EXIT_USAGE = 2
DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
"""The driver JVM (local mode: the executors too) compiles with C1 only. The JVM's part
of the job is small (the Python workers decode and aggregate; it reads a few rows per
slice), yet C2 spent 0.4-1.1 s of a core recompiling it on each 1 GiB scan, taken from
the Python workers on a 2-core machine; with C1 the JVM spends ~0.3 s."""
JOB_CONF = {
    "spark.driver.extraJavaOptions": DRIVER_JAVA_OPTIONS,
    # Python workers talk to their executor over a Unix socket, not loopback TCP: over
    # TCP, Nagle's algorithm on Spark's side held each task's input (written right after
    # its command) until the worker's delayed ACK, ~40 ms into every Python task, of a
    # scan whose whole fixed cost is ~0.15 s.
    "spark.python.unix.domain.socket.enabled": "true",
}
"""The Spark settings the job runs best with: ``minibroker analyze`` passes them to
spark-submit (someone running spark-submit themselves picks their own)."""


class OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one line on stderr and exit code 2, no usage banner."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(EXIT_USAGE)


@dataclass(frozen=True, slots=True)
class JobOptions:
    log_dirs: list[str]
    out: str
    topics: list[str] | None
    from_timestamp: int | None
    to_timestamp: int | None
    top_keys: int
    master: str | None
    html: str | None = None  # where to write report.html; None: no HTML report
    isolation_level: str = READ_UNCOMMITTED  # read_committed: no aborted transactions' data


def add_job_arguments(parser: argparse.ArgumentParser) -> None:
    """The job's flags: where to read and write (both required), then the filters."""
    parser.add_argument(
        "--log-dirs", required=True, help="comma-separated log dirs (one or many brokers')"
    )
    parser.add_argument("--out", required=True, help="directory for the Parquet reports")
    add_filter_arguments(parser)


def add_filter_arguments(parser: argparse.ArgumentParser) -> None:
    """What to analyse and how, and whether to draw it (``--html``, ``--no-html``):
    shared by the job and ``minibroker analyze``."""
    parser.add_argument("--topics", help="comma-separated topics to analyse (default: all)")
    parser.add_argument(
        "--from-timestamp", type=int, metavar="MS", help="only records at or after MS"
    )
    parser.add_argument("--to-timestamp", type=int, metavar="MS", help="only records before MS")
    parser.add_argument(
        "--top-keys", type=int, default=DEFAULT_TOP_KEYS, metavar="N", help="keys per topic"
    )
    parser.add_argument(
        "--isolation-level",
        choices=ISOLATION_LEVELS,
        default=READ_UNCOMMITTED,
        help="read_committed leaves out the records of aborted transactions, as a"
        " read_committed consumer would (default: read_uncommitted, every record)",
    )
    parser.add_argument("--master", help="Spark master URL (e.g. local[*], spark://host:7077)")
    html = parser.add_mutually_exclusive_group()
    html.add_argument(
        "--html",
        metavar="PATH",
        help=f"where to write the HTML report (default: {REPORT_FILE} in the output directory)",
    )
    html.add_argument("--no-html", action="store_true", help="write no HTML report")


def _split(text: str | None) -> list[str]:
    return [part.strip() for part in (text or "").split(",") if part.strip()]


def options_from_args(args: argparse.Namespace) -> JobOptions:
    """Validated options; raises UsageError naming the bad argument."""
    log_dirs = _split(args.log_dirs)
    if not log_dirs:
        raise UsageError("--log-dirs names no directory")
    if not str(args.out).strip():
        raise UsageError("--out is empty")
    topics = _split(args.topics) or None
    for name in ("from_timestamp", "to_timestamp"):
        value = getattr(args, name)
        if value is not None and value < 0:
            raise UsageError(f"--{name.replace('_', '-')} must be >= 0, got {value}")
    if (
        args.from_timestamp is not None
        and args.to_timestamp is not None
        and args.from_timestamp >= args.to_timestamp
    ):
        raise UsageError("--from-timestamp must be before --to-timestamp")
    if args.top_keys < 1:
        raise UsageError(f"--top-keys must be >= 1, got {args.top_keys}")
    html = getattr(args, "html", None)
    if html is not None and (not html.strip() or Path(html).is_dir()):
        raise UsageError(f"--html must name a file, got {html!r}")
    if html is None and not getattr(args, "no_html", False):
        html = str(Path(args.out) / REPORT_FILE)
    return JobOptions(
        log_dirs=log_dirs,
        out=str(args.out),
        topics=topics,
        from_timestamp=args.from_timestamp,
        to_timestamp=args.to_timestamp,
        top_keys=args.top_keys,
        master=args.master,
        html=html,
        isolation_level=args.isolation_level,
    )


def first_missing_dir(log_dirs: list[str]) -> str | None:
    """The first of ``log_dirs`` that is not a directory, if any."""
    return next((d for d in log_dirs if not Path(d).is_dir()), None)


def job_argv(options: JobOptions, *, with_master: bool = False) -> list[str]:
    """The job's own command-line arguments for ``options`` (inverse of parsing)."""
    argv = ["--log-dirs", ",".join(options.log_dirs), "--out", options.out]
    if options.topics:
        argv += ["--topics", ",".join(options.topics)]
    if options.from_timestamp is not None:
        argv += ["--from-timestamp", str(options.from_timestamp)]
    if options.to_timestamp is not None:
        argv += ["--to-timestamp", str(options.to_timestamp)]
    argv += ["--top-keys", str(options.top_keys)]
    if options.isolation_level != READ_UNCOMMITTED:
        argv += ["--isolation-level", options.isolation_level]
    argv += ["--no-html"] if options.html is None else ["--html", options.html]
    if with_master and options.master:
        argv += ["--master", options.master]
    return argv

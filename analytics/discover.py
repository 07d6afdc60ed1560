"""Which log dirs ``minibroker analyze`` reads: every one under a data dir, or the
``log.dirs`` of broker config files, or the ones named on the command line.

A dev cluster's data dir holds ``broker-<id>/logs-0``, ``broker-<id>/logs-1``, ... and
other things (``zookeeper/``, ``logs/``); a container or a hand-made layout may nest them
differently. So a directory counts as a log dir by what is in it, not by its name: a
file a broker writes into each of its log dirs (the lock, a checkpoint, the clean
shutdown marker), or a partition directory holding a segment file. The walk stops at a
log dir (partition dirs are not log dirs) and goes at most ``MAX_DEPTH`` levels down.

Nothing here imports Spark: ``minibroker analyze`` resolves and checks the dirs before
it pays for a JVM start.
"""

from __future__ import annotations

import os
from pathlib import Path

from minibroker.analytics.layout import parse_partition_dir
from minibroker.broker.config.broker_config import BrokerConfig

MAX_DEPTH = 4
"""<data dir>/broker-1/logs-0 is depth 2; a few more levels allow other layouts while
keeping a walk from a wrong directory (say, a home directory) short."""

LOG_DIR_MARKERS = frozenset(
    {
        ".lock",
        ".kafka_cleanshutdown",
        "recovery-point-offset-checkpoint",
        "replication-offset-checkpoint",
        "log-start-offset-checkpoint",
    }
)
"""Files a broker keeps at the top of every log dir it owns."""


def _holds_segments(path: str) -> bool:
    try:
        with os.scandir(path) as entries:
            return any(e.name.endswith(".log") and e.is_file() for e in entries)
    except OSError:
        return False


def is_log_dir(path: Path) -> bool:
    """True when ``path`` looks like a broker's log dir (see the module docstring)."""
    try:
        with os.scandir(path) as it:
            entries = list(it)
    except OSError:
        return False
    if any(e.name in LOG_DIR_MARKERS for e in entries):
        return True
    return any(
        e.is_dir(follow_symlinks=False)
        and parse_partition_dir(e.name) is not None
        and _holds_segments(e.path)
        for e in entries
    )


def log_dirs_under(data_dir: Path, max_depth: int = MAX_DEPTH) -> list[Path]:
    """Every log dir at or below ``data_dir``, sorted by path."""
    found: list[Path] = []
    pending = [(data_dir, 0)]
    while pending:
        path, depth = pending.pop()
        if is_log_dir(path):
            found.append(path)
            continue
        if depth >= max_depth:
            continue
        try:
            with os.scandir(path) as it:
                children = [Path(e.path) for e in it if e.is_dir(follow_symlinks=False)]
        except OSError:
            continue
        pending.extend((child, depth + 1) for child in children)
    return sorted(found)


def log_dirs_of_config(path: Path) -> list[Path]:
    """``log.dirs`` of a broker's ``.properties`` file (relative paths as the broker
    would see them: from the current directory). Raises ConfigError when unreadable."""
    return [Path(d) for d in BrokerConfig.from_properties(path).log_dirs]

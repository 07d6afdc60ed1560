"""All partition logs of one broker, spread over its ``log.dirs``.

Each log dir holds partition dirs and, at its root, the per-dir files::

    .lock                               flock-ed while a broker uses the dir
    .kafka_cleanshutdown                present only after a clean close
    recovery-point-offset-checkpoint    topic partition recoveryPoint
    log-start-offset-checkpoint         topic partition logStartOffset
    replication-offset-checkpoint       topic partition highWatermark (the broker's)
    cleaner-offset-checkpoint           topic partition firstDirtyOffset (storage/cleaner)

Start-up: every ``<topic>-<partition>`` dir is loaded as a Log; if the dir had no
``.kafka_cleanshutdown`` each log revalidates everything after its checkpointed
recovery point (a missing or corrupt checkpoint means "from 0": slower, never wrong).
Each dir logs how far its load got (storage/log_load_progress.py).
``...-future`` dirs are loaded as future logs (a replica being moved here by a log-dir
move); ``...-delete`` dirs are queued for removal. The clean-shutdown marker is removed
once loading is done, so a crash from then on is seen as unclean.

Placement: a new partition goes to the preferred dir when one is given (as an argument,
or remembered by ``set_preferred_log_dir`` from an AlterReplicaLogDirs that came before
the replica existed), else to the online dir holding the fewest partitions (first listed
wins a tie).

Creation: ``get_or_create_logs`` creates a batch (one LeaderAndIsr's new partitions)
and fsyncs each log dir it created partition dirs in ONCE, after creating all of them
and before returning any: when it returns, every new partition dir survives a crash,
as when each creation fsynced its log dir itself (one fsync per log, which dominated
creating many logs on a busy disk). A log is registered only once its dir is durable.

Offline dirs: ``mark_log_dir_offline`` (the broker calls it when I/O in a dir fails)
forgets every log of that dir without touching its files; no new log is placed there
and its checkpoints are no longer written. It stays offline until the broker restarts.

Future logs are exempt from retention (Kafka pauses cleaning while a replica moves):
the copy follows the current log, whose retention still runs.

Deletion is a rename to ``<topic>-<partition>.<uuid>-delete`` (atomic, instantly out of
sight) then ``remove_deleted_logs()``, which the broker runs in a worker thread.

Everything here is synchronous and blocking; the broker wraps calls that fsync, rename
or delete in ``trio.to_thread``. Not thread-safe: one caller at a time.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from minibroker.protocol.errors import KafkaError, LogDirNotFoundError, MinibrokerError
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.storage.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    OffsetCheckpointFile,
    fsync_dir,
    write_atomically,
)
from minibroker.storage.corruption import CorruptionStats
from minibroker.storage.errors import CorruptCheckpointError, LogDirError
from minibroker.storage.log import FlushStats, Log
from minibroker.storage.log_config import Clock, LogConfig, system_clock
from minibroker.storage.log_load_progress import LOAD_PROGRESS_INTERVAL_S, LogLoadProgress
from minibroker.storage.names import (
    DELETE_DIR_SUFFIX,
    FUTURE_DIR_SUFFIX,
    parse_partition_dir,
    partition_dir_name,
)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"

logger = logging.getLogger(__name__)


class LogManager:
    def __init__(
        self,
        log_dirs: Sequence[str | Path],
        default_config: LogConfig,
        *,
        topic_config: Callable[[str], LogConfig] | None = None,
        clock: Clock = system_clock,
        load_progress_interval_s: float = LOAD_PROGRESS_INTERVAL_S,
    ) -> None:
        """``load_progress_interval_s``: at most how often start-up logs its progress."""
        if not log_dirs:
            raise LogDirError("log.dirs is empty")
        self.log_dirs = [Path(d).absolute() for d in log_dirs]
        if len(set(self.log_dirs)) != len(self.log_dirs):
            raise LogDirError(f"log.dirs lists a directory twice: {log_dirs}")
        self.default_config = default_config
        self._topic_config = topic_config or (lambda _topic: default_config)
        self.clock = clock
        self.flush_stats = FlushStats()
        self.corruption_stats = CorruptionStats()  # recovery, reads, scrubber, repairs
        self._logs: dict[TopicPartition, Log] = {}
        self._future_logs: dict[TopicPartition, Log] = {}
        self._pending_dir_deletes: list[Path] = []
        self._lock_fds: list[int] = []
        self.preferred_log_dirs: dict[TopicPartition, Path] = {}
        self.offline_log_dirs: set[Path] = set()
        self._load_progress_interval_s = load_progress_interval_s
        try:
            for log_dir in self.log_dirs:
                self._lock(log_dir)
            for log_dir in self.log_dirs:
                self._load_dir(log_dir)
        except BaseException:
            self._unlock()
            raise

    # --- start-up --------------------------------------------------------------------

    def _lock(self, log_dir: Path) -> None:
        try:
            log_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(log_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise LogDirError(f"cannot use log dir {log_dir}: {exc.strerror}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            raise LogDirError(f"log dir {log_dir} is in use by another process") from exc
        self._lock_fds.append(fd)

    def _unlock(self) -> None:
        for fd in self._lock_fds:
            os.close(fd)  # closing drops the flock
        self._lock_fds = []

    def _read_offsets(self, path: Path) -> dict[TopicPartition, int]:
        try:
            return OffsetCheckpointFile(path).read()
        except CorruptCheckpointError as exc:
            logger.warning("%s; recovering the logs of this dir from offset 0", exc)
            return {}

    def _load_dir(self, log_dir: Path) -> None:
        clean_marker = log_dir / CLEAN_SHUTDOWN_FILE
        clean = clean_marker.exists()
        recovery_points = self._read_offsets(log_dir / RECOVERY_POINT_CHECKPOINT)
        log_starts = self._read_offsets(log_dir / LOG_START_OFFSET_CHECKPOINT)
        to_load: list[tuple[Path, TopicPartition, str]] = []
        for path in sorted(log_dir.iterdir()):
            parsed = parse_partition_dir(path.name)
            if parsed is None or not path.is_dir():
                continue
            tp, suffix = parsed
            if suffix == DELETE_DIR_SUFFIX:
                self._pending_dir_deletes.append(path)
            else:
                to_load.append((path, tp, suffix))
        progress = LogLoadProgress(
            log_dir, len(to_load), clean=clean, interval_s=self._load_progress_interval_s
        )
        for path, tp, suffix in to_load:
            logs = self._future_logs if suffix == FUTURE_DIR_SUFFIX else self._logs
            if tp in logs:
                raise LogDirError(f"{tp} found twice: in {logs[tp].dir} and {path}")
            loaded = logs[tp] = Log(
                path,
                self._topic_config(tp.topic),
                log_start_offset=log_starts.get(tp, 0),
                recovery_point=recovery_points.get(tp, 0),
                had_clean_shutdown=clean,
                clock=self.clock,
                flush_stats=self.flush_stats,
                corruption_stats=self.corruption_stats,
            )
            progress.log_loaded(recovered=bool(loaded.recovered_segments))
        progress.finish()
        clean_marker.unlink(missing_ok=True)

    # --- lookup and creation ---------------------------------------------------------

    def get_log(self, tp: TopicPartition, *, is_future: bool = False) -> Log | None:
        return (self._future_logs if is_future else self._logs).get(tp)

    @property
    def logs(self) -> dict[TopicPartition, Log]:
        return dict(self._logs)

    @property
    def future_logs(self) -> dict[TopicPartition, Log]:
        return dict(self._future_logs)

    def _all_logs(self) -> Iterable[Log]:
        yield from self._logs.values()
        yield from self._future_logs.values()

    def _partition_counts(self) -> Counter[Path]:
        return Counter(log.dir.parent for log in self._all_logs())

    def _choose_dir(
        self, preferred_dir: str | Path | None, counts: Counter[Path] | None = None
    ) -> Path:
        """``counts``: partitions per dir, when the caller places many (counting on
        every placement made creating N logs quadratic in N)."""
        if preferred_dir is not None:
            wanted = Path(preferred_dir).absolute()
            if wanted not in self.log_dirs:
                raise LogDirNotFoundError(f"{preferred_dir} is not one of log.dirs")
            if wanted in self.offline_log_dirs:
                raise LogDirError(f"log dir {wanted} is offline")
            return wanted
        online = [d for d in self.log_dirs if d not in self.offline_log_dirs]
        if not online:
            raise LogDirError("every log dir is offline")
        if counts is None:
            counts = self._partition_counts()
        return min(online, key=lambda d: counts[d])  # min keeps the first of ties

    def log_dir_for_path(self, path: str) -> Path:
        """The configured log dir named by ``path`` (absolute, as AlterReplicaLogDirs
        sends it); LogDirNotFoundError for a relative path or one not in log.dirs."""
        candidate = Path(path)
        if not candidate.is_absolute() or candidate not in self.log_dirs:
            raise LogDirNotFoundError(f"{path} is not one of log.dirs")
        return candidate

    def is_log_dir_online(self, log_dir: Path) -> bool:
        return log_dir in self.log_dirs and log_dir not in self.offline_log_dirs

    def set_preferred_log_dir(self, tp: TopicPartition, log_dir: Path) -> None:
        """Create ``tp``'s log in ``log_dir`` when it is first created here."""
        self.preferred_log_dirs[tp] = log_dir

    def mark_log_dir_offline(self, log_dir: Path) -> list[TopicPartition]:
        """Stop using ``log_dir`` after an I/O failure: its logs (current and future)
        are dropped from the manager without flushing; returns the current ones."""
        self.offline_log_dirs.add(log_dir)
        lost: list[TopicPartition] = []
        for logs, is_current in ((self._logs, True), (self._future_logs, False)):
            for tp, log in list(logs.items()):
                if log.dir.parent != log_dir:
                    continue
                del logs[tp]
                if is_current:
                    lost.append(tp)
                try:
                    log.abandon()
                except (OSError, ValueError) as exc:  # the disk is failing: closing may too
                    logger.warning("closing %s in offline dir: %s", log.dir, exc)
        return lost

    def get_or_create_log(
        self,
        tp: TopicPartition,
        *,
        is_future: bool = False,
        preferred_dir: str | Path | None = None,
        config: LogConfig | None = None,
    ) -> Log:
        existing = self.get_log(tp, is_future=is_future)
        if existing is not None:
            return existing
        log = self._new_log(tp, is_future, preferred_dir, config, None)
        try:
            fsync_dir(log.dir.parent)
        except BaseException:
            log.abandon()
            raise
        (self._future_logs if is_future else self._logs)[tp] = log
        return log

    def get_or_create_logs(
        self, configs: Mapping[TopicPartition, LogConfig | None]
    ) -> tuple[dict[TopicPartition, Log], dict[TopicPartition, Exception]]:
        """``get_or_create_log`` for many current logs at once (None: the topic's
        config): the logs, and for each one that could not be created (OSError,
        LogDirError, LogDirNotFoundError) why. Each log dir that got new partition dirs
        is fsynced once, after all of them were made."""
        logs: dict[TopicPartition, Log] = {}
        errors: dict[TopicPartition, Exception] = {}
        created: dict[Path, list[tuple[TopicPartition, Log]]] = {}
        counts = self._partition_counts()
        for tp, config in configs.items():
            existing = self._logs.get(tp)
            if existing is not None:
                logs[tp] = existing
                continue
            try:
                log = self._new_log(tp, False, None, config, counts)
            except (OSError, MinibrokerError, KafkaError) as exc:  # e.g. an offline dir
                errors[tp] = exc
                continue
            counts[log.dir.parent] += 1
            created.setdefault(log.dir.parent, []).append((tp, log))
        for log_dir, new_logs in created.items():
            try:
                fsync_dir(log_dir)
            except OSError as exc:
                for tp, log in new_logs:
                    errors[tp] = exc
                    log.abandon()
                continue
            for tp, log in new_logs:
                self._logs[tp] = logs[tp] = log
        return logs, errors

    def _new_log(
        self,
        tp: TopicPartition,
        is_future: bool,
        preferred_dir: str | Path | None,
        config: LogConfig | None,
        counts: Counter[Path] | None,
    ) -> Log:
        """Make the partition dir and its first segment (not yet fsynced in the log
        dir, not yet registered)."""
        if preferred_dir is None and not is_future:
            preferred_dir = self.preferred_log_dirs.pop(tp, None)
        log_dir = self._choose_dir(preferred_dir, counts)
        if is_future:
            current = self._logs.get(tp)
            if current is not None and current.dir.parent == log_dir:
                raise LogDirError(f"{tp} already lives in {log_dir}")
        name = partition_dir_name(tp, FUTURE_DIR_SUFFIX if is_future else "")
        return Log(
            log_dir / name,
            config or self._topic_config(tp.topic),
            had_clean_shutdown=True,
            clock=self.clock,
            flush_stats=self.flush_stats,
            corruption_stats=self.corruption_stats,
        )

    def update_config(self, topic: str, config: LogConfig) -> None:
        """Apply changed topic-level settings to the live logs of ``topic``."""
        for tp, log in [*self._logs.items(), *self._future_logs.items()]:
            if tp.topic == topic:
                log.config = config

    # --- deletion and log-dir moves --------------------------------------------------

    def delete_log(self, tp: TopicPartition, *, is_future: bool = False) -> Path | None:
        """Close the log and rename its dir to ``...-delete``; the files go at the next
        ``remove_deleted_logs``. Returns the renamed dir (None if there was no log)."""
        log = (self._future_logs if is_future else self._logs).pop(tp, None)
        if log is None:
            return None
        log.close()
        return self._rename_for_deletion(log.dir)

    def _rename_for_deletion(self, directory: Path) -> Path:
        parsed = parse_partition_dir(directory.name)
        assert parsed is not None
        target = directory.with_name(partition_dir_name(parsed.tp, DELETE_DIR_SUFFIX))
        os.rename(directory, target)
        fsync_dir(directory.parent)
        self._pending_dir_deletes.append(target)
        return target

    def remove_deleted_logs(self) -> int:
        """Remove every ``-delete`` dir queued so far (blocking: run it in a thread)."""
        pending, self._pending_dir_deletes = self._pending_dir_deletes, []
        for path in pending:
            shutil.rmtree(path, ignore_errors=True)
        return len(pending)

    @property
    def pending_deletions(self) -> list[Path]:
        return list(self._pending_dir_deletes)

    def replace_current_with_future(self, tp: TopicPartition) -> Log:
        """Finish a log-dir move: the future log becomes the log of ``tp`` (its dir
        loses the ``-future`` suffix) and the old current log is deleted."""
        future = self._future_logs.pop(tp)
        current = self._logs.pop(tp, None)
        if current is not None:
            current.close()
            self._rename_for_deletion(current.dir)
        future.flush()
        start, config = future.log_start_offset, future.config
        future.close()
        target = future.dir.with_name(str(tp))
        os.rename(future.dir, target)
        fsync_dir(target.parent)
        log = Log(
            target,
            config,
            log_start_offset=start,
            had_clean_shutdown=True,
            clock=self.clock,
            flush_stats=self.flush_stats,
            corruption_stats=self.corruption_stats,
        )
        self._logs[tp] = log
        return log

    # --- housekeeping ----------------------------------------------------------------

    def cleanup_logs(self, now_ms: int | None = None) -> int:
        """Retention on every log, then removal of expired ``.deleted`` segment files.
        Returns the number of segments deleted."""
        deleted = 0
        for log in list(self._logs.values()):
            deleted += log.delete_old_segments(now_ms)
            log.delete_expired_files(now_ms)
        return deleted

    def flush_logs(self) -> None:
        """fsync every log to its end (thread-safe against the event loop, see
        Log.flush)."""
        for log in [*list(self._logs.values()), *list(self._future_logs.values())]:
            log.flush()

    def flush_rolled_logs(self) -> None:
        """Kafka's flush-on-roll: fsync every log up to its active segment, moving the
        recovery points past every rolled segment, so that recovery after a crash only
        revalidates active segments. Cheap when nothing rolled; thread-safe like
        flush_logs. Run it (in a worker thread) before checkpoint_recovery_points."""
        for log in [*list(self._logs.values()), *list(self._future_logs.values())]:
            log.flush(log.active_segment.base_offset)

    def _write_per_dir(self, name: str, offset_of: Callable[[Log], int]) -> None:
        # The broker runs checkpoints in a worker thread while the event loop may add or
        # drop logs: list() copies each dict in one step under the GIL.
        snapshot = [*list(self._logs.items()), *list(self._future_logs.items())]
        for log_dir in self.log_dirs:
            if log_dir in self.offline_log_dirs:
                continue
            offsets = {tp: offset_of(log) for tp, log in snapshot if log.dir.parent == log_dir}
            OffsetCheckpointFile(log_dir / name).write(offsets)

    def checkpoint_recovery_points(self) -> None:
        self._write_per_dir(RECOVERY_POINT_CHECKPOINT, lambda log: log.recovery_point)

    def checkpoint_log_start_offsets(self) -> None:
        self._write_per_dir(LOG_START_OFFSET_CHECKPOINT, lambda log: log.log_start_offset)

    def write_replication_offsets(
        self, log_dir: Path, high_watermarks: Mapping[TopicPartition, int]
    ) -> None:
        """The broker's high-watermark checkpoint of one log dir."""
        OffsetCheckpointFile(log_dir / REPLICATION_OFFSET_CHECKPOINT).write(high_watermarks)

    def read_replication_offsets(self, log_dir: Path) -> dict[TopicPartition, int]:
        return OffsetCheckpointFile(log_dir / REPLICATION_OFFSET_CHECKPOINT).read()

    def abandon(self) -> None:
        """Stop the way kill -9 would: close every file and release the dir locks, but
        flush nothing, write no checkpoint and no clean-shutdown marker (tests)."""
        for log in self._all_logs():
            log.abandon()
        self._logs.clear()
        self._future_logs.clear()
        self._unlock()

    def close(self) -> None:
        """Clean shutdown: flush, checkpoint, close, then mark each dir clean."""
        if not self._lock_fds:
            return
        self.flush_logs()
        self.checkpoint_recovery_points()
        self.checkpoint_log_start_offsets()
        for log in self._all_logs():
            log.close()
        for log_dir in self.log_dirs:
            if log_dir not in self.offline_log_dirs:
                write_atomically(log_dir / CLEAN_SHUTDOWN_FILE, b"")
        self._logs.clear()
        self._future_logs.clear()
        self._unlock()

"""The broker's log cleaner: compacts the logs of ``cleanup.policy=compact`` topics.

How this works. ``log.cleaner.threads`` Trio tasks each loop: ask the
CleanerManager (storage/cleaner/manager.py) for the dirtiest log, hand its job to a
worker *process* (a pool of ``log.cleaner.threads`` spawned on first use), and when it
returns swap the cleaned segments into the log and write ``cleaner-offset-checkpoint``.
With nothing to clean a task waits ``log.cleaner.backoff.ms``.

Dynamic keys: ``log.cleaner.backoff.ms``, ``log.cleaner.dedupe.buffer.size`` and
``log.cleaner.io.max.bytes.per.second`` change at run time, as in Kafka
(broker/admin/broker_configs.py calls ``reconfigure``): the waiting tasks wake and wait
the new backoff, and the next job takes the new buffer and I/O rate.
``log.cleaner.threads`` still takes a restart.

Why a process: the cleaner's work is Python byte-walking of whole segments; in a
thread it would hold the GIL against the event loop that appends and serves fetches.
The worker only reads old, immutable segment files (through its own descriptors) and
writes ``.cleaned`` files: it never touches a live Log. The swap (a few renames and
one list assignment) runs on the event loop, under the ReplicaManager's
``log_manager_lock`` (log creation, deletion and moves take it too), after checking the
log is still the partition's. A reader never sees a half-written segment: the new
segment enters the segment list whole, and fetches read segments synchronously on the
loop, so none holds an old segment across the swap.

Test hook: with ``stop_at=<step>`` (one of SWAP_STEPS; ``minibroker broker`` sets it
from ``MINIBROKER_CLEANER_STOP_AT``, node/cli.py) the broker writes
``cleaner-stopped-at-<step>`` in the log dir at that step of a swap and freezes there,
for a crash test to kill -9 it.

Metrics (Kafka's LogCleaner gauges): ``kafka_log_logcleaner_max_dirty_percent``,
``kafka_log_logcleaner_time_since_last_run_seconds``,
``kafka_log_logcleaner_cleaner_recopy_percent``.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import multiprocessing
import os
import time
from collections.abc import Iterator
from pathlib import Path

import trio
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from minibroker.broker.config.broker_config import BrokerConfig
from minibroker.broker.replication.hosted_replicas import HostedReplicas
from minibroker.protocol.topic_partition import TopicPartition
from minibroker.storage.cleaner.clean import CleanJob, CleanResult, clean_log, exit_with_parent
from minibroker.storage.cleaner.manager import CleanerConfig, CleanerManager
from minibroker.storage.log import Log

log = logging.getLogger(__name__)

STOP_FOR_S = 600  # how long the crash-test hook freezes the broker (bounded)
UNLIMITED_RATE = 1e300  # log.cleaner.io.max.bytes.per.second at or above: no throttle


class LogCleaner:
    def __init__(
        self, config: BrokerConfig, replicas: HostedReplicas, *, stop_at: str | None = None
    ) -> None:
        """``stop_at``: the crash tests' hook (see the module doc); None in production."""
        self.config = config
        self.stop_at = stop_at
        self.replicas = replicas
        self.manager = CleanerManager(
            [Path(d).absolute() for d in config.log_dirs],
            cleaner_config(config),
            clock=replicas.clock,
            high_watermark=self._high_watermark,
        )
        self.started = time.monotonic()
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None
        self._wakeup = trio.Event()

    def _high_watermark(self, tp: TopicPartition) -> int | None:
        partition = self.replicas.partitions.get(tp)
        return None if partition is None else partition.high_watermark

    def _logs(self) -> dict[TopicPartition, Log]:
        offline = self.replicas.log_manager.offline_log_dirs
        partitions = self.replicas.partitions
        if not offline:  # the usual case: no Path.parent a partition (~3 us each)
            return {tp: p.log for tp, p in partitions.items() if p.corruption is None}
        return {
            tp: p.log
            for tp, p in partitions.items()
            if p.log.dir.parent not in offline and p.corruption is None
        }

    def dirty_ratio(self, tp: TopicPartition, log_: Log) -> float:
        """The share of ``log_`` not cleaned yet (0..1); -1 when it is not compacted."""
        if not log_.config.compact:
            return -1.0
        return self.manager.dirty_stats(tp, log_, self.replicas.clock()).dirty_ratio

    def wake(self) -> None:
        """Look for work now (a test or a config change), not after the backoff."""
        self._wakeup.set()

    def reconfigure(self, config: BrokerConfig) -> None:
        """Take the dynamic log.cleaner.* keys of ``config`` (the broker's, with its
        dynamic overrides); the thread count stays as started."""
        wanted = dataclasses.replace(cleaner_config(config), threads=self.manager.config.threads)
        if wanted != self.manager.config:
            log.info("log cleaner reconfigured: %s", wanted)
            self.manager.config = wanted
            self.wake()  # a task waiting out the old backoff waits the new one

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            async with trio.open_nursery() as nursery:
                for _ in range(self.config.log_cleaner_threads):
                    nursery.start_soon(self._clean_forever)
                task_status.started()
        finally:
            self._shutdown_pool()

    async def _clean_forever(self) -> None:
        while True:
            try:
                cleaned = await self.clean_one()
            except Exception as exc:  # one bad log must not stop the cleaner
                log.error("log cleaner pass failed: %r", exc)
                cleaned = False
            if not cleaned:
                with trio.move_on_after(self.manager.config.backoff_ms / 1000):
                    await self._wakeup.wait()
                self._wakeup = trio.Event()

    async def clean_one(self) -> bool:
        """Clean the dirtiest log, if one needs it; False when none does."""
        pending = self.manager.choose(self._logs())
        if pending is None:
            return False
        result: CleanResult | None = None
        try:
            result = await trio.to_thread.run_sync(
                self._run_job, pending.job, abandon_on_cancel=True
            )
        except (OSError, ValueError, concurrent.futures.process.BrokenProcessPool) as exc:
            # A segment deleted meanwhile, a corrupt batch (the scrubber's business).
            log.warning("%s: cleaning failed, retried later: %r", pending.tp, exc)
        finally:
            if result is None:
                self.manager.finish(pending, None)
        if result is None:
            return True
        async with self.replicas.log_manager_lock:
            if self.replicas.log_manager.get_log(pending.tp) is not pending.log:
                self.manager.finish(pending, None)  # deleted or moved meanwhile
                return True
            log_dir = pending.log.dir.parent
            try:
                self.manager.finish(pending, result, self._step(log_dir))
                logs = self.replicas.log_manager.logs
                entries = self.manager.checkpoint_snapshot(logs).get(log_dir, {})
                await trio.to_thread.run_sync(self.manager.write_checkpoints, {log_dir: entries})
            except OSError as exc:  # a failing disk: the log dir goes offline as for appends
                log.error("%s: swapping cleaned segments failed: %s", pending.tp, exc)
                self.replicas.log_dir_failed(log_dir)
        return True

    def _run_job(self, job: CleanJob) -> CleanResult:
        if self._pool is None:
            self._pool = concurrent.futures.ProcessPoolExecutor(
                max_workers=self.config.log_cleaner_threads,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=exit_with_parent,
                initargs=(os.getpid(),),
            )
        job = dataclasses.replace(job, parent_pid=os.getpid())
        return self._pool.submit(clean_log, job).result()

    def _shutdown_pool(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    def _step(self, log_dir: Path) -> StepHook:
        return StepHook(log_dir, self.stop_at)


def cleaner_config(config: BrokerConfig) -> CleanerConfig:
    """The cleaner's settings from the broker's log.cleaner.* keys."""
    rate = config.log_cleaner_io_max_bytes_per_second
    return CleanerConfig(
        threads=config.log_cleaner_threads,
        dedupe_buffer_bytes=config.log_cleaner_dedupe_buffer_size,
        io_bytes_per_second=0.0 if rate >= UNLIMITED_RATE else rate,
        backoff_ms=config.log_cleaner_backoff_ms,
    )


class StepHook:
    """Called at each swap step; freezes the broker at the one ``stop_at`` names."""

    def __init__(self, log_dir: Path, stop_at: str | None) -> None:
        self.log_dir, self.stop_at = log_dir, stop_at

    def __call__(self, step: str) -> None:
        if step != self.stop_at:
            return
        (self.log_dir / f"cleaner-stopped-at-{step}").write_text(str(os.getpid()))
        log.warning("cleaner stopped at step %r for a crash test", step)
        time.sleep(STOP_FOR_S)  # blocks the event loop on purpose: nothing else moves


LOG_CLEANER = "kafka_log_logcleaner_"


class CleanerCollector(Collector):
    """Kafka's LogCleaner gauges (see the module doc)."""

    def __init__(self, cleaner: LogCleaner) -> None:
        self.cleaner = cleaner

    def collect(self) -> Iterator[Metric]:
        stats = self.cleaner.manager.stats
        yield GaugeMetricFamily(
            LOG_CLEANER + "max_dirty_percent",
            "Largest dirty share of a compacted log at the last look, in percent.",
            stats.max_dirty_percent,
        )
        last = stats.last_run_end if stats.last_run_end is not None else self.cleaner.started
        yield GaugeMetricFamily(
            LOG_CLEANER + "time_since_last_run_seconds",
            "Seconds since the last cleaning finished (or the cleaner started); Kafka's "
            "time-since-last-run-ms in Prometheus' base unit.",
            time.monotonic() - last,
        )
        yield GaugeMetricFamily(
            LOG_CLEANER + "cleaner_recopy_percent",
            "Bytes written over bytes read by the last cleaning, in percent.",
            stats.recopy_percent,
        )

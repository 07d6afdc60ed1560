"""Cleaner worker processes never outlive the broker that started them."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

# A stand-in broker: a process pool as the log cleaner makes it, one job run (so a worker
# exists and sits idle on its task queue), the worker's pid printed, then it waits.
BROKER = textwrap.dedent(
    """
    import concurrent.futures, multiprocessing, os, sys, time
    from minibroker.storage.cleaner.clean import exit_with_parent

    pool = concurrent.futures.ProcessPoolExecutor(
        max_workers=1,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=exit_with_parent,
        initargs=(os.getpid(), 0.05),
    )
    print(pool.submit(os.getpid).result(), flush=True)
    time.sleep(600)
    """
)


@pytest.mark.timeout(60)
def test_an_idle_worker_exits_when_its_broker_is_killed() -> None:
    broker = subprocess.Popen(
        [sys.executable, "-c", BROKER],
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    try:
        assert broker.stdout is not None
        worker = int(broker.stdout.readline())
        watched = os.pidfd_open(worker)
        try:
            broker.send_signal(signal.SIGKILL)
            readable, _, _ = select.select([watched], [], [], 30)  # readable once it exits
            assert readable == [watched], f"worker {worker} outlived its killed broker"
        finally:
            os.close(watched)
    finally:
        broker.kill()
        broker.wait()

"""The package zip a driver ships to Spark's executors: one per process, gone at exit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(60)

DRIVER = """
from minibroker.analytics.datasource import shipped_zip
first = shipped_zip()
assert shipped_zip() == first, "built twice in one process"
assert first.is_file()
print(first.parent)
"""


def test_the_shipped_zip_is_built_once_per_process_and_removed_when_it_exits() -> None:
    root = Path(__file__).resolve().parents[3]
    done = subprocess.run(
        [sys.executable, "-c", DRIVER], capture_output=True, text=True, cwd=root, check=True
    )
    directory = Path(done.stdout.strip())
    assert directory.name.startswith("minibroker-pyfiles-")
    assert not directory.exists()

"""scripts/pip-install on a machine where .venv does not exist yet: it creates the venv
and says, before pip starts, that pyspark is a large download (pip itself then shows its
progress). A copy of the script runs against an unreachable package index, so nothing is
downloaded; creating a venv takes a while on a busy machine, hence not a unit test.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


def test_the_first_install_creates_the_venv_and_says_pyspark_is_downloaded(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    for name in ("scripts/pip-install", "scripts/need-debian", "pyproject.toml"):
        (repo / name).write_bytes((REPO / name).read_bytes())
        (repo / name).chmod((REPO / name).stat().st_mode)
    # No package index reachable: pip fails at once, after the script said what it does.
    offline = {"PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_RETRIES": "0",
               "PIP_TIMEOUT": "1", "PIP_NO_CACHE_DIR": "1"}  # fmt: skip

    done = subprocess.run(
        [str(repo / "scripts" / "pip-install"), "fast"],
        env={**os.environ, **offline},
        capture_output=True,
        text=True,
        timeout=150,
        check=False,
    )

    assert done.returncode != 0
    assert (repo / ".venv" / "bin" / "python").exists()
    assert done.stdout.splitlines()[:2] == [
        "creating .venv (python3 -m venv .venv)",
        "installing minibroker[fast] into .venv: the first time this downloads pyspark "
        "(~400 MB), which takes a few minutes",
    ]

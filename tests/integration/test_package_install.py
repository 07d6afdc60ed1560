"""The built wheel installs one top-level import package, ``minibroker``, and nothing else.

The repository keeps its folders at the top (``broker/``, ``client/``, ...) and
``minibroker/`` links to them; this checks what a user's ``pip install`` really puts
into site-packages: a wheel built from this checkout, installed without dependencies
into a fresh virtual environment (so only modules that need nothing outside the
standard library are imported), looked at from a directory outside the repository.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GENERIC_NAMES = [
    "analytics",
    "broker",
    "client",
    "controller",
    "coordinator",
    "protocol",
    "storage",
    "zk",
]

PROBE = """
import importlib.util, json, sys
import minibroker
from minibroker.zk import model
print(json.dumps({
    "minibroker": minibroker.__file__,
    "zk": model.__file__,
    "broker": importlib.util.find_spec("minibroker.broker.broker").origin,
    "all": minibroker.__all__,
    "generic": {n: importlib.util.find_spec(n) is not None for n in sys.argv[1:]},
}))
"""


def run(*argv: str | Path, cwd: Path) -> str:
    out = subprocess.run(
        [str(a) for a in argv], cwd=cwd, capture_output=True, text=True, timeout=240
    )
    assert out.returncode == 0, f"{argv}: {out.stdout}\n{out.stderr}"
    return out.stdout


@pytest.mark.timeout(600)
def test_the_wheel_installs_only_the_minibroker_package(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", dist, ROOT, cwd=tmp_path)
    (wheel,) = dist.glob("minibroker-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        tops = {name.split("/")[0] for name in archive.namelist()}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"minibroker"}

    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", venv, cwd=tmp_path)
    python = venv / "bin" / "python"
    run(python, "-m", "pip", "install", "--no-deps", "-q", wheel, cwd=tmp_path)
    assert (venv / "bin" / "minibroker").exists()

    # Import from a neutral directory, so nothing of the checkout is on sys.path.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    found = json.loads(run(python, "-c", PROBE, *GENERIC_NAMES, cwd=elsewhere))
    site = str(venv)
    assert found["minibroker"].startswith(site)
    assert found["zk"].startswith(site)
    assert found["broker"].startswith(site)
    assert found["all"] == ["Admin", "Consumer", "ConsumerRecord", "Producer", "RecordMetadata"]
    assert found["generic"] == dict.fromkeys(GENERIC_NAMES, False)

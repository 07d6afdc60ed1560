"""The built wheel installs one top-level import package, ``minibroker``, and nothing else.

The repository keeps its folders at the top (``broker/``, ``client/``, ...) and
``minibroker/`` links to them; this checks what a user's ``pip install`` really puts
into site-packages: a wheel built from this checkout, installed without dependencies
into a fresh virtual environment (so only modules that need nothing outside the
standard library are imported), looked at from a directory outside the repository.
The wheel carries the compiled record codec when a C compiler is present (as here), and
still builds, without it, when there is none.
"""

from __future__ import annotations

import json
import os
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
# Loads the installed compiled codec by its path (importing minibroker.protocol.records
# would need the dependencies this venv lacks) and encodes one value with it.
SPEEDUPS_PROBE = """
import glob, importlib.util, os, minibroker
where = os.path.join(os.path.dirname(minibroker.__file__), "protocol", "records")
(path,) = glob.glob(os.path.join(where, "_speedups*.so"))
spec = importlib.util.spec_from_file_location("_speedups", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print(module.encode_values([b"v"]).hex())
"""


def run(*argv: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    out = subprocess.run(
        [str(a) for a in argv], cwd=cwd, capture_output=True, text=True, timeout=240, env=env
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

    # The compiled record codec was built into the wheel and loads from the venv:
    # length 7, attributes, timestampDelta, offsetDelta, null key, length 1, "v", 0 headers.
    assert any(n.startswith("minibroker/protocol/records/_speedups") for n in archive.namelist())
    assert run(python, "-c", SPEEDUPS_PROBE, cwd=elsewhere).strip() == "0e0000000102" + "76" + "00"


@pytest.mark.timeout(600)
def test_the_wheel_builds_without_a_c_compiler(tmp_path: Path) -> None:
    """No compiler: the optional extension is left out and the pure-Python codec ships.
    Built from a copy of the checkout's files without the ignored ones, as a fresh clone
    has them (an earlier build's ``build/`` would otherwise be packed again)."""
    source = tmp_path / "source"
    source.mkdir()
    files = run("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=ROOT)
    existing = [f for f in files.split("\0") if f and os.path.lexists(ROOT / f)]
    packed = subprocess.run(
        ["tar", "-c", "--null", "-T", "-"], cwd=ROOT, input="\0".join(existing).encode(),
        capture_output=True, check=True, timeout=120,
    )  # fmt: skip
    subprocess.run(["tar", "-x"], cwd=source, input=packed.stdout, check=True, timeout=120)
    dist = tmp_path / "dist"
    no_compiler = {**os.environ, "CC": "false"}
    run(
        sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", dist, source,
        cwd=tmp_path, env=no_compiler,
    )  # fmt: skip
    (wheel,) = dist.glob("minibroker-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    assert not [n for n in names if "_speedups" in n and not n.endswith((".c", ".pyi"))]
    assert "minibroker/protocol/records/decode.py" in names
    assert "minibroker/protocol/records/accel.py" in names

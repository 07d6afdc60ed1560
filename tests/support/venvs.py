"""Virtual environments as a new user's clone has them, built offline from this one.

``fast_only_venv(path, leave_out)`` makes the venv ``./scripts/dev-up`` leaves in a
fresh clone (minibroker with its ``fast`` extra, no test extras): a new venv whose
site-packages links to every distribution of the running venv except those named in
``leave_out`` (and minibroker's own install: the clone is on PYTHONPATH instead), plus
a ``minibroker`` command. Nothing is downloaded: pyspark alone is ~400 MB.

``wheelhouse(out, names)`` turns installed distributions back into wheels (their files
as RECORD lists them, a fresh RECORD), so that a ``pip install`` a README tells the
user to run can run for real with ``--no-index --find-links out``.
"""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

SITE_PACKAGES = Path(sysconfig.get_paths()["purelib"])
INSTALL_ONLY = ("INSTALLER", "REQUESTED", "direct_url.json", "RECORD")
"""dist-info files an installer writes, not part of a wheel (RECORD is rewritten)."""


def _canonical(name: str) -> str:
    return name.lower().replace("-", "_").replace(".", "_")


def _owned_by(names: Iterable[str]) -> set[str]:
    """The top-level site-packages entries the distributions ``names`` installed."""
    owned: set[str] = set()
    for name in names:
        for file in metadata.distribution(name).files or ():
            top = file.parts[0]
            if top not in ("..", "__pycache__"):
                owned.add(top)
    return owned


def fast_only_venv(path: Path, leave_out: Iterable[str]) -> Path:
    """A venv at ``path`` with this venv's distributions but ``leave_out``; its python."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120
    )
    python = path / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True, timeout=60,
        ).stdout.strip()
    )  # fmt: skip
    hidden = _owned_by([*leave_out, "minibroker"])
    for entry in SITE_PACKAGES.iterdir():
        if entry.name in hidden or entry.name == "__pycache__":
            continue
        if "minibroker" in entry.name.lower():  # the editable install's finder and .pth
            continue
        (site / entry.name).symlink_to(entry)
    command = path / "bin" / "minibroker"
    command.write_text(
        f"#!{python}\nimport sys\nfrom minibroker.command.main import main\nsys.exit(main())\n"
    )
    command.chmod(0o755)
    return python


def wheelhouse(out: Path, names: Iterable[str]) -> Path:
    """Wheels of the installed distributions ``names`` in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    for name in names:
        _wheel_of(metadata.distribution(name), out)
    return out


def _wheel_of(dist: metadata.Distribution, out: Path) -> Path:
    tag = next(
        line.split(":", 1)[1].strip()
        for line in (dist.read_text("WHEEL") or "").splitlines()
        if line.startswith("Tag:")
    )
    stem = f"{_canonical(dist.metadata['Name'])}-{dist.version}"
    wheel = out / f"{stem}-{tag}.whl"
    records = []
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for file in dist.files or ():
            if file.parts[0] == ".." or "__pycache__" in file.parts:
                continue  # scripts (pip writes them anew) and bytecode
            if file.parent.name.endswith(".dist-info") and file.name in INSTALL_ONLY:
                continue
            data = Path(str(file.locate())).read_bytes()
            archive.writestr(str(file), data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            records.append(f"{file},sha256={digest.decode()},{len(data)}")
        info = next(p for p in (dist.files or ()) if p.parent.name.endswith(".dist-info"))
        record = f"{info.parent}/RECORD"
        archive.writestr(record, "\n".join([*records, f"{record},,"]) + "\n")
    return wheel

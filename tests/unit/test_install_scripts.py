"""scripts/test installs the Debian packages the suite needs, or stops at once with one
line naming them (scripts/need-debian); .ci/run runs exactly the README's test command.

need-debian is run with stub ``id``/``sudo``/``apt-get`` first on PATH, so these tests
never install anything and behave the same as root or not.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
from pathlib import Path

import pytest

from tests.support.readme import block, commands

pytestmark = pytest.mark.timeout(60)

REPO = Path(__file__).resolve().parents[2]
NEED_DEBIAN = REPO / "scripts" / "need-debian"


def _stub(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _need_debian(tmp_path: Path, *pairs: str, uid: int) -> subprocess.CompletedProcess[str]:
    stubs = tmp_path / "bin"
    stubs.mkdir()
    _stub(stubs, "id", f"echo {uid}")
    _stub(stubs, "sudo", "exit 1")  # no passwordless sudo
    _stub(stubs, "apt-get", f'echo "apt-get $*" >> {tmp_path}/apt.log')
    return subprocess.run(
        [str(NEED_DEBIAN), *pairs],
        env={**os.environ, "PATH": f"{stubs}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_without_root_or_sudo_a_missing_package_stops_with_one_line_naming_it(
    tmp_path: Path,
) -> None:
    done = _need_debian(tmp_path, "sh:dash", "no-such-tool-x:tool-x-pkg", uid=1000)

    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        "missing Debian package(s): tool-x-pkg; install them with: sudo apt-get install tool-x-pkg"
    ]
    assert not (tmp_path / "apt.log").exists()


def test_as_root_missing_packages_are_installed_once_each_with_apt_get(tmp_path: Path) -> None:
    done = _need_debian(tmp_path, "no-such-a:pkg-a", "no-such-b:pkg-a", "no-such-c:pkg-c", uid=0)

    assert done.returncode == 0, done.stderr
    assert (tmp_path / "apt.log").read_text().splitlines() == [
        "apt-get update -qq",
        "apt-get install -y -q --no-install-recommends pkg-a pkg-c",
    ]


def test_nothing_happens_when_every_command_is_there(tmp_path: Path) -> None:
    done = _need_debian(tmp_path, "sh:dash", "cat:coreutils", uid=1000)

    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_the_readme_test_command_installs_the_suites_debian_packages() -> None:
    script = (REPO / "scripts" / "test").read_text(encoding="utf-8")

    needed = re.search(r"^scripts/need-debian (.+?)\s*\\?$", script, re.M)
    assert needed is not None
    pairs = set(needed[1].split())
    assert {"prometheus:prometheus", "promtool:prometheus"} <= pairs
    assert {"docker-compose:docker-compose", "kcat:kcat"} <= pairs
    assert "chromium:chromium" in pairs  # report.html is checked in a real browser


def test_ci_runs_exactly_the_readme_test_command() -> None:
    readme_test = commands(block("Quick start", "sh"))[1]
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")

    assert readme_test == "./scripts/test"
    assert re.search(rf"^{re.escape(readme_test)}$", ci, re.M)


def test_a_python_module_is_checked_by_importing_it(tmp_path: Path) -> None:
    done = _need_debian(tmp_path, "py:json:python3", "py:no_such_module_x:python3-x", uid=1000)

    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "missing Debian package(s): python3-x; install them with: sudo apt-get install python3-x"
    ]

"""Saved ZooKeeper session credentials (zk/session.py)."""

from __future__ import annotations

import stat
from pathlib import Path

from minibroker.zk.session import SESSION_FILE, read_credentials, write_credentials


def test_credentials_round_trip_through_a_file_only_the_owner_reads(tmp_path: Path) -> None:
    path = tmp_path / SESSION_FILE
    write_credentials(path, (0x1000020A2CF0002, b"\x00secret\xff"))
    assert read_credentials(path) == (0x1000020A2CF0002, b"\x00secret\xff")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    write_credentials(path, (7, b"next"))  # a new session replaces the old one
    assert read_credentials(path) == (7, b"next")


def test_a_missing_or_damaged_file_names_no_session(tmp_path: Path) -> None:
    path = tmp_path / SESSION_FILE
    assert read_credentials(path) is None
    path.write_text('{"session_id": 5')
    assert read_credentials(path) is None
    path.write_text('{"session_id": 5, "password": "not hex"}')
    assert read_credentials(path) is None

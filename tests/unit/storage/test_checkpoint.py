"""Checkpoint files: Kafka's text format, atomic replacement, loud failure on garbage."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from minibroker.protocol.topic_partition import TopicPartition
from minibroker.storage.checkpoint import (
    OffsetCheckpointFile,
    read_checkpoint,
    sync_filesystem,
    write_checkpoint,
)
from minibroker.storage.errors import CorruptCheckpointError


def test_offset_checkpoint_uses_kafkas_text_format(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    OffsetCheckpointFile(path).write(
        {TopicPartition("orders", 0): 12, TopicPartition("a-b.c", 3): 7}
    )
    assert path.read_text() == "0\n2\norders 0 12\na-b.c 3 7\n"
    assert OffsetCheckpointFile(path).read() == {
        TopicPartition("orders", 0): 12,
        TopicPartition("a-b.c", 3): 7,
    }


def test_missing_checkpoint_reads_as_empty(tmp_path: Path) -> None:
    assert OffsetCheckpointFile(tmp_path / "nothing").read() == {}
    assert read_checkpoint(tmp_path / "nothing", 2) is None


def test_checkpoint_survives_a_crash_between_tmp_write_and_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "log-start-offset-checkpoint"
    checkpoint = OffsetCheckpointFile(path)
    checkpoint.write({TopicPartition("t", 0): 5})

    def crash(*_args: object) -> None:
        raise OSError("power lost")

    with monkeypatch.context() as patch:
        patch.setattr(os, "replace", crash)
        with pytest.raises(OSError, match="power lost"):
            checkpoint.write({TopicPartition("t", 0): 99})
    assert (tmp_path / "log-start-offset-checkpoint.tmp").exists()  # the half-done write
    assert checkpoint.read() == {TopicPartition("t", 0): 5}  # the old file is whole
    checkpoint.write({TopicPartition("t", 0): 100})  # the stale tmp is simply replaced
    assert checkpoint.read() == {TopicPartition("t", 0): 100}
    assert not (tmp_path / "log-start-offset-checkpoint.tmp").exists()


def test_torn_tmp_file_never_replaces_the_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    write_checkpoint(path, [(1, 0), (2, 10)])
    (tmp_path / "cp.tmp").write_text("0\n2\n1 0\n")  # a crash mid-write of the tmp
    assert read_checkpoint(path, 2) == [["1", "0"], ["2", "10"]]


@pytest.mark.parametrize(
    ("content", "complaint"),
    [
        ("", "missing version"),
        ("1\n0\n", "unknown checkpoint version 1"),
        ("0\n2\nt 0 5\n", "count line says 2"),
        ("0\n1\nt 0\n", "expected 3 fields"),
        ("0\n1\nt 0 five\n", "not an integer"),
        ("x\n0\n", "not an integer"),
        ("0\n1\nt  0 5\n", "expected 3 fields"),
    ],
)
def test_corrupt_checkpoint_raises_a_clear_error(
    tmp_path: Path, content: str, complaint: str
) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    path.write_text(content)
    with pytest.raises(CorruptCheckpointError, match=complaint) as caught:
        OffsetCheckpointFile(path).read()
    assert str(path) in str(caught.value)


def test_sync_filesystem_returns_for_a_directory_and_refuses_a_missing_one(tmp_path: Path) -> None:
    sync_filesystem(tmp_path)
    with pytest.raises(OSError):
        sync_filesystem(tmp_path / "missing")

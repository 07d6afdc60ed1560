"""The partition.metadata batch: every missing file written, a foreign one left alone,
and the batch made durable with one filesystem sync, not two fsyncs per file."""

from __future__ import annotations

from pathlib import Path

import pytest

from minibroker.broker.replication import partition_metadata_writer
from minibroker.storage.partition_metadata import (
    read_partition_metadata,
    write_partition_metadata,
)

pytestmark = pytest.mark.timeout(30)

TOPIC_ID = bytes(range(16))
OTHER_ID = bytes(range(1, 17))


def test_a_batch_writes_each_missing_file_and_syncs_its_filesystem_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[Path] = []
    monkeypatch.setattr(partition_metadata_writer, "sync_filesystem", synced.append)
    dirs = [tmp_path / f"t-{p}" for p in range(5)]
    for d in dirs:
        d.mkdir()
    write_partition_metadata(dirs[0], OTHER_ID)  # a deleted topic's directory, say

    partition_metadata_writer.write_missing([(d, TOPIC_ID) for d in dirs])

    assert read_partition_metadata(dirs[0]) == OTHER_ID
    assert [read_partition_metadata(d) for d in dirs[1:]] == [TOPIC_ID] * 4
    assert synced == [tmp_path]


def test_nothing_written_means_nothing_synced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[Path] = []
    monkeypatch.setattr(partition_metadata_writer, "sync_filesystem", synced.append)
    d = tmp_path / "t-0"
    d.mkdir()
    write_partition_metadata(d, TOPIC_ID)
    partition_metadata_writer.write_missing([(d, TOPIC_ID)])
    assert synced == []

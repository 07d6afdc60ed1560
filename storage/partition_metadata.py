"""``partition.metadata``: the topic id (KIP-516) in each partition directory.

Kafka's text format, two lines::

    version: 0
    topic_id: <the id's 22-character string form>

Written once the controller names the topic's id (LeaderAndIsr), atomically (temporary
file, rename, then synced), so a directory left by a deleted topic of the same name can be
told apart from the current topic's. A missing file means the id was not written yet.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from minibroker.protocol.topic_ids import parse_topic_id, topic_id_str
from minibroker.storage.checkpoint import write_atomically

PARTITION_METADATA_FILE: Final = "partition.metadata"
PARTITION_METADATA_VERSION: Final = 0


def read_partition_metadata(partition_dir: Path) -> bytes | None:
    """The topic id the directory's file holds; None if there is no file. ValueError
    if the file is not in the format above."""
    try:
        text = (partition_dir / PARTITION_METADATA_FILE).read_text()
    except FileNotFoundError:
        return None
    fields = dict(line.split(": ", 1) for line in text.splitlines() if line)
    if fields.get("version") != str(PARTITION_METADATA_VERSION) or "topic_id" not in fields:
        raise ValueError(
            f"{partition_dir / PARTITION_METADATA_FILE}: not version 0 with a topic_id"
        )
    return parse_topic_id(fields["topic_id"])


def write_partition_metadata(partition_dir: Path, topic_id: bytes, *, sync: bool = True) -> None:
    """``sync=False``: atomic against a process crash only, until the caller syncs (a
    batch of them ends with one storage.checkpoint.sync_filesystem)."""
    content = f"version: {PARTITION_METADATA_VERSION}\ntopic_id: {topic_id_str(topic_id)}\n"
    write_atomically(partition_dir / PARTITION_METADATA_FILE, content.encode(), sync=sync)

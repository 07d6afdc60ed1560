"""A log's transactions: the last stable offset, the aborted transactions a
read_committed fetch is told of, and the ``.txnindex`` files in Kafka's layout, kept
across a restart and rebuilt when lost."""

from __future__ import annotations

import struct
from pathlib import Path

from minibroker.protocol.records import ControlRecordType, Record, encode_batch, encode_marker_batch
from minibroker.storage.log import Log
from minibroker.storage.log_config import LogConfig
from minibroker.storage.txn_index import AbortedTxn

PID = 42


def txn(log: Log, sequence: int, *, pid: int = PID) -> int:
    batch = encode_batch(
        [Record(b"v", timestamp=1)],
        producer_id=pid,
        producer_epoch=0,
        base_sequence=sequence,
        transactional=True,
    )
    return log.append(bytearray(batch)).first_offset


def end(log: Log, kind: ControlRecordType, *, pid: int = PID) -> int:
    batch = encode_marker_batch(
        kind, producer_id=pid, producer_epoch=0, coordinator_epoch=1, now_ms=1
    )
    return log.append(bytearray(batch), coordinator=True).first_offset


def plain(log: Log) -> int:
    return log.append(bytearray(encode_batch([Record(b"p", timestamp=1)]))).first_offset


def test_the_lso_stops_at_the_oldest_open_transaction_and_at_unreplicated_markers(
    tmp_path: Path,
) -> None:
    log = Log(tmp_path / "t-0", LogConfig())
    plain(log)  # 0
    first = txn(log, 0)  # 1
    plain(log)  # 2
    assert log.last_stable_offset(high_watermark=3) == first
    marker = end(log, ControlRecordType.COMMIT)  # 3
    # Ended, but a failover could still lose the marker: held until it is replicated.
    assert log.last_stable_offset(high_watermark=3) == first
    assert log.last_stable_offset(high_watermark=marker + 1) == marker + 1
    assert log.last_stable_offset(high_watermark=2) == 2  # never past the HW
    log.close()


def test_an_abort_is_indexed_in_kafkas_txnindex_layout_and_fetches_are_told_of_it(
    tmp_path: Path,
) -> None:
    log = Log(tmp_path / "t-0", LogConfig())
    first = txn(log, 0)  # 0
    txn(log, 1)  # 1
    marker = end(log, ControlRecordType.ABORT)  # 2
    other = txn(log, 0, pid=7)  # 3
    end(log, ControlRecordType.COMMIT, pid=7)  # 4: commits are not indexed
    expected = AbortedTxn(PID, first, marker, marker + 1)
    assert log.collect_aborted(0, 5) == [expected]
    assert log.collect_aborted(marker + 1, 5) == []  # ended before the fetch offset
    data = (tmp_path / "t-0" / "00000000000000000000.txnindex").read_bytes()
    assert data == struct.pack(">hqqqq", 0, PID, first, marker, marker + 1)
    assert other == 3
    log.close()


def test_the_index_and_open_transactions_survive_a_restart_and_a_lost_index_is_rebuilt(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "t-0"
    log = Log(directory, LogConfig())
    txn(log, 0)  # 0
    end(log, ControlRecordType.ABORT)  # 1
    opened = txn(log, 0, pid=9)  # 2: still open
    log.close()
    reopened = Log(directory, LogConfig(), recovery_point=3, had_clean_shutdown=True)
    assert reopened.collect_aborted(0, 3) == [AbortedTxn(PID, 0, 1, 2)]
    assert reopened.last_stable_offset(high_watermark=3) == opened
    reopened.close()
    (directory / "00000000000000000000.txnindex").unlink()
    for snapshot in directory.glob("*.snapshot"):
        snapshot.unlink()
    rebuilt = Log(directory, LogConfig(), recovery_point=0, had_clean_shutdown=False)
    assert rebuilt.collect_aborted(0, 3) == [AbortedTxn(PID, 0, 1, 2)]
    assert rebuilt.last_stable_offset(high_watermark=3) == opened
    rebuilt.close()


def test_truncation_below_a_marker_reopens_its_transaction_and_drops_its_entry(
    tmp_path: Path,
) -> None:
    log = Log(tmp_path / "t-0", LogConfig())
    plain(log)  # 0
    first = txn(log, 0)  # 1
    marker = end(log, ControlRecordType.ABORT)  # 2
    log.truncate_to(marker)
    assert log.collect_aborted(0, 10) == []
    assert log.last_stable_offset(high_watermark=2) == first
    log.close()

"""A partition's producer state under transactions: a transactional producer's first
batch opens its transaction, a marker ends it (committed or aborted), markers of older
producer or coordinator epochs are refused, and the open transactions (the first
unstable offset) survive a snapshot and a reload."""

from __future__ import annotations

from pathlib import Path

import pytest

from minibroker.protocol.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    TransactionCoordinatorFencedError,
)
from minibroker.protocol.records import (
    BatchHeader,
    ControlRecordType,
    Marker,
    Record,
    encode_batch,
    encode_marker_batch,
    read_header,
    read_marker,
)
from minibroker.storage.log import Log
from minibroker.storage.log_config import LogConfig
from minibroker.storage.producer_entries import CompletedTxn
from minibroker.storage.producer_state import ProducerStateManager

PID = 7


def txn_batch(sequence: int, count: int = 1, *, epoch: int = 0, pid: int = PID) -> BatchHeader:
    records = [Record(b"v", timestamp=1)] * count
    return read_header(
        encode_batch(
            records,
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=sequence,
            transactional=True,
        )
    )


def marker(
    kind: ControlRecordType, *, epoch: int = 0, coordinator_epoch: int = 3
) -> tuple[BatchHeader, Marker]:
    batch = encode_marker_batch(
        kind, producer_id=PID, producer_epoch=epoch, coordinator_epoch=coordinator_epoch, now_ms=1
    )
    found = read_marker(batch)
    assert found is not None
    return read_header(batch), found


def write(manager: ProducerStateManager, h: BatchHeader, offset: int) -> list[CompletedTxn]:
    pending = manager.append(validate=True)
    assert pending.add(h, offset) is None
    return pending.commit(offset + h.last_offset_delta + 1)


def end(
    manager: ProducerStateManager, found: tuple[BatchHeader, Marker], offset: int
) -> list[CompletedTxn]:
    pending = manager.append(validate=True, coordinator=True)
    pending.add_marker(found[0], offset, found[1])
    return pending.commit(offset + 1)


def test_the_first_transactional_batch_opens_the_transaction_and_its_marker_ends_it(
    tmp_path: Path,
) -> None:
    manager = ProducerStateManager(tmp_path)
    write(manager, txn_batch(0, 2), 10)
    write(manager, txn_batch(2, 3), 12)
    assert manager.first_unstable_offset() == 10
    completed = end(manager, marker(ControlRecordType.ABORT), 15)
    assert completed == [CompletedTxn(PID, 10, 15, aborted=True)]
    assert manager.first_unstable_offset() is None
    write(manager, txn_batch(5), 16)  # the next transaction of the same producer
    assert manager.first_unstable_offset() == 16
    assert end(manager, marker(ControlRecordType.COMMIT), 17) == [
        CompletedTxn(PID, 16, 17, aborted=False)
    ]


def test_the_oldest_open_transaction_is_the_first_unstable_offset(tmp_path: Path) -> None:
    manager = ProducerStateManager(tmp_path)
    write(manager, txn_batch(0, pid=1), 0)
    write(manager, txn_batch(0, pid=2), 1)
    write(manager, txn_batch(1, pid=1), 2)
    assert manager.first_unstable_offset() == 0
    pending = manager.append(validate=False)
    header, found = marker(ControlRecordType.COMMIT)
    pending.add_marker(header._replace(producer_id=1), 3, found)
    pending.commit(4)
    assert manager.first_unstable_offset() == 1


def test_a_marker_of_an_older_producer_epoch_is_refused(tmp_path: Path) -> None:
    manager = ProducerStateManager(tmp_path)
    write(manager, txn_batch(0, epoch=4), 0)
    with pytest.raises(InvalidProducerEpochError):
        end(manager, marker(ControlRecordType.COMMIT, epoch=3), 1)


def test_a_marker_of_an_older_coordinator_epoch_is_refused(tmp_path: Path) -> None:
    manager = ProducerStateManager(tmp_path)
    write(manager, txn_batch(0), 0)
    end(manager, marker(ControlRecordType.ABORT, coordinator_epoch=5), 1)
    write(manager, txn_batch(1), 2)
    with pytest.raises(TransactionCoordinatorFencedError):
        end(manager, marker(ControlRecordType.COMMIT, coordinator_epoch=4), 3)


def test_a_fencing_marker_bumps_the_epoch_so_the_zombie_is_refused(tmp_path: Path) -> None:
    manager = ProducerStateManager(tmp_path)
    write(manager, txn_batch(0, epoch=0), 0)
    end(manager, marker(ControlRecordType.ABORT, epoch=1), 1)
    with pytest.raises(InvalidProducerEpochError):
        write(manager, txn_batch(1, epoch=0), 2)
    write(manager, txn_batch(0, epoch=1), 2)  # the new producer starts at sequence 0


def test_open_transactions_survive_a_snapshot_and_reload(tmp_path: Path) -> None:
    manager = ProducerStateManager(tmp_path)
    write(manager, txn_batch(0, pid=1), 0)
    write(manager, txn_batch(0, pid=2), 1)
    end(manager, marker(ControlRecordType.ABORT, epoch=1), 2)  # PID 7: marker only
    manager.take_snapshot()
    reloaded = ProducerStateManager(tmp_path)
    reloaded.load(log_start_offset=0, log_end_offset=3, headers_from=lambda _: iter(()))
    assert reloaded.first_unstable_offset() == 0
    assert list(reloaded.state.ongoing.items()) == [(1, 0), (2, 1)]
    fenced = reloaded.last_entry(PID)
    assert fenced is not None and fenced.epoch == 1 and fenced.coordinator_epoch == 3


def test_replay_from_the_log_reopens_and_closes_transactions(tmp_path: Path) -> None:
    manager = ProducerStateManager(tmp_path)
    opened = txn_batch(0)._replace(base_offset=0)
    header, found = marker(ControlRecordType.ABORT)
    completed = manager.replay([(opened, None), (header._replace(base_offset=1), found)], 2)
    assert completed == [CompletedTxn(PID, 0, 1, aborted=True)]
    assert manager.first_unstable_offset() is None


def test_producers_may_not_send_control_batches(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", LogConfig())
    batch = encode_marker_batch(
        ControlRecordType.COMMIT, producer_id=PID, producer_epoch=0, coordinator_epoch=0, now_ms=1
    )
    with pytest.raises(InvalidRecordError):
        log.append(bytearray(batch))
    info = log.append(bytearray(batch), coordinator=True)
    assert info.first_offset == 0
    log.close()

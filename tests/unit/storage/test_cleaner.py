"""The log cleaner on a real Log in one thread: what a cleaning keeps and removes."""

from __future__ import annotations

import struct
import time
from pathlib import Path

import pytest

from minibroker.protocol.crc32c import crc32c
from minibroker.protocol.records import (
    Compression,
    ControlRecordType,
    Record,
    decode_records,
    encode_batch,
    encode_marker_batch,
)
from minibroker.protocol.records.layout import CONTROL_BIT, HEADER
from minibroker.storage.cleaner.clean import Throttle, clean_log
from minibroker.storage.cleaner.offset_map import OffsetMap
from minibroker.storage.log import Log
from minibroker.storage.segment_swap import SWAP_STEPS
from tests.unit.storage.cleaning import (
    COMPACT,
    age_segments,
    clean_once,
    contents,
    keyed,
    latest,
    new_manager,
)


def fill(log: Log, rounds: int, keys: int) -> None:
    for r in range(rounds):
        for k in range(keys):
            log.append(keyed([(b"k%d" % k, b"v%d-%d" % (k, r))], timestamp=1_000 + r))


def test_latest_value_per_key_survives_with_its_offset_and_timestamp(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", COMPACT)
    fill(log, rounds=10, keys=20)
    before = latest(contents(log))
    active_base = log.active_segment.base_offset
    result = clean_once(new_manager(log), log)
    assert result is not None and result.records_removed > 0
    after = contents(log)
    assert [o for o, _, _ in after] == sorted(o for o, _, _ in after)  # strictly increasing
    assert len({o for o, _, _ in after}) == len(after)
    cleaned = [(o, k, v) for o, k, v in after if o < active_base]
    assert len({k for _, k, _ in cleaned}) == len(cleaned)  # one record per key below the active
    assert latest(after) == before
    assert log.log_end_offset == 200
    log.close()
    reopened = Log(tmp_path / "t-0", COMPACT)  # and it reads back the same after a restart
    assert contents(reopened) == after
    reopened.close()


def test_a_second_cleaning_keeps_what_the_first_kept(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", COMPACT)
    fill(log, rounds=5, keys=10)
    manager = new_manager(log)
    clean_once(manager, log)
    fill(log, rounds=5, keys=10)
    before = latest(contents(log))
    clean_once(manager, log)
    assert latest(contents(log)) == before
    log.close()


def filler(log: Log, count: int) -> None:
    """Records of keys never seen again: cleaned segments stay full, so they are not
    merged (a merged segment takes the modification time of its last part)."""
    for _ in range(count):
        n = log.log_end_offset
        log.append(keyed([(b"f%d" % n, b"x" * 100)]))


def test_tombstones_are_kept_before_delete_retention_and_removed_after(tmp_path: Path) -> None:
    config = COMPACT.__class__(**{**_fields(COMPACT), "delete_retention_ms": 3_600_000})
    log = Log(tmp_path / "t-0", config)
    fill(log, rounds=1, keys=10)
    log.append(keyed([(b"k3", None)]))
    filler(log, 60)
    manager = new_manager(log)
    clean_once(manager, log)  # the tombstone replaces k3's value and stays
    assert latest(contents(log))[b"k3"][1] is None
    assert b"k3" not in [k for o, k, v in contents(log) if v is not None]
    age_segments(log, 7_200)  # all of that is now two hours old
    filler(log, 60)
    clean_once(manager, log)  # clean section ends two hours ago: the tombstone is young
    assert latest(contents(log))[b"k3"][1] is None
    filler(log, 60)
    clean_once(manager, log)  # clean section ends now: the tombstone is 2 h > 1 h old
    assert b"k3" not in latest(contents(log))
    assert latest(contents(log))[b"k4"] == (4, b"v4-0")
    log.close()


def test_compact_delete_applies_retention_and_compaction(tmp_path: Path) -> None:
    config = COMPACT.__class__(
        **{**_fields(COMPACT), "cleanup_policy": "compact,delete", "retention_ms": 60_000}
    )
    log = Log(tmp_path / "t-0", config, clock=lambda: 10**6)
    for r in range(10):
        for k in range(10):
            log.append(keyed([(b"k%d" % k, b"v%d" % r)], timestamp=1_000 + r * 100_000))
    clean_once(new_manager(log), log)
    keys_before = latest(contents(log))
    assert len(keys_before) == 10
    deleted = log.delete_old_segments(now_ms=10**6 + 1_000)  # retention still applies
    assert deleted > 0
    assert log.log_start_offset > 0
    log.close()


def test_compact_only_never_deletes_by_retention(tmp_path: Path) -> None:
    config = COMPACT.__class__(**{**_fields(COMPACT), "retention_ms": 1})
    log = Log(tmp_path / "t-0", config)
    fill(log, rounds=5, keys=10)
    assert log.delete_old_segments(now_ms=10**13) == 0
    log.close()


def test_a_hash_collision_never_drops_a_live_key(tmp_path: Path) -> None:
    omap = OffsetMap(1 << 20, hash_fn=lambda _key: 7)  # every key collides
    omap.put_all([b"a", b"b", b"a", b"c"], [0, 1, 2, 3])
    assert (omap.get(b"a"), omap.get(b"b"), omap.get(b"c"), omap.get(b"d")) == (2, 1, 3, -1)
    assert omap.collisions == 2
    log = Log(tmp_path / "t-0", COMPACT)
    fill(log, rounds=4, keys=30)
    before = latest(contents(log))
    clean_once(new_manager(log), log, offset_map=OffsetMap(1 << 20, hash_fn=lambda k: k[-1] % 2))
    assert latest(contents(log)) == before
    log.close()


def test_a_full_offset_map_cleans_in_several_passes(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", COMPACT)
    fill(log, rounds=6, keys=40)
    before = latest(contents(log))
    manager = new_manager(log)
    ends = []
    for _ in range(20):
        result = clean_once(manager, log, offset_map=OffsetMap(10 * 130))
        if result is None:
            break
        ends.append(result.end_offset)
        assert latest(contents(log)) == before
    assert len(ends) > 2 and ends == sorted(ends)
    log.close()


def _fields(config: object) -> dict[str, object]:
    return {name: getattr(config, name) for name in config.__dataclass_fields__}  # type: ignore[attr-defined]


class Crash(Exception):
    pass


@pytest.mark.parametrize("step", SWAP_STEPS)
def test_a_crash_at_each_swap_step_reads_back_the_old_or_the_new_segments(
    tmp_path: Path, step: str
) -> None:
    log = Log(tmp_path / "t-0", COMPACT)
    fill(log, rounds=8, keys=15)
    before = contents(log)
    manager = new_manager(log)
    assert log.topic_partition is not None
    pending = manager.choose({log.topic_partition: log})
    assert pending is not None
    result = clean_log(pending.job)

    def crash_at(at: str) -> None:
        if at == step:
            raise Crash(at)

    with pytest.raises(Crash):
        manager.finish(pending, result, crash_at)
    log.abandon()  # what kill -9 leaves: nothing flushed or closed cleanly
    reopened = Log(tmp_path / "t-0", COMPACT)
    after = contents(reopened)
    assert latest(after) == latest(before)
    offsets = [o for o, _, _ in after]
    assert offsets == sorted(set(offsets))
    if step == "cleaned":  # the swap was not decided: the old segments
        assert after == before
    else:  # decided: recovery completes it
        assert len(after) < len(before)
    leftovers = [p.name for p in reopened.dir.iterdir() if p.name.endswith((".cleaned", ".swap"))]
    assert leftovers == []
    reopened.close()


def test_a_log_truncated_under_a_cleaning_drops_the_cleaned_files(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", COMPACT)
    fill(log, rounds=8, keys=15)
    manager = new_manager(log)
    assert log.topic_partition is not None
    pending = manager.choose({log.topic_partition: log})
    assert pending is not None
    result = clean_log(pending.job)
    log.truncate_to(log.log_end_offset - 3)
    before = contents(log)
    assert not manager.finish(pending, result)
    assert contents(log) == before
    assert not [p for p in log.dir.iterdir() if p.name.endswith(".cleaned")]
    log.close()


def control_batch(producer_id: int) -> bytearray:
    """A COMMIT marker (control bit set, key version 0 type 1) of ``producer_id``."""
    raw = keyed(
        [(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00")],
        producer_id=producer_id,
        producer_epoch=0,
        base_sequence=-1,
    )
    header = HEADER.unpack_from(raw, 0)
    fields = list(header)
    fields[5] |= CONTROL_BIT
    fields[4] = 0
    head = bytearray(HEADER.pack(*fields))
    body = bytes(raw[61:])
    struct.pack_into(">I", head, 17, crc32c(body, crc32c(memoryview(head)[21:])))
    return bytearray(bytes(head) + body)


def test_control_batches_are_not_mapped_and_follow_the_delete_horizon(tmp_path: Path) -> None:
    config = COMPACT.__class__(**{**_fields(COMPACT), "delete_retention_ms": 3_600_000})
    log = Log(tmp_path / "t-0", config)
    log.append(keyed([(b"\x00\x00\x00\x01", b"data with the marker's key")]))
    log.append_as_follower(_with_offset(control_batch(9), 1))
    filler(log, 40)
    manager = new_manager(log)
    clean_once(manager, log)
    kept = contents(log)
    assert kept[0][:2] == (0, b"\x00\x00\x00\x01")  # the marker's key did not shadow it
    assert kept[1][0] == 1  # the marker stays while tombstones would
    age_segments(log, 7_200)
    filler(log, 40)
    clean_once(manager, log)
    filler(log, 40)
    clean_once(manager, log)
    assert 1 not in [o for o, _, _ in contents(log)]  # past the horizon, gone
    assert contents(log)[0][0] == 0
    log.close()


def _with_offset(raw: bytearray, offset: int) -> bytearray:
    struct.pack_into(">q", raw, 0, offset)
    return raw


def test_idempotent_producer_state_survives_cleaning_and_reload(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", COMPACT)
    for seq in range(30):  # one producer rewriting the same key: all but one batch go
        log.append(
            keyed([(b"p", b"v%d" % seq)], producer_id=5, producer_epoch=2, base_sequence=seq)
        )
    filler(log, 40)
    last_offset = log.producer_state.producers[5].last_offset
    clean_once(new_manager(log), log)
    log.close()
    for snapshot in log.dir.glob("*.snapshot"):
        snapshot.unlink()  # rebuild the producer state from the cleaned log itself
    reopened = Log(tmp_path / "t-0", COMPACT)
    entry = reopened.producer_state.producers[5]
    assert (entry.epoch, entry.last_sequence, entry.last_offset) == (2, 29, last_offset)
    retry = reopened.append(
        keyed([(b"p", b"v29")], producer_id=5, producer_epoch=2, base_sequence=29)
    )
    assert retry.duplicate and retry.first_offset == last_offset
    nxt = reopened.append(
        keyed([(b"p", b"v30")], producer_id=5, producer_epoch=2, base_sequence=30)
    )
    assert not nxt.duplicate
    reopened.close()


def test_segments_younger_than_min_compaction_lag_stay_dirty(tmp_path: Path) -> None:
    now = 10**13  # the manager's clock in these tests
    config = COMPACT.__class__(**{**_fields(COMPACT), "min_compaction_lag_ms": 3_600_000})
    log = Log(tmp_path / "t-0", config)
    for r in range(6):
        for k in range(10):
            log.append(keyed([(b"k%d" % k, b"v%d" % r)], timestamp=now - 60_000))
    assert clean_once(new_manager(log), log) is None  # a minute old: not yet
    log.close()
    old = Log(tmp_path / "u-0", config)
    fill(old, rounds=6, keys=10)  # timestamps from 1970
    assert clean_once(new_manager(old), old) is not None
    old.close()


def test_a_log_below_its_dirty_ratio_waits_unless_past_max_compaction_lag(tmp_path: Path) -> None:
    lazy = COMPACT.__class__(**{**_fields(COMPACT), "min_cleanable_dirty_ratio": 0.99})
    log = Log(tmp_path / "t-0", lazy)
    fill(log, rounds=4, keys=10)
    manager = new_manager(log)
    clean_once(manager, log)  # the first cleaning: everything was dirty (ratio 1.0)
    fill(log, rounds=4, keys=10)
    assert log.topic_partition is not None
    assert manager.choose({log.topic_partition: log}) is None
    stats = manager.dirty[log.topic_partition]
    assert 0 < stats.dirty_ratio <= 0.99 and manager.stats.max_dirty_percent > 0
    log.config = lazy.__class__(**{**_fields(lazy), "max_compaction_lag_ms": 1})
    pending = manager.choose({log.topic_partition: log})  # records are older than 1 ms
    assert pending is not None
    manager.finish(pending, None)
    log.close()


def test_the_cleaner_checkpoint_survives_a_restart_of_the_manager(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", COMPACT)
    fill(log, rounds=5, keys=10)
    manager = new_manager(log)
    result = clean_once(manager, log)
    assert result is not None and log.topic_partition is not None
    manager.write_checkpoints(manager.checkpoint_snapshot({log.topic_partition: log}))
    text = (tmp_path / "cleaner-offset-checkpoint").read_text()
    assert text == f"0\n1\nt 0 {result.end_offset}\n"
    again = new_manager(log)
    assert again.dirty_stats(log.topic_partition, log, 0).first_dirty == result.end_offset
    log.close()


def test_reading_a_cleaned_log_by_next_offset_reaches_its_end(tmp_path: Path) -> None:
    """A cleaned batch may end past its last record and a run of removed batches is
    one empty batch: a reader continues at ``FetchDataInfo.next_offset`` (the batch's
    end, as Kafka's readers do), never at its last record's offset + 1."""
    log = Log(tmp_path / "t-0", COMPACT)
    fill(log, rounds=6, keys=10)
    log.roll()  # the active segment is empty: the log ends in cleaned batches
    clean_once(new_manager(log), log)
    offset, reads, past_last_record = log.log_start_offset, 0, 0
    while offset < log.log_end_offset:
        found = log.read(offset, 1 << 20)
        assert found.next_offset > offset
        records = decode_records(found.records)
        last_record = max((r.offset for r in records), default=offset - 1)
        past_last_record += found.next_offset > last_record + 1
        offset, reads = found.next_offset, reads + 1
    assert offset == log.log_end_offset == 60 and reads <= len(log.segments)
    assert past_last_record  # where "last record + 1" would have read the same batch again
    log.close()


def test_the_cleaner_reads_no_faster_than_its_throttle() -> None:
    throttle = Throttle(bytes_per_second=10e6, parent_pid=0)
    started = time.monotonic()
    for _ in range(4):
        throttle.account(500_000)  # 2 MB at 10 MB/s: 0.2 s
    assert time.monotonic() - started >= 0.19


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP, Compression.ZSTD])
def test_batches_losing_some_records_are_rebuilt_with_their_offsets_and_timestamps(
    tmp_path: Path, codec: Compression
) -> None:
    log = Log(tmp_path / "t-0", COMPACT)
    for r in range(8):  # each batch: every key once, one timestamp per record
        records = [
            Record(b"v%d-%d" % (k, r), b"k%d" % k, timestamp=5_000 + 10 * r + k) for k in range(6)
        ]
        log.append(bytearray(encode_batch(records, compression=codec)))
    log.append(
        bytearray(encode_batch([Record(b"last", b"k0", timestamp=9_000)], compression=codec))
    )
    log.roll()
    before = {r.offset: r for r in decode_records(_all_bytes(log))}
    clean_once(new_manager(log), log)
    after = list(decode_records(_all_bytes(log)))
    assert [r.offset for r in after] == [43, 44, 45, 46, 47, 48]  # k1..k5 of round 7, then k0
    for record in after:  # each kept record exactly as written
        kept = before[record.offset]
        assert (record.key, record.value, record.timestamp) == (
            kept.key,
            kept.value,
            kept.timestamp,
        )
    log.close()


def _all_bytes(log: Log) -> bytes:
    out = b""
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        found = log.read(offset, 1 << 20)
        out += bytes(found.records)
        offset = found.next_offset
    return out


def _txn(log: Log, pairs: list[tuple[bytes, bytes]], *, pid: int, sequence: int) -> None:
    batch = encode_batch(
        [Record(v, k, timestamp=1_000) for k, v in pairs],
        producer_id=pid,
        producer_epoch=0,
        base_sequence=sequence,
        transactional=True,
    )
    log.append(bytearray(batch))


def _marker(log: Log, kind: ControlRecordType, *, pid: int) -> None:
    batch = encode_marker_batch(
        kind, producer_id=pid, producer_epoch=0, coordinator_epoch=0, now_ms=1_000
    )
    log.append(bytearray(batch), coordinator=True)


def test_compaction_removes_aborted_records_and_keeps_the_value_they_would_have_replaced(
    tmp_path: Path,
) -> None:
    log = Log(tmp_path / "t-0", COMPACT)
    log.append(keyed([(b"k", b"committed-1"), (b"j", b"committed-2")]))
    _txn(log, [(b"k", b"aborted"), (b"x", b"aborted-only")], pid=7, sequence=0)
    _marker(log, ControlRecordType.ABORT, pid=7)
    _txn(log, [(b"j", b"committed-3")], pid=8, sequence=0)
    _marker(log, ControlRecordType.COMMIT, pid=8)
    fill(log, rounds=10, keys=20)  # roll past them
    assert clean_once(new_manager(log), log) is not None
    values = {k: v for _, k, v in contents(log)}
    assert values[b"k"] == b"committed-1"  # the aborted newer value was never the latest
    assert values[b"j"] == b"committed-3"
    assert b"x" not in values and b"aborted" not in values.values()
    log.close()


def test_compaction_stops_at_an_open_transaction(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", COMPACT)
    log.append(keyed([(b"k", b"committed")]))
    _txn(log, [(b"k", b"open")], pid=9, sequence=0)  # neither committed nor aborted yet
    fill(log, rounds=10, keys=20)
    manager = new_manager(log)
    clean_once(manager, log)
    assert (0, b"k", b"committed") in contents(log)  # it may still be the latest value
    assert manager.dirty[log.topic_partition].first_uncleanable <= 1  # type: ignore[index]
    log.close()

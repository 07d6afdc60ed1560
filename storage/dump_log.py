"""``minibroker dump-log``: print segment and index files the way kafka-dump-log does.

For a ``.log``: one line per batch (baseOffset, lastOffset, count, sequences, producer,
partitionLeaderEpoch, flags, position, CreateTime/LogAppendTime, size, magic,
compresscodec, crc, isvalid), with ``--print-data-log`` one ``| offset: ...`` line per
record (keySize, valueSize, headerKeys, key and payload as UTF-8). Bytes after the last
whole batch are reported as invalid bytes at the end. Records of ``__consumer_offsets``
(a segment in a ``__consumer_offsets-N`` directory, or any with ``--offsets-decoder``)
are printed decoded: offset commits and group metadata, as kafka-dump-log's
``--offsets-decoder`` prints them (protocol/offsets_topic.py).

For a producer state ``.snapshot``: one line per producer (id, epoch, its last batch's
sequences, offsets and timestamp, its last marker's coordinator epoch and its open
transaction's first offset), as kafka-dump-log prints them. Control batches print
their marker (``endTxnMarker: COMMIT coordinatorEpoch: N``); records of
``__transaction_state`` are decoded (protocol/transaction_log.py); a ``.txnindex`` prints
one line per aborted transaction.

For a ``.index`` / ``.timeindex``: one line per entry, each checked against the
``.log`` of the same segment; mismatches are listed after the entries. With
``--verify-index-only`` only the mismatches are printed.

Exit code 0 when everything printed is valid, 1 when a batch failed its CRC, the log
has a torn tail, or an index disagrees with its log. A file that cannot be read at all
raises DumpLogError (one line on stderr, exit 1).
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import mmap
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from minibroker.protocol.errors import CorruptMessageError
from minibroker.protocol.offsets_topic import OFFSETS_TOPIC, describe_record
from minibroker.protocol.records import (
    BATCH_HEADER_SIZE,
    BatchHeader,
    TimestampType,
    decode_batch,
    read_header,
    read_marker,
    validate_batch,
)
from minibroker.protocol.transaction_log import TRANSACTION_STATE_TOPIC
from minibroker.protocol.transaction_log import describe_record as describe_transaction_record
from minibroker.storage.errors import DumpLogError
from minibroker.storage.names import INDEX_SUFFIX, LOG_SUFFIX, TXN_INDEX_SUFFIX, parse_segment_file
from minibroker.storage.offset_index import OffsetIndex
from minibroker.storage.producer_snapshot import (
    SNAPSHOT_SUFFIX,
    CorruptSnapshotError,
    decode_snapshot,
)
from minibroker.storage.time_index import TimeIndex
from minibroker.storage.txn_index import ENTRY as TXN_INDEX_ENTRY
from minibroker.storage.txn_index import decode_txn_index

RecordDecoder = Callable[[bytes | None, bytes | None], str]
"""An internal topic's record (key, value) as text."""

HELP = "print the batches, records and index entries of segment files, like kafka-dump-log"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help=".log, .index, .timeindex, .txnindex or .snapshot",
    )
    parser.add_argument(
        "--print-data-log", action="store_true", help="also print every record of each batch"
    )
    parser.add_argument(
        "--verify-index-only",
        action="store_true",
        help="for index files, print only entries that disagree with the log",
    )
    parser.add_argument(
        "--offsets-decoder",
        action="store_true",
        help="decode records as __consumer_offsets keys and values (implied for that topic)",
    )


def run(args: argparse.Namespace) -> int:
    ok = True
    for name in args.files:
        path = Path(name)
        if path.name.endswith(SNAPSHOT_SUFFIX):
            print(f"Dumping {path}")
            ok &= dump_snapshot(path)
            continue
        if path.name.endswith(TXN_INDEX_SUFFIX):
            print(f"Dumping {path}")
            ok &= dump_txn_index(path)
            continue
        base_offset, suffix = _segment_name(path)
        print(f"Dumping {path}")
        if suffix == LOG_SUFFIX:
            decoder = None
            if args.offsets_decoder or path.parent.name.startswith(f"{OFFSETS_TOPIC}-"):
                decoder = describe_record
            elif path.parent.name.startswith(f"{TRANSACTION_STATE_TOPIC}-"):
                decoder = describe_transaction_record
            ok &= dump_log(path, base_offset, print_data=args.print_data_log, decoder=decoder)
        elif suffix == INDEX_SUFFIX:
            ok &= dump_offset_index(path, base_offset, verify_only=args.verify_index_only)
        else:
            ok &= dump_time_index(path, base_offset, verify_only=args.verify_index_only)
    return 0 if ok else 1


def dump_snapshot(path: Path) -> bool:
    """One line per producer of a snapshot file; False if the file fails its checks."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DumpLogError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    try:
        entries = decode_snapshot(data)
    except CorruptSnapshotError as exc:
        print(f"invalid snapshot: {exc}")
        return False
    for entry in entries:
        first = entry.current_txn_first_offset
        line = (
            f"producerId: {entry.producer_id} producerEpoch: {entry.epoch} "
            f"coordinatorEpoch: {entry.coordinator_epoch} "
            f"currentTxnFirstOffset: {first if first >= 0 else None} "
            f"lastTimestamp: {entry.last_timestamp}"
        )
        if entry.batches:
            last = entry.batches[-1]
            line += (
                f" firstSequence: {last.first_sequence} lastSequence: {last.last_sequence}"
                f" lastOffset: {last.last_offset} offsetDelta: {last.offset_delta}"
                f" timestamp: {last.max_timestamp}"
            )
        print(line)
    return True


def dump_txn_index(path: Path) -> bool:
    """One line per aborted transaction of a ``.txnindex`` (storage/txn_index.py)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DumpLogError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    for entry in decode_txn_index(data):
        print(
            f"version: 0 producerId: {entry.producer_id} firstOffset: {entry.first_offset} "
            f"lastOffset: {entry.last_offset} lastStableOffset: {entry.last_stable_offset}"
        )
    if len(data) % TXN_INDEX_ENTRY.size:
        print(f"Found {len(data) % TXN_INDEX_ENTRY.size} invalid bytes at the end")
        return False
    return True


def _segment_name(path: Path) -> tuple[int, str]:
    parsed = parse_segment_file(path.name)
    if parsed is None:
        raise DumpLogError(
            f"{path}: not a segment file (expected <20-digit offset>.log, .index or .timeindex)"
        )
    if not path.is_file():
        raise DumpLogError(f"{path}: no such file")
    return parsed


@contextmanager
def _mapped(path: Path) -> Iterator[memoryview]:
    """The file's bytes as a read-only view (mapped: a segment can be 1 GiB)."""
    try:
        with open(path, "rb") as f:
            empty = f.seek(0, 2) == 0
            mm = None if empty else mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as exc:
        raise DumpLogError(f"{path}: {exc.strerror or exc}") from exc
    if mm is None:
        yield memoryview(b"")
        return
    try:
        yield memoryview(mm)
    finally:
        # A slice still referenced from a traceback keeps the mapping alive; the
        # garbage collector unmaps it then.
        with contextlib.suppress(BufferError):
            mm.close()


def _walk(view: memoryview) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each whole batch, stopping at the first unreadable one."""
    position = 0
    while position + BATCH_HEADER_SIZE <= len(view):
        try:
            header = read_header(view, position)
        except CorruptMessageError:
            return
        if position + header.size > len(view):
            return
        yield position, header
        position += header.size


def _bool(value: bool) -> str:
    return "true" if value else "false"


def dump_log(
    path: Path, base_offset: int, *, print_data: bool, decoder: RecordDecoder | None = None
) -> bool:
    """``decoder``: how the records of an internal topic are printed (their key and
    value decoded)."""
    print(f"Log starting offset: {base_offset}")
    ok = True
    end = 0
    with _mapped(path) as view:
        for position, h in _walk(view):
            try:
                validate_batch(view, position)
                valid = True
            except CorruptMessageError:
                valid = ok = False
            time_type = (
                "LogAppendTime"
                if h.timestamp_type == TimestampType.LOG_APPEND_TIME
                else "CreateTime"
            )
            last_sequence = h.base_sequence + h.last_offset_delta if h.base_sequence >= 0 else -1
            print(
                f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} "
                f"count: {h.record_count} baseSequence: {h.base_sequence} "
                f"lastSequence: {last_sequence} producerId: {h.producer_id} "
                f"producerEpoch: {h.producer_epoch} "
                f"partitionLeaderEpoch: {h.partition_leader_epoch} "
                f"isTransactional: {_bool(h.is_transactional)} "
                f"isControl: {_bool(h.is_control)} position: {position} "
                f"{time_type}: {h.max_timestamp} size: {h.size} magic: {h.magic} "
                f"compresscodec: {h.compression.name.lower()} crc: {h.crc} "
                f"isvalid: {_bool(valid)}"
            )
            if print_data:
                batch = view[position : position + h.size]
                _print_records(batch, time_type, h, decoder=decoder)
            end = position + h.size
        if end < len(view):
            ok = False
            print(f"Found {len(view) - end} invalid bytes at the end of {path.name}")
    return ok


def _print_records(
    batch: memoryview, time_type: str, header: BatchHeader, *, decoder: RecordDecoder | None
) -> None:
    try:
        _, records = decode_batch(batch, verify_crc=False)
    except CorruptMessageError as exc:
        print(f"| error: cannot decode records: {exc}")
        return
    for i, record in enumerate(records):
        sequence = header.base_sequence + i if header.base_sequence >= 0 else -1
        key_size = -1 if record.key is None else len(record.key)
        value_size = -1 if record.value is None else len(record.value)
        header_keys = ",".join(key for key, _ in record.headers)
        line = (
            f"| offset: {record.offset} {time_type}: {record.timestamp} keySize: {key_size} "
            f"valueSize: {value_size} sequence: {sequence} headerKeys: [{header_keys}]"
        )
        if header.is_control:
            marker = read_marker(batch)
            if marker is None:
                line += " endTxnMarker: unknown"
            else:
                line += (
                    f" endTxnMarker: {marker.kind.name}"
                    f" coordinatorEpoch: {marker.coordinator_epoch}"
                )
        elif decoder is not None:
            line += f" {decoder(record.key, record.value)}"
        else:
            if record.key is not None:
                line += f" key: {record.key.decode(errors='replace')}"
            if record.value is not None:
                line += f" payload: {record.value.decode(errors='replace')}"
        print(line)


def _batches_of_log(index_path: Path, base_offset: int) -> list[tuple[int, int, int]] | None:
    """(position, last offset, running max timestamp) per batch of the matching log."""
    log_path = index_path.with_name(f"{base_offset:020d}{LOG_SUFFIX}")
    if not log_path.is_file():
        print(f"(no {log_path.name} to verify against)")
        return None
    batches = []
    running_max = -1
    with _mapped(log_path) as view:
        for position, header in _walk(view):
            running_max = max(running_max, header.max_timestamp)
            batches.append((position, header.last_offset, running_max))
    return batches


def _entries(path: Path, entry_size: int) -> list[bytes]:
    data = path.read_bytes()
    return [data[i : i + entry_size] for i in range(0, len(data) - entry_size + 1, entry_size)]


def dump_offset_index(path: Path, base_offset: int, *, verify_only: bool) -> bool:
    batches = _batches_of_log(path, base_offset)
    by_position = {position: last for position, last, _ in batches or ()}
    mismatches = []
    previous = -1
    for raw in _entries(path, OffsetIndex.ENTRY_SIZE):
        rel, position = OffsetIndex.ENTRY.unpack(raw)
        if rel == 0 and position == 0:
            break  # the preallocated, unused tail of an active segment's index
        offset = base_offset + rel
        if not verify_only:
            print(f"offset: {offset} position: {position}")
        if offset <= previous:
            mismatches.append(f"  Index offset: {offset}, is not above previous {previous}")
        previous = offset
        if batches is not None:
            log_last = by_position.get(position)
            if log_last != offset:
                shown = "no batch starts there" if log_last is None else log_last
                mismatches.append(f"  Index offset: {offset}, log offset: {shown}")
    return _report(path, mismatches)


def dump_time_index(path: Path, base_offset: int, *, verify_only: bool) -> bool:
    batches = _batches_of_log(path, base_offset)
    lasts = [last for _, last, _ in batches or ()]
    mismatches = []
    previous = -1
    for raw in _entries(path, TimeIndex.ENTRY_SIZE):
        timestamp, rel = TimeIndex.ENTRY.unpack(raw)
        if timestamp == 0 and rel == 0:
            break  # the preallocated, unused tail
        offset = base_offset + rel
        if not verify_only:
            print(f"timestamp: {timestamp} offset: {offset}")
        if timestamp <= previous:
            mismatches.append(
                f"  Index timestamp: {timestamp}, Previously indexed timestamp: {previous}"
            )
        previous = timestamp
        if batches is not None:
            slot = bisect.bisect_left(lasts, offset)
            log_ts = batches[slot][2] if slot < len(batches) else None
            if log_ts != timestamp:
                mismatches.append(
                    f"  Index timestamp: {timestamp}, log timestamp: {log_ts} (offset {offset})"
                )
    return _report(path, mismatches)


def _report(path: Path, mismatches: list[str]) -> bool:
    if mismatches:
        print(f"Mismatches in :{path}")
        for line in mismatches:
            print(line)
    return not mismatches

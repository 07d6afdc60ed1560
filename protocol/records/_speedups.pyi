from typing import Any

from minibroker.protocol.records.types import Buffer

def decode_records(
    section: Buffer,
    base_offset: int,
    base_timestamp: int,
    max_timestamp: int,
    log_append: bool,
    count: int,
    cls: type[tuple[Any, ...]],
    prefix: tuple[Any, ...],
    suffix: tuple[Any, ...],
    /,
) -> list[Any] | None: ...
def scan_values(
    data: Buffer, start: int, stop: int, count: int, /
) -> tuple[list[int], list[int], bool] | None: ...
def count_records(buf: Buffer, start: int, end: int, /) -> int: ...
def encode_values(values: object, /) -> bytes | None: ...
def encode_records(
    records: object, timestamps: object, base_timestamp: int, cls: type[tuple[Any, ...]], /
) -> bytes | None: ...
def batch_header(buf: Buffer, pos: int, /) -> tuple[int, ...] | None: ...

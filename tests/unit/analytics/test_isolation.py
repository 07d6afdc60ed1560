"""read_committed for the segment report: which batches are an aborted transaction's."""

from __future__ import annotations

import pickle

import pytest

from minibroker.analytics.datasource import MinibrokerReader
from minibroker.analytics.isolation import AbortedTransactions
from minibroker.protocol.records import BatchHeader, encode_batch, read_header
from minibroker.protocol.records.layout import CONTROL_BIT, TRANSACTIONAL_BIT
from tests.support.spark import make_records, with_attribute_bits


def header(offset: int, producer_id: int, bits: int = TRANSACTIONAL_BIT) -> BatchHeader:
    data = encode_batch(make_records(1), base_offset=offset, producer_id=producer_id,
                        producer_epoch=0, base_sequence=0)  # fmt: skip
    return read_header(with_attribute_bits(data, bits) if bits else data)


def test_a_batch_is_dropped_only_inside_its_producers_aborted_range() -> None:
    aborted = AbortedTransactions([(7, 10, 20), (7, 40, 45), (8, 0, 5)])

    assert aborted.drops(header(10, 7)) and aborted.drops(header(20, 7))
    assert aborted.drops(header(42, 7)) and aborted.drops(header(3, 8))
    assert not aborted.drops(header(21, 7))  # the producer's next, committed transaction
    assert not aborted.drops(header(9, 7))
    assert not aborted.drops(header(12, 9))  # another producer
    assert not aborted.drops(header(12, 7, bits=0))  # not transactional
    assert not aborted.drops(header(20, 7, bits=TRANSACTIONAL_BIT | CONTROL_BIT))  # its marker
    shipped = pickle.loads(pickle.dumps(aborted))  # as Spark sends it to executors
    assert shipped.drops(header(42, 7)) and not shipped.drops(header(46, 7))
    assert not AbortedTransactions([])


def test_the_data_source_refuses_an_unknown_isolation_level() -> None:
    with pytest.raises(ValueError, match="isolation_level"):
        MinibrokerReader({"path": "/nowhere", "isolation_level": "dirty"}, "records")

"""The transactional id state machine: every move the table allows, none it does not,
and a change is pending until written."""

from __future__ import annotations

import pytest

from minibroker.transaction.metadata import (
    TRANSITIONS,
    IllegalTxnTransition,
    TransactionMetadata,
    TxnState,
    TxnValue,
)

ALL = list(TxnState)


def metadata(state: TxnState) -> TransactionMetadata:
    return TransactionMetadata("tx", TxnValue(1, 0, 60000, state, frozenset(), -1, 0))


@pytest.mark.parametrize("source", ALL)
@pytest.mark.parametrize("target", ALL)
def test_only_the_tables_moves_are_allowed(source: TxnState, target: TxnState) -> None:
    meta = metadata(source)
    if target in TRANSITIONS[source]:
        after = meta.prepare(target, 5)
        assert meta.pending is after and meta.state is source
        meta.complete(after)
        assert meta.state is target and meta.pending is None
    else:
        with pytest.raises(IllegalTxnTransition):
            meta.prepare(target, 5)


def test_a_second_change_while_one_is_pending_is_a_bug() -> None:
    meta = metadata(TxnState.EMPTY)
    meta.prepare(TxnState.ONGOING, 1)
    with pytest.raises(IllegalTxnTransition):
        meta.prepare(TxnState.ONGOING, 2)


def test_a_fence_is_in_memory_and_goes_on_to_prepare_abort_with_a_new_epoch() -> None:
    meta = metadata(TxnState.ONGOING)
    before = meta.value
    meta.fence()
    assert meta.state is TxnState.PREPARE_EPOCH_FENCE
    after = meta.prepare(TxnState.PREPARE_ABORT, 3, producer_epoch=1)
    meta.complete(after)
    assert meta.value.producer_epoch == 1 and meta.previous_epoch == 0
    other = metadata(TxnState.ONGOING)
    other.fence()
    other.unfence(before)
    assert other.state is TxnState.ONGOING


def test_an_abandoned_write_leaves_the_state_as_it_was() -> None:
    meta = metadata(TxnState.EMPTY)
    after = meta.prepare(TxnState.ONGOING, 1)
    meta.abandon(after)
    assert meta.state is TxnState.EMPTY and meta.pending is None

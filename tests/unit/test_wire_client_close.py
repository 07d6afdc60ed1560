"""The test harness's close check fails at once when a connection stays open, rather
than letting the test run into its timeout."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from tests.support.broker import assert_closed_by_peer


async def test_a_connection_the_peer_closes_passes_after_its_last_bytes() -> None:
    ours, theirs = trio.testing.memory_stream_pair()
    await theirs.send_all(b"a last answer")
    await theirs.aclose()
    await assert_closed_by_peer(ours, within_s=5)


async def test_a_connection_left_open_fails_within_the_wait() -> None:
    ours, _theirs = trio.testing.memory_stream_pair()
    with pytest.raises(AssertionError, match="kept the connection open"):
        await assert_closed_by_peer(ours, within_s=0.05)

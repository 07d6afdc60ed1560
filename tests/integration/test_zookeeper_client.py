"""ZkClient against the real ZooKeeper: errors, watches as Trio events, session expiry."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import trio

from minibroker.zk.client import (
    BadVersion,
    CheckOp,
    CreateOp,
    NodeExists,
    NoNode,
    NotEmpty,
    SetOp,
    StateChange,
    WatchEvent,
    WatchType,
    ZkClient,
    ZkConnectionLoss,
    ZkEvent,
    ZkState,
    open_zk_client,
)
from minibroker.zk.multi_read import READS_PER_REQUEST
from minibroker.zk.server import ZooKeeperServer, packets_received, pick_free_port
from tests.support.zookeeper import ExpireSession

pytestmark = pytest.mark.timeout(30)

EVENT_TIMEOUT_S = 10.0


async def next_event(
    events: trio.MemoryReceiveChannel[ZkEvent], accept: Callable[[ZkEvent], bool]
) -> ZkEvent:
    """The first event ``accept`` takes, skipping others (fails after EVENT_TIMEOUT_S)."""
    with trio.fail_after(EVENT_TIMEOUT_S):
        async for event in events:
            if accept(event):
                return event
    raise AssertionError("event channel closed")


def is_state(state: ZkState) -> Callable[[ZkEvent], bool]:
    return lambda event: isinstance(event, StateChange) and event.state is state


async def test_errors_are_our_own_exceptions(zk_client: ZkClient) -> None:
    await zk_client.create("/a/b", makepath=True)
    with pytest.raises(NodeExists) as exists:
        await zk_client.create("/a")
    assert exists.value.__cause__ is not None
    with pytest.raises(NoNode):
        await zk_client.get("/missing")
    with pytest.raises(NoNode):
        await zk_client.create("/no/parent")
    with pytest.raises(NotEmpty):
        await zk_client.delete("/a")
    await zk_client.delete("/a", recursive=True)
    assert await zk_client.exists("/a") is None


async def test_conditional_set_fails_on_a_stale_version(zk_client: ZkClient) -> None:
    await zk_client.create("/n", b"0")
    _, stat = await zk_client.get("/n")
    newer = await zk_client.set("/n", b"1", version=stat.version)
    assert newer.version == stat.version + 1
    with pytest.raises(BadVersion):
        await zk_client.set("/n", b"2", version=stat.version)
    assert (await zk_client.get("/n"))[0] == b"1"


async def test_sequential_create_returns_the_numbered_path(zk_client: ZkClient) -> None:
    await zk_client.ensure_path("/seq")
    first = await zk_client.create("/seq/item_", sequence=True)
    second = await zk_client.create("/seq/item_", sequence=True)
    assert first == "/seq/item_0000000000"
    assert second == "/seq/item_0000000001"


async def test_data_and_child_watches_arrive_on_the_channel(zk_client: ZkClient) -> None:
    events = zk_client.subscribe()
    await zk_client.create("/topics")
    assert await zk_client.get_children("/topics", watch=True) == []
    await zk_client.create("/topics/t1", b"v0")
    assert await next_event(events, lambda e: isinstance(e, WatchEvent)) == WatchEvent(
        WatchType.CHILD, "/topics"
    )

    await zk_client.get("/topics/t1", watch=True)
    await zk_client.get("/topics/t1", watch=True)  # armed twice, still fires once
    await zk_client.set("/topics/t1", b"v1")
    assert await next_event(events, lambda e: isinstance(e, WatchEvent)) == WatchEvent(
        WatchType.CHANGED, "/topics/t1"
    )

    assert await zk_client.exists("/controller", watch=True) is None
    await zk_client.create("/controller", b"1", ephemeral=True)
    assert await next_event(events, lambda e: isinstance(e, WatchEvent)) == WatchEvent(
        WatchType.CREATED, "/controller"
    )
    await zk_client.exists("/controller", watch=True)
    await zk_client.delete("/controller")
    assert await next_event(events, lambda e: isinstance(e, WatchEvent)) == WatchEvent(
        WatchType.DELETED, "/controller"
    )
    await zk_client.set("/topics/t1", b"v2")  # no watch armed any more: no event
    with trio.move_on_after(0.3):
        event = await events.receive()
        raise AssertionError(f"unexpected {event}")


async def test_ephemeral_znode_vanishes_when_its_session_closes(
    zk_client: ZkClient, zk_connect: str
) -> None:
    events = zk_client.subscribe()
    async with open_zk_client(zk_connect) as broker:
        await broker.create("/ids", b"")
        await broker.create("/ids/1", b"{}", ephemeral=True)
        assert await zk_client.get_children("/ids", watch=True) == ["1"]
    await next_event(events, lambda e: e == WatchEvent(WatchType.CHILD, "/ids"))
    assert await zk_client.get_children("/ids") == []


async def test_transaction_applies_all_or_nothing(zk_client: ZkClient) -> None:
    await zk_client.create("/epoch", b"1")
    results = await zk_client.commit(
        [CheckOp("/epoch", 0), CreateOp("/x", b"x"), SetOp("/epoch", b"2", 0)]
    )
    assert results[1] == "/x"
    assert (await zk_client.get("/epoch"))[0] == b"2"
    with pytest.raises(BadVersion):
        await zk_client.commit([CheckOp("/epoch", 0), CreateOp("/y", b"y")])
    assert await zk_client.exists("/y") is None


async def test_batched_reads_and_writes_report_each_failure(zk_client: ZkClient) -> None:
    created = await zk_client.create_many(
        [CreateOp("/p/0/state", b"a"), CreateOp("/p/1/state", b"b")], makepath=True
    )
    assert created == ["/p/0/state", "/p/1/state"]
    read = await zk_client.get_many(["/p/0/state", "/p/9/state"])
    assert isinstance(read[1], NoNode)
    assert not isinstance(read[0], BaseException) and read[0][0] == b"a"
    written = await zk_client.set_many(
        [SetOp("/p/0/state", b"a1", 0), SetOp("/p/1/state", b"b1", 7)]
    )
    assert not isinstance(written[0], BaseException) and written[0].version == 1
    assert isinstance(written[1], BadVersion)


async def test_many_reads_go_as_a_few_multi_reads_in_the_chroot(
    zk_client: ZkClient, zookeeper_server: ZooKeeperServer
) -> None:
    # A new controller reads every partition state: one request per znode cost seconds.
    count = 2 * READS_PER_REQUEST + 3
    await zk_client.create_many(
        [CreateOp(f"/r/{i}", str(i).encode()) for i in range(count)], makepath=True
    )
    paths = [f"/r/{i}" for i in range(count)] + ["/r/missing"]
    before = packets_received("127.0.0.1", zookeeper_server.port)
    read = await zk_client.get_many(paths)
    requests = packets_received("127.0.0.1", zookeeper_server.port) - before
    assert [r[0] for r in read[:-1] if not isinstance(r, BaseException)] == [
        str(i).encode() for i in range(count)
    ]
    assert isinstance(read[-1], NoNode)  # a missing znode fails alone
    assert requests <= 4  # three multiReads, maybe a ping


async def test_connecting_to_a_dead_port_fails_with_connection_loss() -> None:
    port = pick_free_port()
    with pytest.raises(ZkConnectionLoss):
        async with open_zk_client(f"127.0.0.1:{port}", connect_timeout=1.0):
            pass


@pytest.mark.timeout(45)
async def test_session_expiry_is_an_event_and_the_client_recovers(
    zk_client: ZkClient, zk_connect: str, zk_session_killer: ExpireSession
) -> None:
    events = zk_client.subscribe()
    old_session = zk_client.session_id
    await zk_client.create("/ids")
    await zk_client.create("/ids/1", b"broker", ephemeral=True)
    await zk_client.get_children("/ids", watch=True)

    await zk_session_killer(zk_client)

    expired = await next_event(events, is_state(ZkState.EXPIRED))
    assert isinstance(expired, StateChange) and expired.session_id == old_session
    reconnected = await next_event(events, is_state(ZkState.CONNECTED))
    assert isinstance(reconnected, StateChange) and reconnected.new_session
    assert reconnected.session_id not in (None, old_session)
    # A new session holds no watches and replays none: the subscriber re-arms them.
    with trio.move_on_after(0.3):
        event = await events.receive()
        raise AssertionError(f"unexpected {event}")
    # The old session's ephemeral is gone; re-registering on the new session works.
    assert await zk_client.get_children("/ids") == []
    await zk_client.create("/ids/1", b"broker", ephemeral=True)
    _, stat = await zk_client.get("/ids/1")
    assert stat.ephemeral_owner == zk_client.session_id

"""A group's coordinator broker SIGKILLed mid-group: its members find the new
coordinator (the new leader of the group's ``__consumer_offsets`` partition), keep
consuming, and no committed offset is lost."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from minibroker.client.admin import Admin
from minibroker.client.consumer import Consumer
from tests.support.cluster import LocalCluster
from tests.support.groups import (
    FAST,
    GROUP_PROPERTIES,
    Reader,
    create_topic,
    describe,
    produce,
    wait_for,
)

TOPIC, GROUP, PARTITIONS = "failover", "failover-group", 4


async def committed_offsets(bootstrap: str) -> dict[tuple[str, int], int | None]:
    async with Admin(bootstrap) as admin:
        return await admin.list_group_offsets(GROUP)


@pytest.mark.timeout(300)
async def test_members_follow_the_coordinator_to_another_broker_and_keep_their_offsets(
    tmp_path: Path,
) -> None:
    with LocalCluster(tmp_path, properties=GROUP_PROPERTIES) as cluster:
        bootstrap = cluster.bootstrap
        await create_topic(bootstrap, TOPIC, PARTITIONS)
        readers = [Reader(Consumer(bootstrap, group_id=GROUP, **FAST)) for _ in range(2)]
        for reader in readers:
            reader.consumer.subscribe([TOPIC])

        def seen() -> set[int]:
            return {int(r.value or b"") for reader in readers for r in reader.records}

        async with trio.open_nursery() as nursery:
            for reader in readers:
                await nursery.start(reader.run)
            await produce(bootstrap, TOPIC, PARTITIONS, 200, 0)
            await wait_for(lambda: len(seen()) == 200, "the first 200 records")

            async def committed_up_to(offset: int) -> bool:
                return set((await committed_offsets(bootstrap)).values()) == {offset}

            await wait_for(lambda: committed_up_to(50), "offsets 50 committed")
            coordinator = (await describe(bootstrap, GROUP)).coordinator

            await trio.to_thread.run_sync(cluster.kill_broker, coordinator)
            await produce(bootstrap, TOPIC, PARTITIONS, 200, 200)
            await wait_for(lambda: len(seen()) == 400, "every record after the kill", 120)
            await wait_for(lambda: committed_up_to(100), "offsets 100 committed", 120)

            after = await describe(bootstrap, GROUP)
            assert after.coordinator != coordinator
            assert after.state == "Stable" and len(after.members) == 2
            for reader in readers:
                reader.scope.cancel()
        assert seen() == set(range(400))

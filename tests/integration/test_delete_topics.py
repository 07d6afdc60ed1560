"""DeleteTopics waits, up to its timeout, until the controller has deleted the topic
(Kafka's DelayedDeleteTopics), against a real ZooKeeper and real brokers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from minibroker.client.admin import Admin
from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import RequestTimedOutError
from minibroker.zk.client import ZkClient
from minibroker.zk.data import KafkaZkClient
from tests.integration.test_controller import (
    _controller,
    cluster,
    create_topic_body,
    wait_until,
)
from tests.support.cli import run_cli

pytestmark = pytest.mark.timeout(90)


async def test_topic_delete_returns_once_the_topic_is_gone_so_a_list_right_after_omits_it(
    tmp_path: Path, zk_connect: str, zk_client: ZkClient
) -> None:
    async with cluster(tmp_path, zk_connect) as c:
        for name in ("gone", "kept"):
            response = await c.request(ApiKey.CREATE_TOPICS, create_topic_body(name, 3, 3))
            assert response["topics"][0]["error_code"] == 0
        bootstrap = f"127.0.0.1:{c.brokers[min(c.brokers)].port}"

        deleted = await run_cli("topic", "delete", "gone", bootstrap=bootstrap)
        assert deleted.returncode == 0, deleted.stderr
        data = KafkaZkClient(zk_client)
        assert "gone" not in await data.get_topics()
        assert "gone" not in await data.get_topic_deletions()
        assert not any(b.metadata_cache.contains("gone") for b in c.brokers.values())

        listed = await run_cli("topic", "list", "--format", "json", bootstrap=bootstrap)
        assert listed.returncode == 0, listed.stderr
        assert json.loads(listed.stdout) == ["kept"]


async def test_delete_topics_times_out_while_a_replica_broker_is_down_and_completes_after(
    tmp_path: Path, zk_connect: str, zk_client: ZkClient
) -> None:
    async with cluster(tmp_path, zk_connect) as c:
        controller_id = c.controllers()[0]
        controller = _controller(c.nodes[controller_id])
        up, down = sorted(b for b in c.brokers if b != controller_id)
        assignment = [{"partition_index": 0, "broker_ids": [up, down]}]
        body = {"topics": [{"name": "stuck", "assignments": assignment}], "timeout_ms": 10_000}
        assert (await c.request(ApiKey.CREATE_TOPICS, body))["topics"][0]["error_code"] == 0
        c.stop(down)
        await wait_until(
            lambda: down not in controller.context.live_broker_ids, "the broker's death"
        )
        data = KafkaZkClient(zk_client)

        def delete(timeout_ms: int) -> dict[str, Any]:
            return {"topic_names": ["stuck"], "timeout_ms": timeout_ms}

        marked_only = await c.request(ApiKey.DELETE_TOPICS, delete(0))
        assert marked_only["topics"][0]["error_code"] == 0
        assert "stuck" in await data.get_topic_deletions()

        timed_out = await c.request(ApiKey.DELETE_TOPICS, delete(500))
        assert timed_out["topics"][0]["error_code"] == 7  # REQUEST_TIMED_OUT
        assert "stuck" in await data.get_topics()  # the replica on `down` cannot go yet
        # The client's own wait ends before its request timeout: the broker's answer
        # (not a dropped request retried elsewhere) says why.
        async with Admin(f"127.0.0.1:{c.brokers[up].port}", request_timeout_ms=6_000) as admin:
            with pytest.raises(RequestTimedOutError, match="marked for deletion"):
                await admin.delete_topic("stuck")

        # Asked before the broker is back (its start takes far longer than this request
        # takes to reach the wait), answered when the resumed deletion completes.
        answers: list[dict[str, Any]] = []

        async def delete_and_wait() -> None:
            answers.append(await c.request(ApiKey.DELETE_TOPICS, delete(30_000)))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(delete_and_wait)
            await c.start(down)
        assert answers[0]["topics"][0]["error_code"] == 0
        assert "stuck" not in await data.get_topics()

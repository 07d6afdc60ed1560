"""A single in-process broker driven by a test playing the controller."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from minibroker.broker.config.broker_config import BrokerConfig
from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import (
    FencedLeaderEpochError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    StaleControllerEpochError,
    UnknownTopicOrPartitionError,
)
from minibroker.protocol.records import decode_records, read_header
from minibroker.storage.log_manager import CLEAN_SHUTDOWN_FILE
from tests.support.broker import (
    FakeController,
    WireClient,
    batch,
    broker_config,
    fetch_body,
    fetched,
    list_offset,
    partition_state,
    produce_body,
    produced,
    running_broker,
    values_of,
)

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def config(tmp_path: Path) -> BrokerConfig:
    return broker_config(tmp_path / "logs")


async def test_produce_assigns_offsets_and_fetch_reads_them_back(config: BrokerConfig) -> None:
    async with running_broker(config) as broker, await WireClient.connect(broker.port) as client:
        await FakeController(broker).lead("orders")
        first = await client.request(ApiKey.PRODUCE, produce_body("orders", 0, batch(b"a", b"b")))
        second = await client.request(ApiKey.PRODUCE, produce_body("orders", 0, batch(b"c")))
        assert (produced(first)["error_code"], produced(first)["base_offset"]) == (0, 0)
        assert (produced(second)["error_code"], produced(second)["base_offset"]) == (0, 2)
        response = await client.request(ApiKey.FETCH, fetch_body("orders", {0: 0}))
        partition = fetched(response)
        assert partition["error_code"] == 0
        assert partition["high_watermark"] == 3
        assert values_of(partition) == [(0, b"a"), (1, b"b"), (2, b"c")]
        headers = [read_header(partition["records"], 0)]
        assert headers[0].partition_leader_epoch == 0


async def test_fetch_offset_inside_a_batch_returns_that_whole_batch(config: BrokerConfig) -> None:
    async with running_broker(config) as broker, await WireClient.connect(broker.port) as client:
        await FakeController(broker).lead("t")
        await client.request(ApiKey.PRODUCE, produce_body("t", 0, batch(b"a", b"b", b"c")))
        await client.request(ApiKey.PRODUCE, produce_body("t", 0, batch(b"d")))
        partition = fetched(await client.request(ApiKey.FETCH, fetch_body("t", {0: 1})))
        assert values_of(partition)[0] == (0, b"a")
        assert [offset for offset, _ in values_of(partition)] == [0, 1, 2, 3]


async def test_long_poll_fetch_is_woken_by_an_append(config: BrokerConfig) -> None:
    async with running_broker(config) as broker:
        await FakeController(broker).lead("t")
        async with (
            await WireClient.connect(broker.port) as consumer,
            await WireClient.connect(broker.port) as producer,
        ):
            # A long poll that would wait a minute; the produce must end it early.
            await consumer.send_request(ApiKey.FETCH, fetch_body("t", {0: 0}, max_wait_ms=60_000))
            while not broker.parts.replica_manager.replicas.fetch_waiters.watched:
                await trio.sleep(0.001)  # until the fetch is parked (no event to wait on)
            await producer.request(ApiKey.PRODUCE, produce_body("t", 0, batch(b"wake")))
            _, response = await consumer.receive_response(ApiKey.FETCH)
            assert values_of(fetched(response)) == [(0, b"wake")]


async def test_long_poll_fetch_answers_empty_when_max_wait_passes(config: BrokerConfig) -> None:
    async with running_broker(config) as broker, await WireClient.connect(broker.port) as client:
        await FakeController(broker).lead("t")
        response = await client.request(ApiKey.FETCH, fetch_body("t", {0: 0}, max_wait_ms=50))
        assert fetched(response)["error_code"] == 0
        assert fetched(response)["records"] == b""


async def test_fetch_max_bytes_is_shared_but_the_first_batch_always_comes(
    config: BrokerConfig,
) -> None:
    async with running_broker(config) as broker, await WireClient.connect(broker.port) as client:
        await FakeController(broker).lead("t", partitions=2)
        big = batch(b"x" * 5000)
        for p in (0, 1):
            await client.request(ApiKey.PRODUCE, produce_body("t", p, big))
        response = await client.request(ApiKey.FETCH, fetch_body("t", {0: 0, 1: 0}, max_bytes=100))
        assert len(fetched(response, 0)["records"]) == len(big)
        assert fetched(response, 1)["records"] == b""


async def test_list_offsets_earliest_latest_and_by_timestamp(config: BrokerConfig) -> None:
    async with running_broker(config) as broker, await WireClient.connect(broker.port) as client:
        await FakeController(broker).lead("t")
        await client.request(ApiKey.PRODUCE, produce_body("t", 0, batch(b"a", b"b", timestamp=100)))
        await client.request(ApiKey.PRODUCE, produce_body("t", 0, batch(b"c", timestamp=500)))
        assert (await list_offset(client, "t", -2))["offset"] == 0
        assert (await list_offset(client, "t", -1))["offset"] == 3
        by_time = await list_offset(client, "t", 300)
        assert (by_time["offset"], by_time["timestamp"]) == (2, 500)
        assert (await list_offset(client, "t", 10_000))["offset"] == -1


async def test_log_append_time_topic_stamps_the_broker_clock(tmp_path: Path) -> None:
    config = broker_config(tmp_path, log_message_timestamp_type="LogAppendTime")
    async with running_broker(config) as broker, await WireClient.connect(broker.port) as client:
        await FakeController(broker).lead("t")
        response = await client.request(ApiKey.PRODUCE, produce_body("t", 0, batch(b"a")))
        append_time = produced(response)["log_append_time_ms"]
        assert append_time > 1_000_000_000_000
        partition = fetched(await client.request(ApiKey.FETCH, fetch_body("t", {0: 0})))
        [record] = decode_records(partition["records"])
        assert record.timestamp == append_time


async def test_restart_reads_back_what_was_written(config: BrokerConfig) -> None:
    async with running_broker(config) as broker, await WireClient.connect(broker.port) as client:
        await FakeController(broker).lead("t")
        await client.request(ApiKey.PRODUCE, produce_body("t", 0, batch(b"kept", b"too")))
    for log_dir in config.log_dirs:
        assert (Path(log_dir) / CLEAN_SHUTDOWN_FILE).exists()
    async with running_broker(config) as broker, await WireClient.connect(broker.port) as client:
        await FakeController(broker, epoch=2).lead("t", leader_epoch=1)
        partition = fetched(await client.request(ApiKey.FETCH, fetch_body("t", {0: 0})))
        assert values_of(partition) == [(0, b"kept"), (1, b"too")]
        response = await client.request(ApiKey.PRODUCE, produce_body("t", 0, batch(b"next")))
        assert produced(response)["base_offset"] == 2


async def test_stale_controller_epoch_is_rejected(config: BrokerConfig) -> None:
    async with running_broker(config) as broker:
        controller = FakeController(broker, epoch=5)
        await controller.lead("t")
        me = config.broker_id
        state = partition_state("t", 0, leader=me, leader_epoch=9, replicas=[me])
        stale = await controller.leader_and_isr([state], controller_epoch=4)
        assert stale["error_code"] == StaleControllerEpochError.code
        stale = await controller.update_metadata([state], controller_epoch=4)
        assert stale["error_code"] == StaleControllerEpochError.code
        stale = await controller.stop_replica([("t", 0)], delete=True, controller_epoch=4)
        assert stale["error_code"] == StaleControllerEpochError.code
        assert broker.parts.replica_manager.replicas.partitions[("t", 0)].leader_epoch == 0  # type: ignore[index]


async def test_leader_and_isr_with_an_old_leader_epoch_is_refused_per_partition(
    config: BrokerConfig,
) -> None:
    async with running_broker(config) as broker:
        controller = FakeController(broker)
        await controller.lead("t", leader_epoch=3)
        me = config.broker_id
        response = await controller.leader_and_isr(
            [partition_state("t", 0, leader=me, leader_epoch=3, replicas=[me])]
        )
        assert response["error_code"] == 0
        assert response["partition_errors"][0]["error_code"] == StaleControllerEpochError.code


async def test_fetch_errors_offset_out_of_range_unknown_partition_and_fenced_epoch(
    config: BrokerConfig,
) -> None:
    async with running_broker(config) as broker, await WireClient.connect(broker.port) as client:
        await FakeController(broker).lead("t", leader_epoch=2)
        await client.request(ApiKey.PRODUCE, produce_body("t", 0, batch(b"a")))
        beyond = fetched(await client.request(ApiKey.FETCH, fetch_body("t", {0: 5})))
        assert beyond["error_code"] == OffsetOutOfRangeError.code
        assert (beyond["log_start_offset"], beyond["high_watermark"]) == (0, 1)
        unknown = fetched(await client.request(ApiKey.FETCH, fetch_body("nope", {0: 0})))
        assert unknown["error_code"] == UnknownTopicOrPartitionError.code
        fenced = await client.request(ApiKey.FETCH, fetch_body("t", {0: 0}, leader_epoch=1))
        assert fetched(fenced)["error_code"] == FencedLeaderEpochError.code


async def test_follower_refuses_produce_and_fetch_with_not_leader(config: BrokerConfig) -> None:
    async with running_broker(config) as broker, await WireClient.connect(broker.port) as client:
        me = config.broker_id
        response = await FakeController(broker).leader_and_isr(
            [partition_state("t", 0, leader=me + 1, leader_epoch=0, replicas=[me + 1, me])]
        )
        assert response["partition_errors"][0]["error_code"] == 0
        result = await client.request(ApiKey.PRODUCE, produce_body("t", 0, batch(b"a")))
        assert produced(result)["error_code"] == NotLeaderOrFollowerError.code
        fetch = fetched(await client.request(ApiKey.FETCH, fetch_body("t", {0: 0})))
        assert fetch["error_code"] == NotLeaderOrFollowerError.code


async def test_stop_replica_stops_serving_and_delete_removes_the_log(
    config: BrokerConfig,
) -> None:
    async with running_broker(config) as broker, await WireClient.connect(broker.port) as client:
        controller = FakeController(broker)
        await controller.lead("keep")
        await controller.lead("gone")
        for topic in ("keep", "gone"):
            await client.request(ApiKey.PRODUCE, produce_body(topic, 0, batch(b"a")))
        response = await controller.stop_replica([("keep", 0)], delete=False)
        assert response["error_code"] == 0
        result = await client.request(ApiKey.PRODUCE, produce_body("keep", 0, batch(b"b")))
        assert produced(result)["error_code"] == NotLeaderOrFollowerError.code
        assert (Path(config.log_dirs[0]) / "keep-0").is_dir()
        response = await controller.stop_replica([("gone", 0)], delete=True)
        assert response["partition_errors"][0]["error_code"] == 0
        assert not any(p.name.startswith("gone-0") for p in Path(config.log_dirs[0]).iterdir())
        result = await client.request(ApiKey.PRODUCE, produce_body("gone", 0, batch(b"b")))
        assert produced(result)["error_code"] == UnknownTopicOrPartitionError.code


async def test_metadata_answers_from_the_cache_the_controller_filled(
    config: BrokerConfig,
) -> None:
    async with running_broker(config) as broker, await WireClient.connect(broker.port) as client:
        await FakeController(broker).lead("t", partitions=3)
        everything = await client.request(ApiKey.METADATA, {"topics": None})
        assert [b["node_id"] for b in everything["brokers"]] == [config.broker_id]
        assert everything["brokers"][0]["port"] == broker.port
        [topic] = everything["topics"]
        assert [p["leader_id"] for p in topic["partitions"]] == [config.broker_id] * 3
        missing = await client.request(ApiKey.METADATA, {"topics": [{"name": "absent"}]})
        assert missing["topics"][0]["error_code"] == UnknownTopicOrPartitionError.code


async def test_pipelined_responses_come_back_in_request_order(config: BrokerConfig) -> None:
    async with running_broker(config) as broker, await WireClient.connect(broker.port) as client:
        await FakeController(broker).lead("t")
        # A long poll first, then quick requests: their answers must wait behind it.
        ids = [await client.send_request(ApiKey.FETCH, fetch_body("t", {0: 0}, max_wait_ms=100))]
        for _ in range(50):
            ids.append(await client.send_request(ApiKey.METADATA, {"topics": None}))
        received = [(await client.receive_response(ApiKey.FETCH))[0]]
        for _ in range(50):
            received.append((await client.receive_response(ApiKey.METADATA))[0])
        assert received == ids


async def test_acks_zero_produce_gets_no_response_but_is_appended(config: BrokerConfig) -> None:
    async with running_broker(config) as broker, await WireClient.connect(broker.port) as client:
        await FakeController(broker).lead("t")
        await client.send_request(ApiKey.PRODUCE, produce_body("t", 0, batch(b"quiet"), acks=0))
        # The next answer on this connection is the ListOffsets one, not a produce's.
        assert (await list_offset(client, "t", -1))["offset"] == 1


async def test_retention_runs_periodically_and_moves_the_log_start(tmp_path: Path) -> None:
    config = broker_config(
        tmp_path,
        log_segment_bytes=1024,
        log_retention_bytes=2048,
        log_retention_check_interval_ms=20,
        log_segment_delete_delay_ms=0,
    )
    async with running_broker(config) as broker, await WireClient.connect(broker.port) as client:
        await FakeController(broker).lead("t")
        for i in range(12):
            await client.request(ApiKey.PRODUCE, produce_body("t", 0, batch(b"%03d" % i * 100)))
        while (await list_offset(client, "t", -2))["offset"] == 0:
            await trio.sleep(0.02)  # the retention pass is periodic: poll for its effect
        earliest = (await list_offset(client, "t", -2))["offset"]
        beyond = fetched(await client.request(ApiKey.FETCH, fetch_body("t", {0: 0})))
        assert beyond["error_code"] == OffsetOutOfRangeError.code
        assert beyond["log_start_offset"] == earliest
        kept = fetched(await client.request(ApiKey.FETCH, fetch_body("t", {0: earliest})))
        assert values_of(kept)[0][0] == earliest


async def test_metrics_endpoint_reports_traffic_and_partitions(tmp_path: Path) -> None:
    config = broker_config(tmp_path, metrics_port=0)
    async with running_broker(config) as broker, await WireClient.connect(broker.port) as client:
        await FakeController(broker).lead("m")
        await client.request(ApiKey.PRODUCE, produce_body("m", 0, batch(b"a", b"b")))
        await client.request(ApiKey.FETCH, fetch_body("m", {0: 0}))
        assert broker.metrics_server is not None
        stream = await trio.open_tcp_stream("127.0.0.1", broker.metrics_server.port)
        async with stream:
            await stream.send_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            response = b""
            while chunk := await stream.receive_some(65536):
                response += chunk
    text = response.decode()
    assert text.startswith("HTTP/1.1 200")
    assert 'kafka_server_brokertopicmetrics_messagesin_total{topic="m"} 2.0' in text
    assert 'kafka_server_brokertopicmetrics_bytesout_total{topic="m"}' in text
    assert 'kafka_network_requestmetrics_requests_total{request="Produce"} 1.0' in text
    assert "kafka_server_replicamanager_leadercount 1.0" in text
    assert 'kafka_log_log_logendoffset{partition="0",topic="m"} 2.0' in text
    assert "kafka_server_replicamanager_underminisrpartitioncount 0.0" in text
    assert 'kafka_server_delayedoperationpurgatory_purgatorysize{delayedOperation="Fetch"}' in text
    assert "kafka_server_socket_server_metrics_connection_count" in text

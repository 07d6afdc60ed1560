"""What the Kafka listener answers to ApiVersions, recorded for the report card
(docs/compatibility.md lists it) and held against what that page says."""

from __future__ import annotations

import json

import pytest
import trio

from minibroker.protocol.api import ApiKey
from minibroker.protocol.kafka.codec import MESSAGES
from tests.judges.conftest import RESULTS
from tests.judges.report import DOC, api_table
from tests.support.broker import KafkaWireClient
from tests.support.cluster import LocalCluster

pytestmark = [pytest.mark.timeout(120)]

API_VERSIONS_FILE = RESULTS.parent / "api_versions.json"


async def served(cluster: LocalCluster) -> list[dict[str, object]]:
    host, port = cluster.kafka_bootstrap.split(",")[0].rsplit(":", 1)
    async with KafkaWireClient(await trio.open_tcp_stream(host, int(port))) as client:
        answer = await client.kafka_request(ApiKey.API_VERSIONS, 3, {})
    return [
        {
            "api_key": k["api_key"],
            "name": MESSAGES[k["api_key"]].name,
            "min": k["min_version"],
            "max": k["max_version"],
        }
        for k in sorted(answer["api_keys"], key=lambda k: k["api_key"])
    ]


@pytest.mark.judge("ApiVersions", "the API keys and versions the Kafka listener serves")
async def test_the_served_api_versions_are_the_ones_the_report_card_lists(
    cluster: LocalCluster,
) -> None:
    versions = await served(cluster)
    API_VERSIONS_FILE.parent.mkdir(parents=True, exist_ok=True)
    API_VERSIONS_FILE.write_text(json.dumps(versions, indent=1))
    names = {v["name"] for v in versions}
    assert {"Produce", "Fetch", "Metadata", "ApiVersions", "JoinGroup"} <= names
    assert api_table(versions) in DOC.read_text(), (
        "docs/compatibility.md lists other API versions: run scripts/compatibility-report"
    )

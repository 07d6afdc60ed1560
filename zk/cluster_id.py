"""The cluster id: ``/cluster/id`` = ``{"version":"1","id":"<id>"}`` (Kafka's JSON,
``version`` a string there). The first broker to start creates it; every later one reads
it (Kafka's KafkaZkClient.createOrGetClusterId), so the id names the ZooKeeper data
(chroot included), not any broker.

The id is Kafka's ``Uuid.randomUuid().toString()``: a random UUID's 16 bytes in URL-safe
base64 without padding (22 characters).
"""

from __future__ import annotations

import base64
import contextlib
import json
import uuid

from minibroker.zk.client import NodeExists, NoNode, ZkClient
from minibroker.zk.values import ZkDataError

CLUSTER_ID_PATH = "/cluster/id"


def new_cluster_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")


def encode_cluster_id(cluster_id: str) -> bytes:
    return json.dumps({"version": "1", "id": cluster_id}, separators=(",", ":")).encode()


def decode_cluster_id(data: bytes) -> str:
    try:
        value = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ZkDataError(f"{CLUSTER_ID_PATH}: not JSON: {data[:80]!r}") from exc
    cluster_id = value.get("id") if isinstance(value, dict) else None
    if not isinstance(cluster_id, str) or not cluster_id:
        raise ZkDataError(f"{CLUSTER_ID_PATH}: no id in {data[:80]!r}")
    return cluster_id


async def get_or_create_cluster_id(zk: ZkClient) -> str:
    """The cluster id, created by whichever broker gets there first."""
    try:
        data, _ = await zk.get(CLUSTER_ID_PATH)
        return decode_cluster_id(data)
    except NoNode:
        pass
    with contextlib.suppress(NodeExists):  # another broker won the race: its id counts
        await zk.create(CLUSTER_ID_PATH, encode_cluster_id(new_cluster_id()), makepath=True)
    data, _ = await zk.get(CLUSTER_ID_PATH)
    return decode_cluster_id(data)

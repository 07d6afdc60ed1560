"""IncrementalAlterConfigs (KIP-339): edit a topic's or a broker's dynamic config key
by key.

How this works: the resource's current override set is read from ZooKeeper
(``/config/topics/T``, ``/config/brokers/<id>`` or ``<default>``), each operation is
applied to it in request order - SET replaces a key, DELETE removes it, APPEND and
SUBTRACT add or remove items of a list key (``cleanup.policy``, the throttled-replica
lists), starting from the key's current value - and the result is checked and written
exactly as AlterConfigs writes a whole set (broker/admin/topic_configs.py,
broker/admin/broker_configs.py), so every broker applies it through the same change
notification. Like Kafka's ZooKeeper-era brokers, two concurrent edits of one resource
race: the last write wins.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from minibroker.broker.admin.broker_configs import broker_entity, read_broker_config
from minibroker.broker.admin.topic_configs import validate_topic_overrides
from minibroker.broker.cluster.assignment import validate_topic_name
from minibroker.broker.config.config_describe import is_list_key
from minibroker.broker.config.config_keys import config_text
from minibroker.broker.requests.dispatcher import Deferred, RequestDispatcher
from minibroker.protocol.api import RequestHeader
from minibroker.protocol.errors import (
    NONE,
    InvalidConfigError,
    InvalidRequestError,
    KafkaError,
    MinibrokerError,
    UnknownTopicOrPartitionError,
)
from minibroker.protocol.messages import bodies
from minibroker.protocol.messages.admin import OP_APPEND, OP_DELETE, OP_SET, OP_SUBTRACT
from minibroker.protocol.messages.cluster import RESOURCE_BROKER, RESOURCE_TOPIC

if TYPE_CHECKING:
    from minibroker.broker.admin.topic_configs import TopicConfigs
    from minibroker.zk.data import KafkaZkClient

log = logging.getLogger(__name__)


def apply_operations(
    current: Mapping[str, str],
    ops: Sequence[bodies.IncrementalAlterConfigsRequestResourceConfig],
    value_of: Callable[[str], str],
) -> dict[str, str]:
    """``current`` with ``ops`` applied in order; ``value_of(name)`` is a key's value
    when it has no override (what APPEND and SUBTRACT start from). A key named twice is
    INVALID_REQUEST, APPEND or SUBTRACT of a key that is not a list INVALID_CONFIG."""
    names = [op["name"] for op in ops]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise InvalidRequestError(f"config {twice[0]} appears twice")
    configs = dict(current)
    for op in ops:
        name, code, value = op["name"], op["config_operation"], op["value"]
        if code == OP_DELETE:
            configs.pop(name, None)
            continue
        if code not in (OP_SET, OP_APPEND, OP_SUBTRACT):
            raise InvalidRequestError(f"unknown config operation {code} for {name}")
        if value is None:
            raise InvalidRequestError(f"config {name}: a null value is only for DELETE")
        if code == OP_SET:
            configs[name] = value
            continue
        if not is_list_key(name):
            verb = "append" if code == OP_APPEND else "subtract"
            raise InvalidConfigError(f"cannot {verb} to {name}: it is not a list")
        old = configs.get(name, value_of(name))
        items = [item.strip() for item in old.split(",") if item.strip()]
        given = [item.strip() for item in value.split(",") if item.strip()]
        if code == OP_APPEND:
            items += [item for item in given if item not in items]
        else:
            items = [item for item in items if item not in given]
        configs[name] = ",".join(items)
    return configs


class IncrementalAlterConfigs:
    """The IncrementalAlterConfigs handler of one broker (any broker answers it)."""

    def __init__(self, topic_configs: TopicConfigs, *, zk: KafkaZkClient | None) -> None:
        self.topic_configs = topic_configs
        self._zk = zk

    def install(self, dispatcher: RequestDispatcher) -> None:
        dispatcher.register(bodies.INCREMENTAL_ALTER_CONFIGS, self.handle)

    def handle(
        self, header: RequestHeader, request: bodies.IncrementalAlterConfigsRequest
    ) -> Deferred[bodies.IncrementalAlterConfigsResponse]:
        async def answer() -> bodies.IncrementalAlterConfigsResponse:
            responses = [
                await self._alter(resource, request["validate_only"])
                for resource in request["resources"]
            ]
            return {"throttle_time_ms": 0, "responses": responses}

        return Deferred(answer)

    async def _alter(
        self, resource: bodies.IncrementalAlterConfigsRequestResource, validate_only: bool
    ) -> bodies.IncrementalAlterConfigsResponseResponse:
        result: bodies.IncrementalAlterConfigsResponseResponse = {
            "resource_type": resource["resource_type"],
            "resource_name": resource["resource_name"],
        }
        try:
            data = self._zk
            if data is None:
                raise InvalidRequestError("a standalone broker has no ZooKeeper to keep configs")
            if resource["resource_type"] == RESOURCE_TOPIC:
                await self._alter_topic(data, resource, validate_only)
            elif resource["resource_type"] == RESOURCE_BROKER:
                await self._alter_broker(data, resource, validate_only)
            else:
                raise InvalidRequestError(
                    f"resource type {resource['resource_type']} is not supported;"
                    f" only topics ({RESOURCE_TOPIC}) and brokers ({RESOURCE_BROKER})"
                )
        except KafkaError as exc:
            return result | {"error_code": exc.code, "error_message": exc.message}
        except MinibrokerError as exc:  # ZooKeeper trouble: retriable for the client
            message = f"cannot change the config of {resource['resource_name']!r}: {exc}"
            return result | {"error_code": KafkaError.code, "error_message": message}
        return result | {"error_code": NONE, "error_message": None}

    async def _alter_topic(
        self,
        data: KafkaZkClient,
        resource: bodies.IncrementalAlterConfigsRequestResource,
        validate_only: bool,
    ) -> None:
        topic = resource["resource_name"]
        validate_topic_name(topic)
        if await data.get_assignment(topic) is None:
            raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
        current = await data.get_topic_config(topic)
        inherited = self.topic_configs.config.topic_config()

        def value_of(name: str) -> str:
            return config_text(getattr(inherited, name.replace(".", "_"), ""))

        configs = apply_operations(current, resource["configs"], value_of)
        validate_topic_overrides(self.topic_configs.config, configs)
        if not validate_only:
            await data.set_topic_config(topic, configs, notify=True)
            log.info("topic %s config overrides set to %s", topic, configs)

    async def _alter_broker(
        self,
        data: KafkaZkClient,
        resource: bodies.IncrementalAlterConfigsRequestResource,
        validate_only: bool,
    ) -> None:
        broker_configs = self.topic_configs.broker_configs
        if broker_configs is None:
            raise InvalidRequestError("this broker keeps no dynamic broker configs")
        entity = broker_entity(resource["resource_name"])
        current = await read_broker_config(data, entity)
        effective = broker_configs.effective

        def value_of(name: str) -> str:
            return config_text(getattr(effective, name.replace(".", "_"), ""))

        configs = apply_operations(current, resource["configs"], value_of)
        await broker_configs.replace(entity, configs, validate_only)

"""DescribeClientQuotas and AlterClientQuotas (KIP-546), and keeping every broker's
client quotas (broker/quotas/client_quotas.py) equal to ZooKeeper's.

How this works: quotas live where ZooKeeper-era Kafka keeps them (zk/client_quotas.py).
Each broker reads every quota before its listeners open, then re-reads them whenever a
/config/changes notification names a user or client entity, and on every new
ZooKeeper session; the broker that altered them re-reads before it answers, so the
client that asked sees its change there at once. Describe answers from ZooKeeper.

A filter component matches an entity part of its type: ``match_type`` 0 that name, 1
the type's default, 2 any (including the default); ``strict`` leaves out entities with
parts of other types. Keys are Kafka's ``producer_byte_rate``, ``consumer_byte_rate``
(bytes/s, > 0) and ``request_percentage`` (percent of one thread, > 0); an unknown key
or entity type is INVALID_REQUEST. Who may call them is broker/security/authorization.py's
business (DescribeConfigs / AlterConfigs on the cluster, as Kafka).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import trio

from minibroker.broker.quotas.client_quotas import ClientQuotas
from minibroker.broker.requests.dispatcher import Deferred, RequestDispatcher
from minibroker.protocol.api import RequestHeader
from minibroker.protocol.errors import NONE, InvalidRequestError, KafkaError, MinibrokerError
from minibroker.protocol.messages import bodies
from minibroker.protocol.messages.admin import MATCH_ANY, MATCH_DEFAULT, MATCH_EXACT
from minibroker.zk.client_quotas import (
    CLIENT_ID,
    QUOTA_KEYS,
    USER,
    QuotaEntity,
    alter_quotas,
    read_all_quotas,
)

if TYPE_CHECKING:
    from minibroker.zk.data import KafkaZkClient
    from minibroker.zk.types import ZkEvent

log = logging.getLogger(__name__)

ENTITY_TYPES = (USER, CLIENT_ID)


def parse_entity(parts: list[bodies.AlterClientQuotasRequestEntryEntity]) -> QuotaEntity:
    """The entity a request names, user part first; INVALID_REQUEST for an unknown or
    repeated type."""
    by_type: dict[str, str | None] = {}
    for part in parts:
        kind = part["entity_type"]
        if kind not in ENTITY_TYPES or kind in by_type:
            raise InvalidRequestError(f"unknown or repeated quota entity type {kind!r}")
        by_type[kind] = part["entity_name"]
    if not by_type:
        raise InvalidRequestError("a quota entity needs a user or a client-id")
    return tuple((kind, by_type[kind]) for kind in ENTITY_TYPES if kind in by_type)


def matches(entity: QuotaEntity, request: bodies.DescribeClientQuotasRequest) -> bool:
    parts = dict(entity)
    for component in request["components"]:
        kind = component["entity_type"]
        if kind not in parts:
            return False
        name = parts[kind]
        match_type = component["match_type"]
        if match_type == MATCH_EXACT and name != component["match"]:
            return False
        if match_type == MATCH_DEFAULT and name is not None:
            return False
    named = {c["entity_type"] for c in request["components"]}
    return not request["strict"] or set(parts) <= named


class ClientQuotaApis:
    """The client quota APIs of one broker and what keeps its quotas current."""

    def __init__(self, quotas: ClientQuotas, zk: KafkaZkClient | None = None) -> None:
        self.quotas = quotas
        self.zk = zk  # set by the broker once its session is open

    def install(self, dispatcher: RequestDispatcher) -> None:
        dispatcher.register(bodies.DESCRIBE_CLIENT_QUOTAS, self.handle_describe)
        dispatcher.register(bodies.ALTER_CLIENT_QUOTAS, self.handle_alter)
        dispatcher.quotas = self.quotas

    def _data(self) -> KafkaZkClient:
        if self.zk is None:
            raise KafkaError("a standalone broker has no ZooKeeper to keep quotas")
        return self.zk

    def handle_describe(
        self, header: RequestHeader, request: bodies.DescribeClientQuotasRequest
    ) -> Deferred[bodies.DescribeClientQuotasResponse]:
        async def answer() -> bodies.DescribeClientQuotasResponse:
            try:
                for component in request["components"]:
                    if component["entity_type"] not in ENTITY_TYPES or component[
                        "match_type"
                    ] not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY):
                        raise InvalidRequestError(f"unsupported quota filter {component}")
                configs = await read_all_quotas(self._data().zk)
            except KafkaError as exc:
                return _describe_error(exc)
            except MinibrokerError as exc:
                return _describe_error(KafkaError(str(exc)))
            entries: list[bodies.DescribeClientQuotasResponseEntry] = [
                {
                    "entity": [{"entity_type": k, "entity_name": n} for k, n in entity],
                    "values": [{"key": k, "value": v} for k, v in sorted(values.items())],
                }
                for entity, values in sorted(configs.items(), key=_entity_order)
                if matches(entity, request)
            ]
            return {
                "throttle_time_ms": 0,
                "error_code": NONE,
                "error_message": None,
                "entries": entries,
            }

        return Deferred(answer)

    def handle_alter(
        self, header: RequestHeader, request: bodies.AlterClientQuotasRequest
    ) -> Deferred[bodies.AlterClientQuotasResponse]:
        async def answer() -> bodies.AlterClientQuotasResponse:
            results = [
                await self._alter(entry, request["validate_only"]) for entry in request["entries"]
            ]
            if any(r["error_code"] == NONE for r in results) and not request["validate_only"]:
                await self._reload_quietly()
            return {"throttle_time_ms": 0, "entries": results}

        return Deferred(answer)

    async def _alter(
        self, entry: bodies.AlterClientQuotasRequestEntry, validate_only: bool
    ) -> bodies.AlterClientQuotasResponseEntry:
        result: bodies.AlterClientQuotasResponseEntry = {
            "error_code": NONE,
            "error_message": None,
            "entity": [dict(part) for part in entry["entity"]],  # type: ignore[misc]
        }
        try:
            entity = parse_entity(entry["entity"])
            set_: dict[str, float] = {}
            remove: set[str] = set()
            for op in entry["ops"]:
                key = op["key"]
                if key not in QUOTA_KEYS:
                    raise InvalidRequestError(f"unknown client quota key {key!r}")
                if key in set_ or key in remove:
                    raise InvalidRequestError(f"quota key {key!r} given twice")
                if op["remove"]:
                    remove.add(key)
                elif not op["value"] > 0:
                    raise InvalidRequestError(f"quota {key} must be > 0, not {op['value']}")
                else:
                    set_[key] = float(op["value"])
            if not validate_only:
                await alter_quotas(self._data().zk, entity, set_, remove)
                log.info("client quotas of %s: set %s, removed %s", entity, set_, sorted(remove))
        except KafkaError as exc:
            return result | {"error_code": exc.code, "error_message": exc.message}
        except MinibrokerError as exc:
            return result | {"error_code": KafkaError.code, "error_message": str(exc)}
        return result

    # -- keeping the quotas current --------------------------------------------------------

    async def reload(self) -> None:
        data = self.zk
        if data is not None:
            self.quotas.update(await read_all_quotas(data.zk))

    async def _reload_quietly(self) -> None:
        try:
            await self.reload()
        except MinibrokerError as exc:
            log.warning("cannot read client quotas: %s", exc)

    async def run(
        self,
        zk: KafkaZkClient,
        events: trio.MemoryReceiveChannel[ZkEvent],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """A session service: follow /config/changes for user and client entities."""
        from minibroker.zk.config_changes import config_change_entity, config_change_names
        from minibroker.zk.model import CONFIG_CHANGES_PATH
        from minibroker.zk.types import StateChange, WatchEvent, WatchType, ZkError, ZkState

        self.zk = zk
        last = max(await config_change_names(zk.zk, watch=True), default="")
        await self._reload_quietly()
        task_status.started()
        async for event in events:
            if isinstance(event, WatchEvent):
                if event.path != CONFIG_CHANGES_PATH or event.type is not WatchType.CHILD:
                    continue
            elif not (isinstance(event, StateChange) and event.state is ZkState.CONNECTED):
                continue
            try:
                names = await config_change_names(zk.zk, watch=True)
                fresh = [n for n in names if n > last]
                paths = [f"{CONFIG_CHANGES_PATH}/{n}" for n in fresh]
                changed = isinstance(event, StateChange) and event.new_session
                for path, found in zip(paths, await zk.zk.get_many(paths), strict=True):
                    if isinstance(found, ZkError):
                        continue
                    entity = config_change_entity(found[0], path)
                    changed = changed or (
                        entity is not None and entity.startswith(("users/", "clients/"))
                    )
                if changed:
                    await self.reload()
                if fresh:
                    last = fresh[-1]
            except MinibrokerError as exc:  # the reconnect replays from ``last``
                log.warning("cannot apply client quota changes: %s", exc)


def _entity_order(item: tuple[QuotaEntity, object]) -> tuple[tuple[str, str], ...]:
    return tuple((kind, name or "") for kind, name in item[0])


def _describe_error(error: KafkaError) -> bodies.DescribeClientQuotasResponse:
    return {
        "throttle_time_ms": 0,
        "error_code": error.code,
        "error_message": error.message,
        "entries": None,
    }

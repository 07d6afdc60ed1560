"""The client quota calls of the bundled client: DescribeClientQuotas and
AlterClientQuotas (KIP-546). ``minibroker quotas`` and ``minibroker configs
--entity-type users|clients`` are built on these.

An entity is a mapping of entity type (``user``, ``client-id``) to a name, None for
the type's default entity.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from minibroker.client.errors import raise_if_error
from minibroker.client.metadata import ClusterClient
from minibroker.protocol.api import ApiKey
from minibroker.protocol.messages.admin import MATCH_ANY, MATCH_DEFAULT, MATCH_EXACT

Entity = Mapping[str, str | None]


async def describe_client_quotas(
    cluster: ClusterClient, entity: Entity | None = None, *, strict: bool = False
) -> list[tuple[dict[str, str | None], dict[str, float]]]:
    """(entity, quota values) of every entity matching ``entity`` (None: all)."""
    components: list[dict[str, object]] = [
        {
            "entity_type": kind,
            "match_type": MATCH_DEFAULT if name is None else MATCH_EXACT,
            "match": name,
        }
        for kind, name in (entity or {}).items()
    ]
    if not components:
        components = [{"entity_type": "user", "match_type": MATCH_ANY, "match": None}]
        found = await _describe(cluster, components, strict=False)
        components = [{"entity_type": "client-id", "match_type": MATCH_ANY, "match": None}]
        found += [e for e in await _describe(cluster, components, False) if e not in found]
        return found
    return await _describe(cluster, components, strict)


async def _describe(
    cluster: ClusterClient, components: list[dict[str, object]], strict: bool
) -> list[tuple[dict[str, str | None], dict[str, float]]]:
    body = {"components": components, "strict": strict}
    response = await cluster.request_any(ApiKey.DESCRIBE_CLIENT_QUOTAS, body)
    raise_if_error(response["error_code"], "describe client quotas", response["error_message"])
    return [
        (
            {part["entity_type"]: part["entity_name"] for part in entry["entity"]},
            {value["key"]: value["value"] for value in entry["values"]},
        )
        for entry in response["entries"] or ()
    ]


async def alter_client_quotas(
    cluster: ClusterClient,
    entity: Entity,
    set_: Mapping[str, float],
    remove: Iterable[str] = (),
) -> None:
    """Set and remove quota keys of one entity; raises its refusal."""
    ops = [{"key": k, "value": float(v), "remove": False} for k, v in set_.items()]
    ops += [{"key": k, "value": 0.0, "remove": True} for k in remove]
    body = {
        "entries": [
            {
                "entity": [{"entity_type": k, "entity_name": n} for k, n in entity.items()],
                "ops": ops,
            }
        ],
        "validate_only": False,
    }
    response = await cluster.request_any(ApiKey.ALTER_CLIENT_QUOTAS, body)
    for entry in response["entries"]:
        raise_if_error(entry["error_code"], f"quotas of {dict(entity)}", entry["error_message"])

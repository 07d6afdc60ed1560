"""The ACL admin calls of the bundled client: DescribeAcls, CreateAcls, DeleteAcls.

Any broker answers them (ACLs live in ZooKeeper and every broker applies changes
through its change notifications); ``minibroker acl`` is built on these.
"""

from __future__ import annotations

from collections.abc import Sequence

from minibroker.client.errors import raise_if_error
from minibroker.client.metadata import ClusterClient
from minibroker.protocol.acls import (
    AclBinding,
    AclBindingFilter,
    binding_from_body,
    creation_body,
    entry_order,
    filter_body,
)
from minibroker.protocol.api import ApiKey


async def describe_acls(cluster: ClusterClient, selector: AclBindingFilter) -> list[AclBinding]:
    """Every binding ``selector`` matches, ordered by resource pattern then entry."""
    response = await cluster.request_any(ApiKey.DESCRIBE_ACLS, filter_body(selector))
    raise_if_error(response["error_code"], "describe ACLs", response.get("error_message"))
    bindings = [
        binding_from_body(
            {
                "resource_type": resource["resource_type"],
                "resource_name": resource["resource_name"],
                "pattern_type": resource["pattern_type"],
                **acl,
            }
        )
        for resource in response["resources"]
        for acl in resource["acls"]
    ]
    return sorted(bindings, key=lambda b: (str(b.pattern), entry_order(b.entry)))


async def create_acls(cluster: ClusterClient, bindings: Sequence[AclBinding]) -> None:
    """Store ``bindings``; raises the first refusal."""
    body = {"creations": [creation_body(b) for b in bindings]}
    response = await cluster.request_any(ApiKey.CREATE_ACLS, body)
    raise_if_error(response.get("error_code", 0), "create ACLs", response.get("error_message"))
    for binding, result in zip(bindings, response["results"], strict=True):
        raise_if_error(result["error_code"], f"ACL {binding}", result.get("error_message"))


async def delete_acls(
    cluster: ClusterClient, selectors: Sequence[AclBindingFilter]
) -> list[AclBinding]:
    """Remove what each selector matches; returns the bindings removed."""
    body = {"filters": [filter_body(s) for s in selectors]}
    response = await cluster.request_any(ApiKey.DELETE_ACLS, body)
    raise_if_error(response.get("error_code", 0), "delete ACLs", response.get("error_message"))
    removed: list[AclBinding] = []
    for result in response["filter_results"]:
        raise_if_error(result["error_code"], "delete ACLs", result.get("error_message"))
        removed += [binding_from_body(acl) for acl in result["matching_acls"]]
    return removed

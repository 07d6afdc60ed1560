"""The SCRAM user calls of the bundled client: DescribeUserScramCredentials and
AlterUserScramCredentials (KIP-554). ``minibroker users`` and ``minibroker configs
--entity-type users`` are built on these.

The password never leaves the client: an upsertion sends a fresh random salt and the
salted password (Hi(password, salt, iterations)), as Kafka's clients do.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping

from minibroker.client.errors import raise_if_error
from minibroker.client.metadata import ClusterClient
from minibroker.protocol.api import ApiKey
from minibroker.protocol.errors import ResourceNotFoundError
from minibroker.protocol.sasl import (
    DEFAULT_ITERATIONS,
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    salted_password,
)

MECHANISM_CODES = {SCRAM_SHA_256: 1, SCRAM_SHA_512: 2}
"""Kafka's ScramMechanism codes."""
SALT_BYTES = 32
"""Bytes of a fresh salt (as Kafka's ScramFormatter)."""


async def describe_scram_users(
    cluster: ClusterClient, names: Iterable[str] | None = None
) -> dict[str, dict[str, int]]:
    """User -> {mechanism: iterations}; every user when ``names`` is None. A named user
    without credentials is left out."""
    users = None if names is None else [{"name": n} for n in names]
    response = await cluster.request_any(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, {"users": users})
    raise_if_error(response["error_code"], "describe users", response.get("error_message"))
    by_code = {code: name for name, code in MECHANISM_CODES.items()}
    found: dict[str, dict[str, int]] = {}
    for result in response["results"]:
        if result["error_code"] == ResourceNotFoundError.code:
            continue
        raise_if_error(result["error_code"], f"user {result['user']!r}", result["error_message"])
        found[result["user"]] = {
            by_code.get(c["mechanism"], str(c["mechanism"])): c["iterations"]
            for c in result["credential_infos"]
        }
    return found


async def alter_scram_users(
    cluster: ClusterClient,
    *,
    passwords: Mapping[tuple[str, str], str] | None = None,
    deletions: Iterable[tuple[str, str]] = (),
    iterations: int = DEFAULT_ITERATIONS,
) -> None:
    """Set ``passwords`` ((user, mechanism) -> password) and remove ``deletions``
    ((user, mechanism)); raises the first user's refusal."""
    upsertions = []
    for (user, mechanism), password in (passwords or {}).items():
        salt = secrets.token_bytes(SALT_BYTES)
        upsertions.append(
            {
                "name": user,
                "mechanism": MECHANISM_CODES[mechanism],
                "iterations": iterations,
                "salt": salt,
                "salted_password": salted_password(mechanism, password, salt, iterations),
            }
        )
    body = {
        "deletions": [{"name": u, "mechanism": MECHANISM_CODES[m]} for u, m in deletions],
        "upsertions": upsertions,
    }
    response = await cluster.request_any(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, body)
    for result in response["results"]:
        raise_if_error(result["error_code"], f"user {result['user']!r}", result["error_message"])

"""DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554): SCRAM users
through Kafka's admin APIs, on every broker.

How this works: the credentials live where logins read them, ``/config/users/<name>``
(zk/scram_users.py). A client never sends a password: an upsertion carries the salt,
the iteration count and the salted password (Hi(password, salt, i)); the broker derives
the stored and server keys from it (protocol/sasl.py) and keeps only those, as Kafka
does. Each user named is checked as a whole - an empty name, an iteration count
outside [4096, 16384] or an empty salt is UNACCEPTABLE_CREDENTIAL (a salt of any other
length is taken, as Kafka takes it; logins, protocol/scram_server.py, need no minimum),
an unknown mechanism UNSUPPORTED_SASL_MECHANISM, one mechanism of a user named twice
DUPLICATE_RESOURCE, the deletion of a credential the user does not have
RESOURCE_NOT_FOUND - and, when
all its operations pass, written in one znode write with a change notification. The
answering broker re-reads the user before it answers, so a login there succeeds as soon
as the client has its answer; every other broker follows the notification
(broker/security/credentials.py). Describing lists mechanisms and iterations, never a key.

Who may call them is broker/security/authorization.py's business (Describe / Alter on the
cluster, as Kafka).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from minibroker.broker.requests.dispatcher import Deferred, RequestDispatcher
from minibroker.protocol.api import RequestHeader
from minibroker.protocol.errors import (
    NONE,
    DuplicateResourceError,
    KafkaError,
    MinibrokerError,
    ResourceNotFoundError,
    UnacceptableCredentialError,
    UnsupportedSaslMechanismError,
)
from minibroker.protocol.messages import bodies
from minibroker.protocol.sasl import (
    DEFAULT_ITERATIONS,
    MAX_ITERATIONS,
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    credential_from_salted,
    format_scram_credential,
)
from minibroker.zk.scram_users import alter_scram_credentials, read_all_credentials

if TYPE_CHECKING:
    from minibroker.broker.security.credentials import CredentialCache
    from minibroker.zk.data import KafkaZkClient

log = logging.getLogger(__name__)

MECHANISMS_BY_CODE = {1: SCRAM_SHA_256, 2: SCRAM_SHA_512}
"""Kafka's ScramMechanism codes (0 is UNKNOWN)."""
CODES_BY_MECHANISM = {name: code for code, name in MECHANISMS_BY_CODE.items()}


class ScramApis:
    """The two SCRAM admin APIs of one broker."""

    def __init__(self, zk: KafkaZkClient | None, credentials: CredentialCache) -> None:
        self._zk = zk
        self.credentials = credentials

    def install(self, dispatcher: RequestDispatcher) -> None:
        dispatcher.register(bodies.DESCRIBE_USER_SCRAM_CREDENTIALS, self.handle_describe)
        dispatcher.register(bodies.ALTER_USER_SCRAM_CREDENTIALS, self.handle_alter)

    def _data(self) -> KafkaZkClient:
        if self._zk is None:
            raise KafkaError("a standalone broker has no ZooKeeper to keep users")
        return self._zk

    # -- DescribeUserScramCredentials ------------------------------------------------------

    def handle_describe(
        self, header: RequestHeader, request: bodies.DescribeUserScramCredentialsRequest
    ) -> Deferred[bodies.DescribeUserScramCredentialsResponse]:
        async def answer() -> bodies.DescribeUserScramCredentialsResponse:
            response: bodies.DescribeUserScramCredentialsResponse = {
                "throttle_time_ms": 0,
                "error_code": NONE,
                "error_message": None,
                "results": [],
            }
            try:
                users = await read_all_credentials(self._data().zk)
            except (KafkaError, MinibrokerError) as exc:
                failed = exc if isinstance(exc, KafkaError) else KafkaError(str(exc))
                return response | {"error_code": failed.code, "error_message": failed.message}
            asked = [u["name"] for u in request["users"] or ()] or sorted(users)
            for name in dict.fromkeys(asked):
                result: bodies.DescribeUserScramCredentialsResponseResult = {
                    "user": name,
                    "error_code": NONE,
                    "error_message": None,
                    "credential_infos": [],
                }
                if asked.count(name) > 1:
                    error: KafkaError = DuplicateResourceError(f"user {name!r} asked twice")
                    result |= {"error_code": error.code, "error_message": error.message}
                elif name not in users:
                    error = ResourceNotFoundError(f"user {name!r} has no SCRAM credential")
                    result |= {"error_code": error.code, "error_message": error.message}
                else:
                    result["credential_infos"] = [
                        {"mechanism": CODES_BY_MECHANISM[m], "iterations": c.iterations}
                        for m, c in sorted(users[name].items())
                    ]
                response["results"].append(result)
            return response

        return Deferred(answer)

    # -- AlterUserScramCredentials ---------------------------------------------------------

    def handle_alter(
        self, header: RequestHeader, request: bodies.AlterUserScramCredentialsRequest
    ) -> Deferred[bodies.AlterUserScramCredentialsResponse]:
        async def answer() -> bodies.AlterUserScramCredentialsResponse:
            names = [op["name"] for op in (*request["deletions"], *request["upsertions"])]
            results = [await self._alter_user(name, request) for name in dict.fromkeys(names)]
            return {"throttle_time_ms": 0, "results": results}

        return Deferred(answer)

    async def _alter_user(
        self, name: str, request: bodies.AlterUserScramCredentialsRequest
    ) -> bodies.AlterUserScramCredentialsResponseResult:
        deletions = [d for d in request["deletions"] if d["name"] == name]
        upsertions = [u for u in request["upsertions"] if u["name"] == name]
        try:
            if not name:
                raise UnacceptableCredentialError("the user name must not be empty")
            mechanisms = [_mechanism(op["mechanism"]) for op in (*deletions, *upsertions)]
            if len(set(mechanisms)) != len(mechanisms):
                raise DuplicateResourceError(f"a mechanism of user {name!r} is named twice")
            upserts: dict[str, str] = {}
            for op in upsertions:
                iterations = op["iterations"]
                if not DEFAULT_ITERATIONS <= iterations <= MAX_ITERATIONS:
                    raise UnacceptableCredentialError(
                        f"iterations must be in [{DEFAULT_ITERATIONS}, {MAX_ITERATIONS}],"
                        f" not {iterations}"
                    )
                if not op["salt"] or not op["salted_password"]:
                    raise UnacceptableCredentialError("the salt and salted password must be set")
                mechanism = _mechanism(op["mechanism"])
                credential = credential_from_salted(
                    mechanism, op["salt"], op["salted_password"], iterations
                )
                upserts[mechanism] = format_scram_credential(credential)
            data = self._data()
            removed = [_mechanism(op["mechanism"]) for op in deletions]
            if removed:
                held = (await read_all_credentials(data.zk)).get(name, {})
                missing = sorted(set(removed) - held.keys())
                if missing:
                    raise ResourceNotFoundError(f"user {name!r} has no {missing[0]} credential")
            await alter_scram_credentials(data.zk, name, upserts, removed)
            await self.credentials.reload(data, name)
            log.info("SCRAM user %s: set %s, removed %s", name, sorted(upserts), removed)
        except KafkaError as exc:
            return {"user": name, "error_code": exc.code, "error_message": exc.message}
        except MinibrokerError as exc:  # ZooKeeper trouble
            return {"user": name, "error_code": KafkaError.code, "error_message": str(exc)}
        return {"user": name, "error_code": NONE, "error_message": None}


def _mechanism(code: int) -> str:
    mechanism = MECHANISMS_BY_CODE.get(code)
    if mechanism is None:
        raise UnsupportedSaslMechanismError(f"unknown SCRAM mechanism {code}")
    return mechanism

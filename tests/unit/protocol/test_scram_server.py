"""The server's side of a SCRAM exchange: a short salt (Kafka takes any), channel
binding and foreign authorization ids refused. The client is RFC 5802's arithmetic
written out (scramp's client refuses salts under 12 bytes)."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from minibroker.protocol.sasl import credential_from_salted, salted_password
from minibroker.protocol.scram_server import ScramError, ScramServerExchange

SALT = b"salt"  # librdkafka's 0081_admin upserts this one
PASSWORD = "password"
ITERATIONS = 4096


def server() -> ScramServerExchange:
    salted = salted_password("SCRAM-SHA-256", PASSWORD, SALT, ITERATIONS)
    credential = credential_from_salted("SCRAM-SHA-256", SALT, salted, ITERATIONS)

    def auth_info(user: str) -> tuple[bytes, bytes, bytes, int]:
        assert user == "alice"
        return credential.salt, credential.stored_key, credential.server_key, ITERATIONS

    return ScramServerExchange("sha256", "server-nonce", auth_info)


def client_final(server_first: str, bare: str, password: str, gs2: str = "n,,") -> str:
    fields = dict(part.split("=", 1) for part in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(
        "sha256", password.encode(), base64.b64decode(fields["s"]), int(fields["i"])
    )
    client_key = hmac.digest(salted, b"Client Key", "sha256")
    stored_key = hashlib.sha256(client_key).digest()
    without_proof = f"c={base64.b64encode(gs2.encode()).decode()},r={fields['r']}"
    auth_message = f"{bare},{server_first},{without_proof}".encode()
    signature = hmac.digest(stored_key, auth_message, "sha256")
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    return f"{without_proof},p={base64.b64encode(proof).decode()}"


def test_a_four_byte_salt_logs_in_and_the_server_signs_the_exchange() -> None:
    exchange, bare = server(), "n=alice,r=client-nonce"
    server_first = exchange.first(f"n,,{bare}")
    assert server_first == "r=client-nonceserver-nonce,s=c2FsdA==,i=4096"
    final = exchange.final(client_final(server_first, bare, PASSWORD))
    assert final.startswith("v=") and len(base64.b64decode(final[2:])) == 32


def test_a_wrong_password_fails_at_the_proof() -> None:
    exchange, bare = server(), "n=alice,r=client-nonce"
    server_first = exchange.first(f"n,,{bare}")
    with pytest.raises(ScramError, match="invalid client proof"):
        exchange.final(client_final(server_first, bare, "wrong"))


@pytest.mark.parametrize(
    ("client_first", "why"),
    [
        ("p=tls-unique,,n=alice,r=x", "channel binding"),
        ("n,a=bob,n=alice,r=x", "authorization id"),
        ("n,,r=x,n=alice", "start with n= and r="),
        ("n=alice,r=x", "malformed|gs2"),
    ],
)
def test_what_kafka_refuses_in_a_client_first_is_refused(client_first: str, why: str) -> None:
    with pytest.raises(ScramError, match=why):
        server().first(client_first)

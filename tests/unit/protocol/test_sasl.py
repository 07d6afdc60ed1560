"""protocol/sasl.py: SCRAM credentials in Kafka's text form, both sides of PLAIN and
SCRAM, and every way a login fails looking the same from outside."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from minibroker.protocol.errors import SaslAuthenticationFailedError
from minibroker.protocol.sasl import (
    FAILED,
    MECHANISMS,
    SCRAM_MECHANISMS,
    SaslClient,
    SaslServer,
    ScramCredential,
    format_scram_credential,
    make_scram_credential,
    parse_scram_credential,
)

PASSWORDS = {"alice": "alice-pw", "o,dd=name": "pw2"}
CREDENTIALS = {
    (mechanism, user): make_scram_credential(mechanism, password)
    for mechanism in SCRAM_MECHANISMS
    for user, password in PASSWORDS.items()
}


def lookup(mechanism: str, user: str) -> ScramCredential | None:
    return CREDENTIALS.get((mechanism, user))


def exchange(mechanism: str, user: str, password: str) -> SaslServer:
    server, client = SaslServer(mechanism, lookup), SaslClient(mechanism, user, password)
    token: bytes | None = client.first()
    while token is not None:
        token = client.step(server.step(token))
    assert client.complete
    return server


def test_a_credential_round_trips_through_kafkas_text_form() -> None:
    credential = make_scram_credential("SCRAM-SHA-256", "pw", salt=b"0123456789abcdef")
    text = format_scram_credential(credential)
    assert text.startswith(f"salt={base64.b64encode(b'0123456789abcdef').decode()},stored_key=")
    assert text.endswith(",iterations=4096")
    assert "pw" not in text.split("iterations")[0].replace("stored_key", "")
    assert parse_scram_credential(text) == credential


@pytest.mark.parametrize("text", ["", "salt=!!,stored_key=a,server_key=b,iterations=1", "salt=AA"])
def test_a_malformed_credential_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_scram_credential(text)


@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("user", sorted(PASSWORDS))
def test_the_right_password_logs_in_with_every_mechanism(mechanism: str, user: str) -> None:
    server = exchange(mechanism, user, PASSWORDS[user])
    assert (server.complete, server.user) == (True, user)


@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize(("user", "password"), [("alice", "nope"), ("mallory", "alice-pw")])
def test_a_wrong_password_and_an_unknown_user_fail_alike(
    mechanism: str, user: str, password: str
) -> None:
    with pytest.raises(SaslAuthenticationFailedError) as failed:
        exchange(mechanism, user, password)
    assert str(failed.value) == FAILED


def test_an_unknown_scram_user_gets_a_stable_salt_like_a_known_one() -> None:
    def server_first(user: str) -> str:
        client = SaslClient("SCRAM-SHA-256", user, "x")
        return SaslServer("SCRAM-SHA-256", lookup).step(client.first()).decode()

    salts = [dict(p.split("=", 1) for p in server_first("mallory").split(","))["s"]]
    salts.append(dict(p.split("=", 1) for p in server_first("mallory").split(","))["s"])
    assert salts[0] == salts[1]  # asking twice does not reveal a made-up credential


def test_a_token_after_completion_or_garbage_fails() -> None:
    server = exchange("PLAIN", "alice", "alice-pw")
    with pytest.raises(SaslAuthenticationFailedError):
        server.step(b"\x00alice\x00alice-pw")
    for token in (b"no-nuls", b"\xff\x00a\x00b", b"bob\x00alice\x00alice-pw"):
        with pytest.raises(SaslAuthenticationFailedError):
            SaslServer("PLAIN", lookup).step(token)
    with pytest.raises(SaslAuthenticationFailedError):
        SaslServer("SCRAM-SHA-512", lookup).step(b"not a client-first")


def test_a_client_final_nonce_prefixed_with_the_client_nonce_is_accepted_as_kafka_does() -> None:
    """librdkafka 2.0 repeats the client nonce in front of the server's nonce; Kafka
    checks that the sent nonce ends with its own, and so do we (the proof, computed
    over the message as sent, still decides)."""
    server = SaslServer("SCRAM-SHA-256", lookup)
    client_first_bare = "n=alice,r=clientnonce"
    server_first = server.step(b"n,," + client_first_bare.encode()).decode()
    fields = dict(part.split("=", 1) for part in server_first.split(","))
    without_proof = f"c=biws,r=clientnonce{fields['r']}"
    salted = hashlib.pbkdf2_hmac("sha256", b"alice-pw", base64.b64decode(fields["s"]), 4096)
    client_key = hmac.digest(salted, b"Client Key", "sha256")
    message = f"{client_first_bare},{server_first},{without_proof}".encode()
    signature = hmac.digest(hashlib.sha256(client_key).digest(), message, "sha256")
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    final = f"{without_proof},p={base64.b64encode(proof).decode()}".encode()
    assert server.step(final).startswith(b"v=")
    assert (server.complete, server.user) == (True, "alice")


def test_a_client_final_with_a_nonce_not_ending_in_the_servers_fails() -> None:
    server = SaslServer("SCRAM-SHA-256", lookup)
    server.step(b"n,,n=alice,r=clientnonce")
    with pytest.raises(SaslAuthenticationFailedError):
        server.step(b"c=biws,r=clientnonceFORGED,p=AAAA")

"""The server's side of one SCRAM exchange (RFC 5802, SCRAM-SHA-256/512 of RFC 7677), by
Kafka's rules.

How this works: two messages each way. The client-first names the user and brings the
client's nonce; the answer (server-first) adds the server's nonce, the user's salt and
iteration count. The client-final repeats the gs2 header and the whole nonce and carries
the proof, ClientKey XOR HMAC(StoredKey, AuthMessage); the server recovers ClientKey,
checks H(ClientKey) against the stored key (constant time) and answers with its own
signature, HMAC(ServerKey, AuthMessage). AuthMessage is the client-first without its gs2
header, the server-first and the client-final without its proof, comma-joined, each as
sent.

Kafka's rules where the RFC leaves room: no channel binding (``p=`` is refused); an
authorization id must be the user itself; extensions after the nonce are allowed (and
ignored); the client-final nonce must *end with* the server-first one (some clients
send the client nonce again in front); and a salt of any length is taken, as Kafka's
admin API stores whatever salt a client chose (librdkafka's own tests use 4 bytes).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Callable

AuthInfo = Callable[[str], tuple[bytes, bytes, bytes, int]]
"""User name as sent (saslname) -> (salt, stored key, server key, iterations)."""


class ScramError(Exception):
    """The exchange cannot go on; the message says why (for the server's log)."""


class ScramServerExchange:
    """``first(client_first)`` gives the server-first message, ``final(client_final)``
    the server-final one once the proof verifies; ScramError otherwise."""

    def __init__(self, hash_name: str, server_nonce: str, auth_info: AuthInfo) -> None:
        self.hash_name = hash_name
        self.server_nonce = server_nonce
        self.auth_info = auth_info
        self._gs2_header = ""
        self._nonce = ""
        self._first_messages = ""  # client-first-bare "," server-first
        self._keys: tuple[bytes, bytes] = (b"", b"")  # stored key, server key

    def first(self, client_first: str) -> str:
        cbind, authzid, bare = _split_gs2(client_first)
        if cbind not in ("n", "y"):
            raise ScramError("channel binding is not supported")
        attributes = _attributes(bare)
        if len(attributes) < 2 or attributes[0][0] != "n" or attributes[1][0] != "r":
            raise ScramError("client-first must start with n= and r=")
        user, client_nonce = attributes[0][1], attributes[1][1]
        if not user or not client_nonce:
            raise ScramError("client-first has an empty user or nonce")
        if authzid and authzid != f"a={user}":
            raise ScramError("an authorization id other than the user")
        salt, stored_key, server_key, iterations = self.auth_info(user)
        self._gs2_header = f"{cbind},{authzid},"
        self._nonce = client_nonce + self.server_nonce
        self._keys = (stored_key, server_key)
        server_first = f"r={self._nonce},s={_b64(salt)},i={iterations}"
        self._first_messages = f"{bare},{server_first}"
        return server_first

    def final(self, client_final: str) -> str:
        if not self._nonce:
            raise ScramError("client-final before client-first")
        without_proof, separator, proof_text = client_final.rpartition(",p=")
        if not separator:
            raise ScramError("client-final has no proof")
        attributes = _attributes(without_proof)
        if len(attributes) < 2 or attributes[0][0] != "c" or attributes[1][0] != "r":
            raise ScramError("client-final must start with c= and r=")
        if attributes[0][1] != _b64(self._gs2_header.encode()):
            raise ScramError("client-final channel binding differs from the gs2 header")
        if not attributes[1][1].endswith(self._nonce):
            raise ScramError("client-final nonce does not end with the server-first nonce")
        try:
            proof = base64.b64decode(proof_text, validate=True)
        except binascii.Error as exc:
            raise ScramError(f"client proof is not base64: {exc}") from exc
        stored_key, server_key = self._keys
        auth_message = f"{self._first_messages},{without_proof}".encode()
        signature = hmac.digest(stored_key, auth_message, self.hash_name)
        if len(proof) != len(signature):
            raise ScramError("client proof has the wrong length")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self.hash_name, client_key).digest(), stored_key):
            raise ScramError("invalid client proof")
        return f"v={_b64(hmac.digest(server_key, auth_message, self.hash_name))}"


def _split_gs2(message: str) -> tuple[str, str, str]:
    """(channel-binding flag, authzid attribute or "", client-first-bare)."""
    parts = message.split(",", 2)
    if len(parts) != 3:
        raise ScramError("client-first has no gs2 header")
    return parts[0], parts[1], parts[2]


def _attributes(text: str) -> list[tuple[str, str]]:
    """``k=v`` pairs in order; ScramError on anything else."""
    pairs = []
    for part in text.split(","):
        key, separator, value = part.partition("=")
        if not separator or len(key) != 1 or not key.isalpha():
            raise ScramError(f"malformed SCRAM attribute {part!r}")
        pairs.append((key, value))
    return pairs


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()

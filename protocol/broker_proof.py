"""How a broker proves its id on an inter-broker connection: the one home of the
scheme's format facts (docs/architecture.md, "Who may command a broker").

Every broker owns an Ed25519 key pair (broker/security/identity_key.py keeps it in its first
log dir) and publishes the public half in its ZooKeeper registration,
``/brokers/ids/<id>`` (``identity_key``: ``public_key_text``). A connection proves
itself right after TLS and SASL:

    connecting broker                          serving broker
    BrokerChallenge {}                  ->
                                        <-  {nonce: 32 fresh random bytes, broker_id: S}
    BrokerProof {broker_id: C,
                 signature: sign(payload(nonce, C, S))}  ->
                                        <-  {error_code}: checked against the key
                                            /brokers/ids/C publishes

``payload`` binds the signature to this purpose (``CONTEXT``: no other signature the
key makes can pass for a proof), to the nonce (fresh per challenge and good once: a
recorded proof is worth nothing) and to both ids (a proof made for one broker is no
proof to another). What the connection may then do as broker C is the serving
broker's business (broker/security/controller_fence.py).
"""

from __future__ import annotations

import base64
import struct
from typing import Final

CONTEXT: Final = b"minibroker inter-broker identity proof v1\0"
"""What a proof's signature is for: no other message signed with the key starts so."""

NONCE_BYTES: Final = 32
"""Random bytes per challenge: never repeated, never guessed."""

REGISTRATION_FIELD: Final = "identity_key"
"""The key of the public key in a /brokers/ids/<id> registration's JSON."""


def payload(nonce: bytes, prover_id: int, verifier_id: int) -> bytes:
    """What the connecting broker ``prover_id`` signs for ``verifier_id``'s ``nonce``."""
    return CONTEXT + struct.pack(">ii", prover_id, verifier_id) + nonce


def public_key_text(raw: bytes) -> str:
    """A raw 32-byte Ed25519 public key as it is written in the registration."""
    return base64.b64encode(raw).decode("ascii")


def verify(
    public_key: str, nonce: bytes, prover_id: int, verifier_id: int, signature: bytes
) -> bool:
    """Whether ``signature`` proves ``prover_id`` to ``verifier_id`` for ``nonce``, with
    ``public_key`` the text its registration publishes (a malformed one proves nothing)."""
    # Imported here, not at the top: zk/model.py reads REGISTRATION_FIELD, and the znode
    # formats must import with the standard library alone (tests/integration/
    # test_package_install.py imports them in a venv without dependencies).
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        key = Ed25519PublicKey.from_public_bytes(base64.b64decode(public_key, validate=True))
        key.verify(signature, payload(nonce, prover_id, verifier_id))
    except (InvalidSignature, ValueError, TypeError):
        return False
    return True

"""BrokerKey: the broker's identity key pair, kept in its first log dir.

The private half signs the broker's identity proofs on the connections it opens to
other brokers (protocol/broker_proof.py); the public half goes into its ZooKeeper
registration, where every other broker looks it up. Made on the broker's first start
(``IDENTITY_KEY_FILE``, PKCS#8 PEM, mode 0600, written to a temporary name and
renamed, so a crash leaves no half key) and read on every later one: the key lives as
long as the broker's data, so a restarted broker proves itself with the key its
registration publishes again. A file that exists but is no Ed25519 key stops the start
with a ConfigError naming it, rather than silently becoming another identity.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from minibroker.protocol import broker_proof
from minibroker.protocol.errors import ConfigError
from minibroker.storage.checkpoint import write_atomically

IDENTITY_KEY_FILE: Final = "broker-identity.key"


class BrokerKey:
    """One broker's identity: its id and key pair (``sign`` is ``net``'s prover)."""

    def __init__(self, broker_id: int, key: Ed25519PrivateKey) -> None:
        self.broker_id = broker_id
        self._key = key
        raw = key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        self.public_key = broker_proof.public_key_text(raw)
        """What the registration publishes."""

    def sign(self, payload: bytes) -> bytes:
        return self._key.sign(payload)

    @classmethod
    def load_or_create(cls, broker_id: int, log_dir: str | Path) -> BrokerKey:
        """The key kept in ``log_dir``, made there first if missing (blocking: run in
        a thread, with the log dir locked)."""
        path = Path(log_dir) / IDENTITY_KEY_FILE
        try:
            pem = path.read_bytes()
        except FileNotFoundError:
            key = Ed25519PrivateKey.generate()
            _write_private(path, key)
            return cls(broker_id, key)
        except OSError as exc:
            raise ConfigError(f"cannot read the broker identity key {path}: {exc}") from exc
        try:
            loaded = serialization.load_pem_private_key(pem, password=None)
        except ValueError as exc:
            raise ConfigError(f"{path} is not a broker identity key: {exc}") from exc
        if not isinstance(loaded, Ed25519PrivateKey):
            raise ConfigError(f"{path} is not an Ed25519 key")
        return cls(broker_id, loaded)


def _write_private(path: Path, key: Ed25519PrivateKey) -> None:
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    write_atomically(path, pem, mode=0o600)

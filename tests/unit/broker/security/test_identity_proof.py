"""The brokers' identity proof: the key kept in the log dir
(broker/security/identity_key.py), the signed payload (protocol/broker_proof.py) and the
serving side (broker/security/peer_identity.py)."""

from __future__ import annotations

import stat
from dataclasses import dataclass
from pathlib import Path

import pytest

from minibroker.broker.requests.dispatcher import Deferred
from minibroker.broker.security.identity_key import IDENTITY_KEY_FILE, BrokerKey
from minibroker.broker.security.peer_identity import NOT_PROVEN, PeerProofs
from minibroker.protocol import broker_proof
from minibroker.protocol.api import RequestHeader
from minibroker.protocol.errors import ClusterAuthorizationFailedError, ConfigError
from minibroker.protocol.session import ANONYMOUS, PeerBroker, Session
from minibroker.zk.values import BrokerInfo

ME = 1
CLAIMED = 2


def test_the_key_is_made_once_private_and_read_back_the_same(tmp_path: Path) -> None:
    made = BrokerKey.load_or_create(ME, tmp_path)
    path = tmp_path / IDENTITY_KEY_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    again = BrokerKey.load_or_create(ME, tmp_path)
    assert again.public_key == made.public_key
    assert BrokerKey.load_or_create(ME, tmp_path / "..").public_key != made.public_key


def test_a_file_that_is_no_key_stops_the_start_naming_it(tmp_path: Path) -> None:
    (tmp_path / IDENTITY_KEY_FILE).write_text("not a key")
    with pytest.raises(ConfigError, match=IDENTITY_KEY_FILE):
        BrokerKey.load_or_create(ME, tmp_path)


def test_a_signature_proves_exactly_its_nonce_ids_and_key(tmp_path: Path) -> None:
    key = BrokerKey.load_or_create(CLAIMED, tmp_path)
    nonce = b"n" * broker_proof.NONCE_BYTES
    signature = key.sign(broker_proof.payload(nonce, CLAIMED, ME))
    assert broker_proof.verify(key.public_key, nonce, CLAIMED, ME, signature)
    other = BrokerKey.load_or_create(CLAIMED, tmp_path / "..")
    wrong = [
        (key.public_key, b"m" * broker_proof.NONCE_BYTES, CLAIMED, ME),  # another challenge
        (key.public_key, nonce, 3, ME),  # another prover
        (key.public_key, nonce, CLAIMED, 3),  # meant for another broker
        (other.public_key, nonce, CLAIMED, ME),  # another broker's key
        ("not base64!", nonce, CLAIMED, ME),
    ]
    for public_key, n, prover, verifier in wrong:
        assert not broker_proof.verify(public_key, n, prover, verifier, signature)
    # A signature of the bare payload, without the context, is no proof.
    bare = key.sign(broker_proof.payload(nonce, CLAIMED, ME)[len(broker_proof.CONTEXT) :])
    assert not broker_proof.verify(key.public_key, nonce, CLAIMED, ME, bare)


@dataclass
class FakeRegistry:
    brokers: dict[int, BrokerInfo]

    async def get_broker(self, broker_id: int) -> BrokerInfo | None:
        return self.brokers.get(broker_id)


def header(peer: PeerBroker) -> RequestHeader:
    return RequestHeader(1000, 0, 1, "c", Session(ANONYMOUS, "127.0.0.1", "PLAINTEXT", peer))


async def prove(proofs: PeerProofs, peer: PeerBroker, key: BrokerKey, claimed: int) -> int:
    challenge = proofs.handle_challenge(header(peer), {})
    if challenge["error_code"]:
        return challenge["error_code"]
    signature = key.sign(broker_proof.payload(challenge["nonce"], claimed, ME))
    answer = proofs.handle_proof(header(peer), {"broker_id": claimed, "signature": signature})
    assert isinstance(answer, Deferred)
    body = await answer.wait()
    assert body is not None
    return body["error_code"]


async def test_a_connection_becomes_the_broker_whose_registered_key_signed(
    tmp_path: Path,
) -> None:
    key = BrokerKey.load_or_create(CLAIMED, tmp_path)
    registered = BrokerInfo(CLAIMED, (), epoch=77, identity_key=key.public_key)
    proofs = PeerProofs(FakeRegistry({CLAIMED: registered}), ME)  # type: ignore[arg-type]
    peer = PeerBroker()
    assert await prove(proofs, peer, key, CLAIMED) == 0
    assert (peer.broker_id, peer.broker_epoch, peer.nonce) == (CLAIMED, 77, None)
    # Proven once: no second challenge on that connection.
    assert proofs.handle_challenge(header(peer), {})["error_code"] == 31


async def test_wrong_keys_missing_keys_and_replays_prove_nothing(tmp_path: Path) -> None:
    key = BrokerKey.load_or_create(CLAIMED, tmp_path)
    stranger = BrokerKey.load_or_create(CLAIMED, tmp_path / "..")
    registry = FakeRegistry(
        {
            CLAIMED: BrokerInfo(CLAIMED, (), epoch=77, identity_key=key.public_key),
            3: BrokerInfo(3, (), epoch=78),  # registered without a key (an old broker)
        }
    )
    proofs = PeerProofs(registry, ME)  # type: ignore[arg-type]
    refused = ClusterAuthorizationFailedError.code
    for signer, claimed in ((stranger, CLAIMED), (key, 3), (key, 4)):
        peer = PeerBroker()
        assert await prove(proofs, peer, signer, claimed) == refused
        assert peer.broker_id == -1
    # A proof without a challenge (or a replayed one after its challenge was used).
    peer = PeerBroker()
    signature = key.sign(broker_proof.payload(b"x" * 32, CLAIMED, ME))
    answer = proofs.handle_proof(header(peer), {"broker_id": CLAIMED, "signature": signature})
    assert answer == {"error_code": refused, "error_message": NOT_PROVEN}
    # A standalone broker takes no proof at all.
    assert PeerProofs(None, ME).handle_challenge(header(PeerBroker()), {})["error_code"] == refused

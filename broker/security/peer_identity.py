"""PeerProofs: the serving side of the brokers' identity proof (protocol/broker_proof.py).

BrokerChallenge gives the connection a fresh nonce (``os.urandom``, good for one proof);
BrokerProof checks the signature against the key the claimed broker's ZooKeeper
registration publishes, read from ZooKeeper at that moment (never from a cache a
forged UpdateMetadata could have filled), and on success marks the connection as that
broker (``Session.peer``, which the controller fence and the replica checks read).
Both are served on the inter-broker listener only; the Kafka listener cannot even
decode them.

Every refusal is CLUSTER_AUTHORIZATION_FAILED with one fixed message: nothing in it
depends on what was claimed or what ZooKeeper holds. A connection proves itself once;
a second challenge is refused. A standalone broker has no registry of keys and takes
no proof.
"""

from __future__ import annotations

import logging
import os
from typing import Final

from minibroker.broker.requests.dispatcher import Answer, Deferred, RequestDispatcher
from minibroker.broker.requests.log_limiter import LogRateLimiter
from minibroker.protocol import broker_proof
from minibroker.protocol.api import RequestHeader
from minibroker.protocol.errors import NONE, ClusterAuthorizationFailedError
from minibroker.protocol.messages import bodies
from minibroker.zk.data import KafkaZkClient

log = logging.getLogger(__name__)
_refusals = LogRateLimiter(log)  # anyone may try

NOT_PROVEN: Final = "the broker identity proof failed"
REFUSED: Final = ClusterAuthorizationFailedError


class PeerProofs:
    def __init__(self, zk: KafkaZkClient | None, broker_id: int) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.proven = 0
        self.refused = 0

    def install(self, dispatcher: RequestDispatcher, *, listener: str) -> None:
        dispatcher.register(bodies.BROKER_CHALLENGE, self.handle_challenge, listener=listener)
        dispatcher.register(bodies.BROKER_PROOF, self.handle_proof, listener=listener)

    def handle_challenge(
        self, header: RequestHeader, request: bodies.BrokerChallengeRequest
    ) -> bodies.BrokerChallengeResponse:
        peer = header.session.peer
        if self.zk is None or peer is None or peer.broker_id >= 0:
            self._refused(header, "no proof can be taken on this connection")
            return {"error_code": REFUSED.code, "error_message": NOT_PROVEN}
        peer.nonce = os.urandom(broker_proof.NONCE_BYTES)
        return {"error_code": NONE, "nonce": peer.nonce, "broker_id": self.broker_id}

    def handle_proof(
        self, header: RequestHeader, request: bodies.BrokerProofRequest
    ) -> Answer[bodies.BrokerProofResponse]:
        peer = header.session.peer
        zk = self.zk
        nonce = None if peer is None else peer.nonce
        if peer is None or zk is None or nonce is None:
            self._refused(header, "a proof without a challenge")
            return _refusal()
        peer.nonce = None  # one proof per challenge, right or wrong
        claimed = request["broker_id"]
        signature = request["signature"]

        async def check() -> bodies.BrokerProofResponse:
            info = await zk.get_broker(claimed)
            if info is None or info.identity_key is None:
                self._refused(header, f"broker {claimed} has no registered identity key")
                return _refusal()
            if not broker_proof.verify(
                info.identity_key, nonce, claimed, self.broker_id, signature
            ):
                self._refused(header, f"a signature that is not broker {claimed}'s")
                return _refusal()
            peer.broker_id, peer.broker_epoch = claimed, info.epoch
            self.proven += 1
            log.info(
                "connection from %s proved to be broker %d", header.session.client_host, claimed
            )
            return {"error_code": NONE}

        return Deferred(check)

    def _refused(self, header: RequestHeader, why: str) -> None:
        self.refused += 1
        _refusals.warning(
            "refused a broker identity proof from %s: %s", header.session.client_host or "?", why
        )


def _refusal() -> bodies.BrokerProofResponse:
    return {"error_code": REFUSED.code, "error_message": NOT_PROVEN}

"""SASL without I/O: SCRAM credentials in Kafka's text format, and both sides of the
PLAIN and SCRAM-SHA-256 / SCRAM-SHA-512 exchanges.

How this works. Tokens go in, tokens come out; the listener (broker/security/sasl_gate.py) and
the client connection (net/connection.py) move them in SaslAuthenticate requests. The
server's side of a SCRAM exchange is protocol/scram_server.py (by Kafka's rules: any salt
length, a client-final nonce that ends with the server's); the client's side, and the
making of new credentials, is the ``scramp`` library's. This module adapts them:

- a SCRAM credential is stored, as in Kafka's ``/config/users/<name>``, as the text
  ``salt=<base64>,stored_key=<base64>,server_key=<base64>,iterations=<n>``: the salted
  keys, never the password;
- PLAIN is checked against the same SCRAM credentials: the password the client sent is
  salted with the stored salt and iterations and its stored key compared (constant
  time) with the stored one, SHA-512's credential first. So one ``users add`` serves
  every mechanism, and no password is kept anywhere;
- an unknown user is not told apart from a wrong password: SCRAM goes on with a
  made-up credential (a salt derived from the name and a per-process secret, so asking
  twice gives the same salt) and fails at the proof, PLAIN pays one derivation too.

Every failure raises ``SaslAuthenticationFailedError`` with the same message; what went
wrong is for the broker's debug log, never for the client.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Callable
from typing import Final, NamedTuple

import scramp

from minibroker.protocol.errors import SaslAuthenticationFailedError
from minibroker.protocol.scram_server import ScramError, ScramServerExchange

PLAIN: Final = "PLAIN"
SCRAM_SHA_256: Final = "SCRAM-SHA-256"
SCRAM_SHA_512: Final = "SCRAM-SHA-512"
SCRAM_MECHANISMS: Final = (SCRAM_SHA_256, SCRAM_SHA_512)
MECHANISMS: Final = (PLAIN, *SCRAM_MECHANISMS)

DEFAULT_ITERATIONS: Final = 4096
"""Kafka's default and minimum for SCRAM-SHA-256/512 (RFC 7677 recommends >= 4096)."""

MAX_ITERATIONS: Final = 16384
"""Kafka's upper bound: a credential costs the client this many HMACs per login."""

SERVER_NONCE_BYTES: Final = 18
"""Random bytes of the broker's nonce (24 characters): as long as Kafka's. Some clients
(librdkafka before 2.1) cannot take the 64-character nonce scramp makes by default."""

_HASHES: Final = {SCRAM_SHA_256: "sha256", SCRAM_SHA_512: "sha512"}

FAILED: Final = "Authentication failed: invalid credentials"
"""The one message every failure carries (nothing that helps guessing)."""

_FAKE_KEY_SECRET: Final = secrets.token_bytes(32)
"""Derives the made-up salt of unknown users; new per process."""


class ScramCredential(NamedTuple):
    """One mechanism's salted credential of one user."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def make_scram_credential(
    mechanism: str,
    password: str,
    *,
    iterations: int = DEFAULT_ITERATIONS,
    salt: bytes | None = None,
) -> ScramCredential:
    """The credential ``password`` gives under ``mechanism`` (a fresh random salt)."""
    if mechanism not in SCRAM_MECHANISMS:
        raise ValueError(f"not a SCRAM mechanism: {mechanism}")
    if not DEFAULT_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"iterations must be in [{DEFAULT_ITERATIONS}, {MAX_ITERATIONS}]")
    salt_, stored, server, count = scramp.ScramMechanism(mechanism).make_auth_info(
        password, iteration_count=iterations, salt=salt
    )
    return ScramCredential(salt_, stored, server, count)


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """SCRAM's SaltedPassword, Hi(password, salt, i) (RFC 5802: PBKDF2 with the
    mechanism's HMAC): what AlterUserScramCredentials carries instead of the password."""
    return hashlib.pbkdf2_hmac(_HASHES[mechanism], password.encode(), salt, iterations)


def credential_from_salted(
    mechanism: str, salt: bytes, salted: bytes, iterations: int
) -> ScramCredential:
    """The stored credential a salted password gives: StoredKey = H(HMAC(salted, "Client
    Key")), ServerKey = HMAC(salted, "Server Key") (RFC 5802)."""
    name = _HASHES[mechanism]
    client_key = hmac.new(salted, b"Client Key", name).digest()
    stored_key = hashlib.new(name, client_key).digest()
    server_key = hmac.new(salted, b"Server Key", name).digest()
    return ScramCredential(salt, stored_key, server_key, iterations)


def format_scram_credential(credential: ScramCredential) -> str:
    """Kafka's text form (ScramCredentialUtils.credentialToString)."""

    def b64(raw: bytes) -> str:
        return base64.b64encode(raw).decode("ascii")

    return (
        f"salt={b64(credential.salt)},stored_key={b64(credential.stored_key)},"
        f"server_key={b64(credential.server_key)},iterations={credential.iterations}"
    )


def parse_scram_credential(text: str) -> ScramCredential:
    """The inverse of ``format_scram_credential``; ValueError if it is not one."""
    fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
    try:
        return ScramCredential(
            base64.b64decode(fields["salt"], validate=True),
            base64.b64decode(fields["stored_key"], validate=True),
            base64.b64decode(fields["server_key"], validate=True),
            int(fields["iterations"]),
        )
    except (KeyError, ValueError) as exc:
        raise ValueError(f"not a SCRAM credential: {exc}") from exc


CredentialLookup = Callable[[str, str], ScramCredential | None]
"""(mechanism, user name) -> that user's credential for the mechanism, or None."""


class SaslServer:
    """The server side of one exchange: ``step(token)`` until ``complete``; then
    ``user`` is the authenticated name. Any failure raises
    SaslAuthenticationFailedError and the exchange is over."""

    def __init__(self, mechanism: str, lookup: CredentialLookup) -> None:
        if mechanism not in MECHANISMS:
            raise ValueError(f"unknown SASL mechanism {mechanism}")
        self.mechanism = mechanism
        self.lookup = lookup
        self.complete = False
        self.user: str | None = None
        self.failure = ""
        """Why the exchange failed (for the server's debug log only)."""
        self._scram: ScramServerExchange | None = None
        self._claimed = ""  # the name a SCRAM client-first gave
        self._claimed_is_fake = False  # ... and it has no credential: the proof will fail

    def step(self, token: bytes) -> bytes:
        """Take the client's next token, return the server's answer."""
        if self.complete:
            return self._fail("a token after the exchange completed")
        if self.mechanism == PLAIN:
            return self._plain(token)
        return self._scram_step(token)

    def _fail(self, why: str) -> bytes:
        self.failure = why
        self.complete = False
        raise SaslAuthenticationFailedError(FAILED)

    # -- PLAIN ----------------------------------------------------------------------

    def _plain(self, token: bytes) -> bytes:
        parts = token.split(b"\x00")
        if len(parts) != 3:
            return self._fail("PLAIN token is not authzid NUL authcid NUL password")
        try:
            authzid, user, password = (p.decode() for p in parts)
        except UnicodeDecodeError:
            return self._fail("PLAIN token is not UTF-8")
        if authzid and authzid != user:
            return self._fail("PLAIN authorization id differs from the user")
        if not user or not self._plain_password_matches(user, password):
            return self._fail(f"PLAIN credentials of {user!r} rejected")
        self.user = user
        self.complete = True
        return b""

    def _plain_password_matches(self, user: str, password: str) -> bool:
        for mechanism in (SCRAM_SHA_512, SCRAM_SHA_256):
            credential = self.lookup(mechanism, user)
            if credential is not None:
                return _stored_key(mechanism, password, credential) == credential.stored_key
        # Unknown user: pay the same derivation, so timing does not tell.
        _stored_key(SCRAM_SHA_512, password, _fake_credential(SCRAM_SHA_512, user))
        return False

    # -- SCRAM ----------------------------------------------------------------------

    def _scram_step(self, token: bytes) -> bytes:
        try:
            text = token.decode()
        except UnicodeDecodeError:
            return self._fail("SCRAM token is not UTF-8")
        try:
            if self._scram is None:
                self._scram = ScramServerExchange(
                    _HASHES[self.mechanism],
                    secrets.token_urlsafe(SERVER_NONCE_BYTES),
                    self._auth_info,
                )
                return self._scram.first(text).encode()
            answer = self._scram.final(text)
        except ScramError as exc:
            return self._fail(f"SCRAM exchange of {self._claimed!r} failed: {exc}")
        if self._claimed_is_fake:
            return self._fail(f"SCRAM user {self._claimed!r} unknown")
        self.user = self._claimed
        self.complete = True
        return answer.encode()

    def _auth_info(self, name: str) -> tuple[bytes, bytes, bytes, int]:
        user = _decode_saslname(name)
        self._claimed = user
        credential = self.lookup(self.mechanism, user)
        if credential is None:
            self._claimed_is_fake = True
            credential = _fake_credential(self.mechanism, user)
        return credential.salt, credential.stored_key, credential.server_key, credential.iterations


def _stored_key(mechanism: str, password: str, credential: ScramCredential) -> bytes:
    """H(HMAC(SaltedPassword, "Client Key")) for ``password`` (RFC 5802)."""
    name = _HASHES[mechanism]
    salted = hashlib.pbkdf2_hmac(name, password.encode(), credential.salt, credential.iterations)
    client_key = hmac.digest(salted, b"Client Key", name)
    return hashlib.new(name, client_key).digest()


def _fake_credential(mechanism: str, user: str) -> ScramCredential:
    """A credential nobody can match, the same for the same name within this process."""
    name = _HASHES[mechanism]
    seed = hmac.digest(_FAKE_KEY_SECRET, f"{mechanism}:{user}".encode(), name)
    return ScramCredential(seed[:16], secrets.token_bytes(len(seed)), seed, DEFAULT_ITERATIONS)


def _decode_saslname(name: str) -> str:
    """RFC 5802 saslname: ``=2C`` is a comma, ``=3D`` an equals sign."""
    return name.replace("=2C", ",").replace("=3D", "=")


class SaslClient:
    """The client side: send ``first()``, then ``step(challenge)`` for each server
    token until ``complete``. A server-final signature that does not verify raises
    SaslAuthenticationFailedError (the broker is not who it claims)."""

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        if mechanism not in MECHANISMS:
            raise ValueError(f"unknown SASL mechanism {mechanism}")
        self.mechanism = mechanism
        self.username = username
        self.password = password
        self.complete = False
        self._scram: scramp.ScramClient | None = None

    def first(self) -> bytes:
        if self.mechanism == PLAIN:
            return b"\x00" + self.username.encode() + b"\x00" + self.password.encode()
        self._scram = scramp.ScramClient([self.mechanism], self.username, self.password)
        first: str = self._scram.get_client_first()
        return first.encode()

    def step(self, challenge: bytes) -> bytes | None:
        """The answer to the server's token; None when nothing more is to be sent."""
        scram = self._scram
        try:
            if scram is None:  # PLAIN: the server's (empty) answer ends it
                self.complete = True
                return None
            if scram.stage is None or scram.stage.name == "get_client_first":
                scram.set_server_first(challenge.decode())
                final: str = scram.get_client_final()
                return final.encode()
            scram.set_server_final(challenge.decode())
        except (scramp.ScramException, UnicodeDecodeError) as exc:
            raise SaslAuthenticationFailedError(f"the broker's SCRAM answer: {exc}") from exc
        self.complete = True
        return None

"""API keys, request/response envelopes, and decoding with validation (sans-IO).

Envelopes (docs/architecture.md, "Wire formats"), each one frame's payload (protocol/frames.py)::

    request  = msgpack [api_key, api_version, correlation_id, client_id, body]
    response = msgpack [correlation_id, body]

``body`` is a msgpack map with snake_case keys. Every API is declared once in
``protocol/messages/``; ``SCHEMAS`` below derives each one's msgpack schema from that
declaration (protocol/schemas/from_messages.py), and ``SUPPORTED_VERSIONS`` and the
ApiVersions response derive from ``SCHEMAS``.

What a receiver does with a bad request (docs/architecture.md, "Bad input"):

- the header does not parse (not msgpack, not a 5-element array, wrong header types):
  ``decode_request`` raises ``MalformedRequest`` (a ``FrameError``): close the
  connection, there is no correlation id to answer to;
- unknown API key or unsupported version: ``UnsupportedRequestVersion``, an
  ``UnsupportedVersionError`` carrying ``.header``;
- a body of the wrong shape: ``InvalidRequestBody``, an ``InvalidRequestError``
  carrying ``.header``.

Decoding is bounded (``decode_request``'s limits below): a request holding more array
elements in all than ``MAX_CLIENT_REQUEST_ELEMENTS`` (``MAX_REQUEST_ELEMENTS`` for the
controller's requests), a map with more than ``MAX_MAP_KEYS``
keys or a string longer than ``MAX_STRING_BYTES`` is refused as an
``InvalidRequestBody`` saying which limit it broke, before it is decoded further. The
event loop that decodes a request serves every other client meanwhile: without these
bounds, one crafted body held it for seconds (docs/performance.md, "Figures behind the code").

Both header-carrying errors derive from ``RejectedRequest``; answer them with
``error_body(exc)`` (``{"error_code", "error_message"}``). Every response schema has
defaults for all its top-level fields, so that body decodes as a response of any API
(defaults filled, ``error_code`` kept). A response that fails its schema but has a
non-zero top-level ``error_code`` is returned as it came (partly filled), so callers
always see the error code instead of a schema failure.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from enum import IntEnum
from typing import Any, Final, NamedTuple, TypeAlias

import msgpack

from minibroker.protocol.answer_memo import LastEncoded
from minibroker.protocol.errors import InvalidRequestError, KafkaError, UnsupportedVersionError
from minibroker.protocol.features import finalized_features
from minibroker.protocol.frames import FrameError, frame_prefix
from minibroker.protocol.messages import ALL_MESSAGES, bodies
from minibroker.protocol.schemas.from_messages import body_api
from minibroker.protocol.schemas.packing import Buffer, pack_buffers
from minibroker.protocol.schemas.types import Api, SchemaError, Validator, compile_validator
from minibroker.protocol.session import UNKNOWN_SESSION, Session

_packb = msgpack.Packer(autoreset=True).pack

Body: TypeAlias = dict[str, Any]
"""A request or response body as the codecs see it: fields by their body keys
(protocol/messages/; handlers use the typed forms in protocol/messages/bodies.py)."""


class ApiKey(IntEnum):
    """Kafka's API key numbers (org.apache.kafka.common.protocol.ApiKeys), and minibroker's
    own from 1000 on, which Kafka's never reach."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    # minibroker's own (msgpack listener only): a broker proves its id (protocol/broker_proof.py)
    BROKER_CHALLENGE = 1000
    BROKER_PROOF = 1001


SCHEMAS: Final[Mapping[ApiKey, Api]] = {
    ApiKey(key): body_api(message) for key, message in ALL_MESSAGES.items()
}
"""The msgpack body schema of every API, derived from its declaration."""

MAX_REQUEST_ELEMENTS: Final = 100_000
"""Array elements one request may hold over all its arrays (partitions, replica lists
...). Decoding and validating costs ~1.5 us an element, so this bounds one request's
decode to ~150 ms in the worst case; an UpdateMetadata for ~14,000 partitions fits."""

MAX_CLIENT_REQUEST_ELEMENTS: Final = 12_000
"""The element budget of every request but the controller's (LeaderAndIsr, StopReplica,
UpdateMetadata, which carry the cluster's state and get ``MAX_REQUEST_ELEMENTS``): a
request naming ``request.max.partitions`` (5,000) partitions over as many topics
fits; refusing more at decode time bounds what a request costs before any handler
counts its items (~12 ms of msgpack decoding, ~50-80 ms of Kafka decoding)."""

CONTROLLER_API_KEYS: Final = frozenset({4, 5, 6})
"""LeaderAndIsr, StopReplica, UpdateMetadata: the requests with the large budget."""

MAX_MAP_KEYS: Final = 256
"""Keys of one msgpack map: every schema struct has far fewer fields."""

MAX_STRING_BYTES: Final = 1 << 20
"""Bytes of one string (names, config values); records travel as ``bin``, not ``str``."""

SUPPORTED_VERSIONS: Final[Mapping[ApiKey, tuple[int, int]]] = {
    key: (0, api.max_version) for key, api in SCHEMAS.items()
}
"""(min, max) version per API key, as ApiVersions reports them."""

# One compiled validator per (key, version), built at import (a few ms for all APIs).
_REQUEST_VALIDATORS: Final[dict[tuple[int, int], Validator]] = {}
_RESPONSE_VALIDATORS: Final[dict[tuple[int, int], Validator]] = {}
for _key, _api in SCHEMAS.items():
    for _version in range(_api.max_version + 1):
        _REQUEST_VALIDATORS[_key, _version] = compile_validator(
            _api.request, _version, f"{_api.name}Request"
        )
        _RESPONSE_VALIDATORS[_key, _version] = compile_validator(
            _api.response, _version, f"{_api.name}Response"
        )


class RequestHeader(NamedTuple):
    """The first four elements of a request envelope, and who sent it."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    session: Session = UNKNOWN_SESSION
    """The sender's session (protocol/session.py), set by the codec from its connection."""


class MalformedRequest(FrameError):
    """A request whose header cannot be parsed: there is nobody to answer, close."""


class MalformedResponse(FrameError):
    """A response that cannot be parsed or fails its schema without an error code."""


class RejectedRequest(KafkaError):
    """A request refused after its header parsed; ``header`` says whom to answer."""

    def __init__(self, message: str, header: RequestHeader) -> None:
        super().__init__(message)
        self.header = header


class InvalidRequestBody(RejectedRequest, InvalidRequestError):
    """The body has the wrong shape: INVALID_REQUEST."""


class UnsupportedRequestVersion(RejectedRequest, UnsupportedVersionError):
    """Unknown API key or a version outside SUPPORTED_VERSIONS: UNSUPPORTED_VERSION."""


def _header_of(envelope: Any, session: Session = UNKNOWN_SESSION) -> RequestHeader:
    """The header of an unpacked request envelope, or MalformedRequest."""
    if type(envelope) is not list or len(envelope) != 5:
        raise MalformedRequest("request is not a 5-element msgpack array")
    api_key, api_version, correlation_id, client_id = envelope[:4]
    if (
        type(api_key) is not int
        or type(api_version) is not int
        or type(correlation_id) is not int
        or not -0x8000_0000 <= correlation_id <= 0x7FFF_FFFF
        or not (client_id is None or type(client_id) is str)
    ):
        raise MalformedRequest("request header has wrong types")
    # tuple.__new__: the NamedTuple's generated __new__ is a Python call per request.
    return tuple.__new__(RequestHeader, (api_key, api_version, correlation_id, client_id, session))


_HEADER_BYTES: Final = MAX_STRING_BYTES + 64
"""The most a request header can take: four scalars, one of them a string."""


def _header_after_failure(payload: bytes | bytearray | memoryview) -> RequestHeader:
    """The header of a payload ``unpackb`` rejected, read element by element (from the
    payload's first bytes only: the rest may be huge)."""
    head = payload[:_HEADER_BYTES]
    unpacker = msgpack.Unpacker(
        raw=False,
        max_buffer_size=max(len(head), 1),
        max_array_len=MAX_REQUEST_ELEMENTS,
        max_map_len=MAX_MAP_KEYS,
        max_str_len=MAX_STRING_BYTES,
    )
    unpacker.feed(head)
    try:
        if unpacker.read_array_header() != 5:
            raise MalformedRequest("request is not a 5-element msgpack array")
        items = [unpacker.unpack() for _ in range(4)]
    except MalformedRequest:
        raise
    except Exception as exc:
        kafka_request = _kafka_request(head)
        if kafka_request is not None:
            raise MalformedRequest(
                f"{kafka_request} on the msgpack listener: Kafka clients connect to the "
                "broker's Kafka listener (kafka.listeners)"
            ) from exc
        raise MalformedRequest(f"unparseable request header: {exc}") from exc
    return _header_of([*items, None])


_KAFKA_HEADER: Final = struct.Struct(">hhih")
"""A Kafka request header's start: API key, version, correlation id, client id length."""
_KAFKA_MAX_VERSION: Final = 20  # above any version a Kafka API has had


def _kafka_request(head: bytes | bytearray | memoryview) -> str | None:
    """What ``head`` asks for when it reads as a Kafka-protocol request header (a Kafka
    client pointed at the msgpack listener), e.g. "a Kafka-protocol ApiVersions v3
    request from client 'rdkafka'"; None when it does not."""
    if len(head) < _KAFKA_HEADER.size:
        return None
    api_key, version, _, id_length = _KAFKA_HEADER.unpack_from(head)
    end = _KAFKA_HEADER.size + max(id_length, 0)
    if not 0 <= version <= _KAFKA_MAX_VERSION or id_length < -1 or end > len(head):
        return None
    try:
        name = SCHEMAS[ApiKey(api_key)].name
    except (ValueError, KeyError):
        return None
    client = bytes(head[_KAFKA_HEADER.size : end]).decode("utf-8", "replace")
    return f"a Kafka-protocol {name} v{version} request" + (
        f" from client {client!r}" if client else ""
    )


def _validator_for(header: RequestHeader) -> Validator:
    validate = _REQUEST_VALIDATORS.get((header.api_key, header.api_version))
    if validate is None:
        raise UnsupportedRequestVersion(_unsupported(header.api_key, header.api_version), header)
    return validate


class _TooManyElements(ValueError):
    """Raised from inside msgpack's decoder once a request exceeds its element budget."""


class _ElementBudget:
    """msgpack ``list_hook``: counts the elements of every decoded array, and stops the
    decode once they exceed ``left`` (each array is counted when complete, so at most
    one ``max_array_len`` array is decoded beyond the budget)."""

    __slots__ = ("left", "limit")

    def __init__(self, elements: int) -> None:
        self.left = self.limit = elements

    def __call__(self, items: list[Any]) -> list[Any]:
        self.left -= len(items)
        if self.left < 0:
            raise _TooManyElements(f"more than {self.limit} array elements")
        return items


_UNPACK_LIMITS: Final[dict[str, Any]] = {
    "raw": False,
    "max_array_len": MAX_REQUEST_ELEMENTS,
    "max_map_len": MAX_MAP_KEYS,
    "max_str_len": MAX_STRING_BYTES,
    "max_ext_len": 0,
}
"""What one request frame may hold, as msgpack.unpackb's limits."""

_CLIENT_UNPACK_LIMITS: Final[dict[str, Any]] = {
    **_UNPACK_LIMITS,
    "max_array_len": MAX_CLIENT_REQUEST_ELEMENTS,
}
"""A client request's: an array longer than its whole budget is refused from its header,
before msgpack builds its elements."""


def decode_request(
    payload: bytes | bytearray | memoryview, session: Session = UNKNOWN_SESSION
) -> tuple[RequestHeader, Any]:
    """Parse and validate one request frame payload: (header, body with defaults); the
    header carries ``session``."""
    try:
        # The envelope's API key, read from its second byte when it is a positive
        # fixint (every controller request's is): only those get the large budget.
        controller = len(payload) > 1 and payload[0] == 0x95 and payload[1] in CONTROLLER_API_KEYS
        elements = MAX_REQUEST_ELEMENTS if controller else MAX_CLIENT_REQUEST_ELEMENTS
        limits = _UNPACK_LIMITS if controller else _CLIENT_UNPACK_LIMITS
        if len(payload) <= elements:
            # Every element takes a byte at least: too short to exceed the budget, so
            # no count is kept (a Python call per array otherwise).
            envelope = msgpack.unpackb(payload, **limits)
        else:
            budget = _ElementBudget(elements)
            envelope = msgpack.unpackb(payload, **limits, list_hook=budget)
    except Exception as exc:
        header = _header_after_failure(payload)
        _validator_for(header)  # an unsupported version is reported as such first
        if isinstance(exc, _TooManyElements) or "exceeds max_" in str(exc):
            raise InvalidRequestBody(f"request too large to decode: {exc}", header) from exc
        raise InvalidRequestBody(f"unparseable request body: {exc}", header) from exc
    header = _header_of(envelope, session)
    # _validator_for, written out: this runs once per request.
    validate = _REQUEST_VALIDATORS.get((header.api_key, header.api_version))
    if validate is None:
        raise UnsupportedRequestVersion(_unsupported(header.api_key, header.api_version), header)
    body = envelope[4]
    try:
        validate(body)
    except SchemaError as exc:
        raise InvalidRequestBody(f"{_api_name(header.api_key)} request {exc}", header) from exc
    return header, body


def encode_request(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, body: Any
) -> bytes:
    """One request frame payload (add the length prefix with frames.encode_frame)."""
    packed: bytes = msgpack.packb([int(api_key), api_version, correlation_id, client_id, body])
    return packed


def encode_request_buffers(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, body: Any
) -> list[Buffer]:
    """A whole request frame (length prefix included) as buffers; large ``bin`` values
    (produce records) stay separate buffers instead of being copied."""
    envelope = [int(api_key), api_version, correlation_id, client_id, body]
    return pack_buffers(envelope, length_prefix=True)


_pack_head = msgpack.Packer(autoreset=True).pack


class PackedBody:
    """A request body the caller packed itself: ``b"".join(parts)`` is exactly the
    msgpack bytes ``encode_request_buffers`` would write for the body as a dict. For a
    request sent once per small round trip (a one-batch Produce), where walking the
    dict for large binary values costs more than packing it. A large value may be a
    part of its own, sent without being copied, as ``encode_request_buffers`` does."""

    __slots__ = ("parts",)

    def __init__(self, parts: list[Buffer]) -> None:
        self.parts = parts


def packed_request_frame(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, body: PackedBody
) -> list[Buffer]:
    """The frame ``encode_request_buffers`` writes, around a body packed by the caller:
    the envelope is the msgpack array [api_key, version, correlation_id, client_id,
    body], so its first four items are packed as an array of 4 whose header byte
    (fixarray 4, 0x94) becomes that of an array of 5 (0x95)."""
    head = _pack_head([int(api_key), api_version, correlation_id, client_id])
    parts = body.parts
    if len(parts) == 1:  # the usual small request: one buffer
        part = parts[0]
        size = len(head) + (part.nbytes if isinstance(part, memoryview) else len(part))
        return [b"".join((frame_prefix(size), b"\x95", head[1:], part))]
    size = len(head)
    for part in parts:
        size += part.nbytes if isinstance(part, memoryview) else len(part)
    return [b"".join((frame_prefix(size), b"\x95", head[1:], parts[0])), *parts[1:]]


def encode_response(
    correlation_id: int, body: Any, *, framed: bool = True, splice: bool = True
) -> list[Buffer]:
    """A response as buffers to send in order: ``b"".join(...)`` is the frame (with
    ``framed``, the default, the first buffer starts with the length prefix) or the bare
    payload. With ``splice`` ``bytes`` / ``memoryview`` values of 32 KiB and more are
    passed through as their own buffers without being copied (see
    protocol/schemas/packing.py); without it the body is packed in one call, which is
    what a response that never carries record data (all but Fetch) wants: the search
    for large values costs a few microseconds per small response."""
    if not splice:
        packed = _packb([correlation_id, body])
        return [frame_prefix(len(packed)) + packed if framed else packed]
    return pack_buffers([correlation_id, body], length_prefix=framed)


def encode_memoised_response(correlation_id: int, body: Any, memo: LastEncoded) -> list[Buffer]:
    """``encode_packed_response`` of a body ``memo`` may have encoded before: the
    envelope [correlation_id, body] is a fixarray of two (0x92) followed by its items,
    so the body's bytes are reused as they are."""
    packed = b"".join((b"\x92", _packb(correlation_id), memo.encoded(body, None, _packb)))
    return [frame_prefix(len(packed)) + packed]


def encode_packed_response(correlation_id: int, body: Any) -> list[Buffer]:
    """``encode_response(correlation_id, body, splice=False)``: one framed buffer, for
    the answers that never carry record data. The broker calls it once per such
    request: a plain call, with no keyword arguments to match."""
    packed = _packb([correlation_id, body])
    return [frame_prefix(len(packed)) + packed]


def decode_response(
    payload: bytes | bytearray | memoryview, api_key: int, api_version: int
) -> tuple[int, Any]:
    """Parse and validate one response payload: (correlation_id, body with defaults)."""
    try:
        envelope = msgpack.unpackb(payload, raw=False)
    except Exception as exc:
        raise MalformedResponse(f"unparseable response: {exc}") from exc
    if type(envelope) is not list or len(envelope) != 2 or type(envelope[0]) is not int:
        raise MalformedResponse("response is not a [correlation_id, body] msgpack array")
    correlation_id, body = envelope
    validate = _RESPONSE_VALIDATORS.get((api_key, api_version))
    if validate is None:  # we sent what we don't speak (a test of the broker): no schema
        if type(body) is not dict:
            raise MalformedResponse(f"response body to api {api_key} v{api_version} not a map")
        return correlation_id, body
    try:
        validate(body)
    except SchemaError as exc:
        if type(body) is dict and type(body.get("error_code")) is int and body["error_code"]:
            return correlation_id, body  # an error answer (error_body) to any request
        raise MalformedResponse(f"{_api_name(api_key)} response {exc}") from exc
    return correlation_id, body


def validate_request(api_key: int, api_version: int, body: Any) -> Any:
    """Check (and fill defaults of) a request body; raises SchemaError. For tests/tools."""
    _REQUEST_VALIDATORS[api_key, api_version](body)
    return body


def error_body(exc: KafkaError) -> dict[str, Any]:
    """The body answering a request refused as a whole (any API)."""
    return {"error_code": exc.code, "error_message": exc.message}


def api_versions_body() -> bodies.ApiVersionsResponse:
    """The ApiVersions response body: every key in SUPPORTED_VERSIONS, and the
    finalized features (protocol/features.py)."""
    body: bodies.ApiVersionsResponse = {
        "error_code": 0,
        "api_keys": [
            {"api_key": int(key), "min_version": low, "max_version": high}
            for key, (low, high) in sorted(SUPPORTED_VERSIONS.items())
        ],
        "throttle_time_ms": 0,
    }
    body.update(finalized_features())  # type: ignore[typeddict-item]
    return body


def latest_version(api_key: int) -> int:
    """The highest version of ``api_key`` this code speaks."""
    return SUPPORTED_VERSIONS[ApiKey(api_key)][1]


def _api_name(api_key: int) -> str:
    try:
        return SCHEMAS[ApiKey(api_key)].name
    except ValueError:
        return f"api {api_key}"


def _unsupported(api_key: int, api_version: int) -> str:
    try:
        low, high = SUPPORTED_VERSIONS[ApiKey(api_key)]
    except ValueError:
        return f"unknown api key {api_key}"
    return f"{SCHEMAS[ApiKey(api_key)].name} v{api_version} not supported (v{low}..v{high})"

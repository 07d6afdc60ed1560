"""Kafka frames <-> (header, body dict), with a compiled codec per (API, version).

A Kafka frame is an int32 size (protocol/frames.py cuts those) followed by:

    request  = header + body
      header v1: api_key int16, api_version int16, correlation_id int32,
                 client_id nullable string (int16 length, also in flexible versions)
      header v2 (flexible versions): v1 + tagged fields
    response = header + body
      header v0: correlation_id int32
      header v1 (flexible versions): v0 + tagged fields; ApiVersions always uses v0

``decode_request(frame)`` returns the header and the body as the handlers read it
(the body keys of protocol/messages/; Produce's ``records`` as a read-only view of the frame,
not a copy); ``encode_response(header, body)`` returns the framed
response as a list of buffers, record data of Fetch responses passed through without a
copy. Encoders and decoders are compiled on first use of each (API, version) and kept.

Errors: ``MalformedKafkaRequest`` when the header itself cannot be read or a body does
not fit its declaration (close the connection: Kafka does the same). Bytes after a
complete body are ignored, as Kafka's broker ignores them: librdkafka's all-topics
Metadata v9 request carries one.
``UnsupportedKafkaVersion`` (carrying the header) for an API or version this broker
does not decode; the caller answers ApiVersions with ``unsupported_api_versions``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Collection, Mapping
from typing import Any, Final

from minibroker.protocol.answer_memo import LastEncoded
from minibroker.protocol.api import MAX_CLIENT_REQUEST_ELEMENTS, Body, RequestHeader
from minibroker.protocol.errors import KafkaError, UnsupportedVersionError
from minibroker.protocol.features import finalized_features
from minibroker.protocol.frames import FrameError
from minibroker.protocol.kafka.compiler import (
    Decoder,
    Encoder,
    KafkaDecodeError,
    compile_decoder,
    compile_encoder,
    read_uvarint,
)
from minibroker.protocol.kafka.messages import MESSAGES
from minibroker.protocol.messages.cluster import API_VERSIONS
from minibroker.protocol.messages.data import PRODUCE
from minibroker.protocol.messages.form import Message
from minibroker.protocol.messages.transactions import END_TXN
from minibroker.protocol.session import UNKNOWN_SESSION, Session

ADVERTISED_VERSIONS: Final[Mapping[int, tuple[int, int]]] = {
    key: (message.valid.low, message.valid.high or message.valid.low)
    for key, message in sorted(MESSAGES.items())
}
"""(min, max) per API key as ApiVersions reports them. Produce advertises from v0 (it is
decoded from v0 too): librdkafka stops compressing when v0 is absent; v0-2 requests
are answered UNSUPPORTED_VERSION by the listener (they predate RecordBatch v2)."""

MIN_RECORD_BATCH_PRODUCE_VERSION: Final = 3
"""Produce versions below this carry the old MessageSet formats this broker never stores."""

_HEADER = struct.Struct(">hhih")
_CORRELATION = struct.Struct(">i")
_SIZE_AND_CORRELATION = struct.Struct(">ii")
_DECODE_ERRORS = (KafkaDecodeError, struct.error, IndexError, UnicodeDecodeError, ValueError)


class MalformedKafkaRequest(FrameError):
    """A frame that is not a Kafka request we can read: close that one connection."""


class UnsupportedKafkaVersion(UnsupportedVersionError):
    """An API key or version this broker does not decode; ``header`` says whom to answer."""

    def __init__(self, message: str, header: RequestHeader) -> None:
        super().__init__(message)
        self.header = header


_COMPILED: Final[dict[tuple[str, int, int], Any]] = {}
"""Compiled functions by (kind, API key, version), built on first use."""


def _compiled(kind: str, message: Message, version: int) -> Any:
    """The ``kind`` ("request_decoder", "response_encoder", ...) of ``message`` at
    ``version``, compiling it the first time it is asked for."""
    key = (kind, message.api_key, version)
    found = _COMPILED.get(key)
    if found is None:
        direction, _, role = kind.partition("_")
        struct_ = message.request if direction == "request" else message.response
        name = message.name + direction.capitalize()
        flexible = message.is_flexible(version)
        if role == "encoder":
            found = compile_encoder(struct_, version, flexible, name)
        else:
            request = direction == "request"
            found = compile_decoder(
                struct_,
                version,
                flexible,
                name,
                records_views=request,
                max_elements=MAX_CLIENT_REQUEST_ELEMENTS if request else None,
            )
        _COMPILED[key] = found
    return found


def _decoder(kind: str, message: Message, version: int) -> Decoder:
    decoder: Decoder = _compiled(kind, message, version)
    return decoder


def _encoder(kind: str, message: Message, version: int) -> Encoder:
    encoder: Encoder = _compiled(kind, message, version)
    return encoder


def message_for(api_key: int, version: int) -> Message | None:
    """The declaration serving ``api_key`` at ``version``, or None."""
    message = MESSAGES.get(api_key)
    if message is None or version not in message.valid:
        return None
    return message


def _skip_tagged_fields(frame: bytes, pos: int) -> int:
    count, pos = read_uvarint(frame, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(frame, pos)
        size, pos = read_uvarint(frame, pos)
        pos += size
    if pos > len(frame):
        raise KafkaDecodeError("header tagged fields beyond the frame")
    return pos


_MSGPACK_REQUEST_START = b"\x95"
"""A msgpack request's first byte (a 5-element array): as a Kafka header, a negative API key."""


def decode_request_header(
    frame: bytes, session: Session = UNKNOWN_SESSION
) -> tuple[RequestHeader, int]:
    """The v1 part of a request header and where it ends (before any tagged fields)."""
    if frame[:1] == _MSGPACK_REQUEST_START:
        raise MalformedKafkaRequest(
            "a msgpack-protocol request on the Kafka listener: minibroker's own clients "
            "connect to the broker's msgpack listener (listeners)"
        )
    try:
        api_key, api_version, correlation_id, n = _HEADER.unpack_from(frame, 0)
        pos = _HEADER.size
        client_id = None
        if n >= 0:
            if pos + n > len(frame):
                raise KafkaDecodeError("client_id beyond the frame")
            client_id = frame[pos : pos + n].decode()
            pos += n
    except _DECODE_ERRORS as exc:
        raise MalformedKafkaRequest(f"unreadable Kafka request header: {exc}") from exc
    return RequestHeader(api_key, api_version, correlation_id, client_id, session), pos


def decode_request(frame: bytes, session: Session = UNKNOWN_SESSION) -> tuple[RequestHeader, Body]:
    """A request frame's header (carrying ``session``) and body; see the module
    docstring for the errors."""
    header, pos = decode_request_header(frame, session)
    message = message_for(header.api_key, header.api_version)
    if message is None:
        raise UnsupportedKafkaVersion(_unsupported(header), header)
    try:
        if message.is_flexible(header.api_version):
            pos = _skip_tagged_fields(frame, pos)
        body, _ = _decoder("request_decoder", message, header.api_version)(frame, pos)
    except _DECODE_ERRORS as exc:
        raise MalformedKafkaRequest(
            f"malformed {message.name} v{header.api_version} request: {exc}"
        ) from exc
    return header, body


def _response_header_flexible(message: Message, version: int) -> bool:
    return message.is_flexible(version) and message.api_key != API_VERSIONS.api_key


def encode_response(header: RequestHeader, body: Body) -> list[bytes | bytearray | memoryview]:
    """The framed response to ``header`` carrying ``body``, as buffers to send in order."""
    message = MESSAGES[header.api_key]
    version = header.api_version
    out = bytearray(_SIZE_AND_CORRELATION.pack(0, header.correlation_id))
    if _response_header_flexible(message, version):
        out += b"\x00"
    parts: list[bytes | bytearray | memoryview] = []
    out = _encoder("response_encoder", message, version)(body, out, parts)
    parts.append(out)
    size = sum(len(part) for part in parts) - 4
    first = parts[0]
    assert isinstance(first, bytearray)
    struct.pack_into(">i", first, 0, size)
    return parts


def encode_memoised_response(
    header: RequestHeader, body: Body, memo: LastEncoded, shape: Callable[[Body], Body]
) -> list[bytes | bytearray | memoryview]:
    """``encode_response(header, shape(body))`` for an answer without record data,
    reusing the bytes ``memo`` kept for this very ``body`` at this version."""
    message = MESSAGES[header.api_key]
    version = header.api_version
    encoder = _encoder("response_encoder", message, version)

    def encode(answer: Body) -> bytes:
        parts: list[bytes | bytearray | memoryview] = []
        encoded = encoder(shape(answer), bytearray(), parts)
        assert not parts, "only answers without record data are memoised"
        return bytes(encoded)

    encoded = memo.encoded(body, version, encode)
    flexible = _response_header_flexible(message, version)
    head = _SIZE_AND_CORRELATION.pack(4 + flexible + len(encoded), header.correlation_id)
    return [b"".join((head, b"\x00" if flexible else b"", encoded))]


def api_versions_body(
    served: Collection[int] | None = None, error: KafkaError | None = None
) -> Body:
    """The ApiVersions answer: the advertised (min, max) version range of every API key
    in ``served`` (None: all of them), and the finalized features (protocol/features.py:
    v3 carries them in tagged fields, older versions leave them out) when EndTxn is
    served (a broker without its transaction coordinator has no transaction version)."""
    features = served is None or END_TXN.api_key in served
    return {
        "error_code": 0 if error is None else error.code,
        "api_keys": [
            {"api_key": key, "min_version": low, "max_version": high}
            for key, (low, high) in ADVERTISED_VERSIONS.items()
            if served is None or key in served
        ],
        "throttle_time_ms": 0,
        **(finalized_features() if features else {}),
    }


def unsupported_api_versions(
    header: RequestHeader, served: Collection[int] | None = None
) -> list[bytes | bytearray | memoryview]:
    """The answer to an ApiVersions version this broker does not know (KIP-511): a v0
    body with UNSUPPORTED_VERSION and the supported ranges, so the client retries with
    a version both sides speak."""
    v0 = header._replace(api_version=0)
    return encode_response(v0, api_versions_body(served, UnsupportedVersionError("")))


def produce_version_unsupported(header: RequestHeader) -> bool:
    """Whether a Produce request is of a version advertised but answered
    UNSUPPORTED_VERSION (the pre-RecordBatch-v2 ones)."""
    return header.api_key == PRODUCE.api_key and header.api_version < (
        MIN_RECORD_BATCH_PRODUCE_VERSION
    )


# -- the client side (tests and tools speak Kafka to a broker with these) -------------------


def encode_request(header: RequestHeader, body: Body) -> bytes:
    """A framed request."""
    message = MESSAGES[header.api_key]
    client_id = None if header.client_id is None else header.client_id.encode()
    out = bytearray(b"\x00\x00\x00\x00")
    out += _HEADER.pack(
        header.api_key,
        header.api_version,
        header.correlation_id,
        -1 if client_id is None else len(client_id),
    )
    if client_id is not None:
        out += client_id
    if message.is_flexible(header.api_version):
        out += b"\x00"
    parts: list[bytes | bytearray | memoryview] = []
    out = _encoder("request_encoder", message, header.api_version)(body, out, parts)
    data = b"".join([*parts, out])
    return struct.pack(">i", len(data) - 4) + data[4:]


def decode_response(payload: bytes, api_key: int, api_version: int) -> tuple[int, Body]:
    """A response payload (after the size): (correlation id, body)."""
    message = MESSAGES[api_key]
    (correlation_id,) = _CORRELATION.unpack_from(payload, 0)
    pos = _CORRELATION.size
    if _response_header_flexible(message, api_version):
        pos = _skip_tagged_fields(payload, pos)
    body, end = _decoder("response_decoder", message, api_version)(payload, pos)
    if end != len(payload):
        raise KafkaDecodeError(f"{len(payload) - end} bytes after the {message.name} response")
    return correlation_id, body


def _unsupported(header: RequestHeader) -> str:
    message = MESSAGES.get(header.api_key)
    if message is None:
        return f"unknown api key {header.api_key}"
    low, high = ADVERTISED_VERSIONS[header.api_key]
    return f"{message.name} v{header.api_version} not supported (v{low}..v{high})"

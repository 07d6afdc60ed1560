"""Compile a message declaration into one encoder and one decoder per version.

``compile_decoder(struct, version, flexible)`` and ``compile_encoder(...)`` generate the
Python source of a single function for the whole message (nested structs and arrays
inlined as nested loops; runs of fixed-size fields read or written with one
``struct.Struct`` call), then ``exec`` it once. No schema is walked per message.

A decoder is ``decode(buf, pos) -> (body, pos)`` over ``bytes``; it raises
``KafkaDecodeError`` (or ``struct.error`` / ``IndexError`` / ``UnicodeDecodeError``,
which the codec maps to the same) on bytes that do not fit. Fields a version lacks are
filled with their default, so handlers see every key at every version. With
``records_views`` (the broker's request decoders) a ``records`` value is a read-only
``memoryview`` of ``buf`` instead of a copy: the log copies a produced batch once anyway
(to patch its offsets), and a second 1 MiB copy per request showed in the broker's
produce cost, page faults included.

An encoder is ``encode(body, out, parts) -> out``: it appends to the bytearray ``out``.
A ``records`` value of ``SPLICE_BYTES`` or more is not copied: ``out`` goes to
``parts``, then the records buffer itself, and a fresh bytearray carries on (the
returned one). Missing keys encode as the field's default.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, Final

from minibroker.protocol.messages.form import Array, Field, Primitive, Struct

SPLICE_BYTES: Final = 32 * 1024
"""Records at least this large are sent as their own buffer instead of being copied."""

MAX_UVARINT_BYTES: Final = 5
"""An unsigned varint of an int32 quantity takes at most 5 bytes."""

_FIXED: Final = {
    "int8": "b",
    "int16": "h",
    "int32": "i",
    "int64": "q",
    "bool": "?",
    "uuid": "16s",
    "float64": "d",  # IEEE 754 double (client quotas' values)
}
_SIZES: Final = {"b": 1, "h": 2, "i": 4, "q": 8, "?": 1, "16s": 16, "d": 8}

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class KafkaDecodeError(ValueError):
    """Bytes that are not a valid message of the expected API and version."""


def read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    """An unsigned varint at ``pos``: (value, position after it)."""
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    value = b & 0x7F
    shift = 7
    for i in range(1, MAX_UVARINT_BYTES):
        b = buf[pos + i]
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos + i + 1
        shift += 7
    raise KafkaDecodeError("unsigned varint longer than 5 bytes")


_SMALL_UVARINTS: Final = tuple(bytes((i,)) for i in range(128))


def uvarint(value: int) -> bytes:
    """The unsigned varint encoding of ``value`` (>= 0)."""
    if value < 0x80:
        return _SMALL_UVARINTS[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _fail(message: str) -> None:
    raise KafkaDecodeError(message)


Decoder = Callable[[bytes, int], tuple[dict[str, Any], int]]
Encoder = Callable[[dict[str, Any], bytearray, list[Any]], bytearray]


def _is_fixed(field: Field, version: int) -> bool:
    return (
        isinstance(field.type, Primitive)
        and field.type.name in _FIXED
        and version not in field.nullable
    )


class _Source:
    """Lines of generated code and the constants they refer to."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.constants: dict[str, object] = {}
        self._n = 0

    def var(self, stem: str) -> str:
        self._n += 1
        return f"{stem}{self._n}"

    def const(self, value: object, stem: str = "C") -> str:
        name = self.var(stem)
        self.constants[name] = value
        return name

    def line(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)

    def build(self, header: str, footer: str, name: str) -> Any:
        source = header + "\n" + "\n".join(self.lines) + "\n" + footer + "\n"
        namespace: dict[str, object] = {
            "_uv": uvarint,
            "_ruv": read_uvarint,
            "_fail": _fail,
            "_unpack_from": struct.unpack_from,
            "_pack": struct.pack,
            "_I16": _I16,
            "_I32": _I32,
            "_SPLICE": SPLICE_BYTES,
            "_view": memoryview,
        }
        namespace.update(self.constants)
        exec(compile(source, f"<kafka {name}>", "exec"), namespace)
        function = namespace["generated"]
        function.__doc__ = source
        return function


def _fields_in(struct_: Struct, version: int, flexible: bool) -> tuple[list[Field], list[Field]]:
    """(ordinary fields, tagged fields) present at ``version``."""
    plain = [f for f in struct_.fields if version in f.versions and f.tag is None]
    tagged = [f for f in struct_.fields if version in f.versions and f.tag is not None and flexible]
    return plain, tagged


# -- decoding ------------------------------------------------------------------------------


class _DecoderGen:
    def __init__(
        self, version: int, flexible: bool, records_views: bool, max_elements: int | None
    ) -> None:
        self.version = version
        self.flexible = flexible
        self.records_views = records_views
        self.max_elements = max_elements
        self.src = _Source()

    def default_expr(self, field: Field) -> str:
        value = field.default_value()
        if isinstance(value, list):
            return "[]"
        if value is None or isinstance(value, (bool, int)):
            return repr(value)
        return self.src.const(value, "D")

    def struct(self, struct_: Struct, target: str, depth: int) -> None:
        src = self.src
        src.line(depth, f"{target} = {{}}")
        plain, tagged = _fields_in(struct_, self.version, self.flexible)
        present = {id(f) for f in plain} | {id(f) for f in tagged}
        for field in struct_.fields:
            if id(field) not in present or field.tag is not None:
                src.line(depth, f"{target}[{field.body_key!r}] = {self.default_expr(field)}")
        run: list[Field] = []
        for field in plain:
            if _is_fixed(field, self.version):
                run.append(field)
                continue
            self.fixed_run(run, target, depth)
            run = []
            value = src.var("v")
            self.value(field, field.type, value, depth)
            src.line(depth, f"{target}[{field.body_key!r}] = {value}")
        self.fixed_run(run, target, depth)
        if self.flexible:
            self.tagged(tagged, target, depth)

    def fixed_run(self, run: list[Field], target: str, depth: int) -> None:
        if not run:
            return
        assert all(isinstance(f.type, Primitive) for f in run)
        codes = [_FIXED[f.type.name] for f in run]  # type: ignore[union-attr]
        packer = self.src.const(struct.Struct(">" + "".join(codes)), "S")
        size = sum(_SIZES[c] for c in codes)
        targets = ", ".join(f"{target}[{f.body_key!r}]" for f in run)
        comma = "," if len(run) == 1 else ""
        self.src.line(depth, f"{targets}{comma} = {packer}.unpack_from(buf, pos)")
        self.src.line(depth, f"pos += {size}")

    def length(self, wide: str, target: str, depth: int) -> None:
        """Read a length/count: ``wide`` is the non-flexible struct (_I16 or _I32);
        -1 means null in both encodings."""
        if self.flexible:
            self.src.line(depth, f"{target}, pos = _ruv(buf, pos)")
            self.src.line(depth, f"{target} -= 1")
        else:
            self.src.line(depth, f"{target}, = {wide}.unpack_from(buf, pos)")
            self.src.line(depth, f"pos += {4 if wide == '_I32' else 2}")

    def value(self, field: Field, type_: Any, target: str, depth: int) -> None:
        src = self.src
        nullable = self.version in field.nullable
        if isinstance(type_, Primitive) and type_.name in _FIXED:
            packer = src.const(struct.Struct(">" + _FIXED[type_.name]), "S")
            src.line(depth, f"{target}, = {packer}.unpack_from(buf, pos)")
            src.line(depth, f"pos += {_SIZES[_FIXED[type_.name]]}")
        elif isinstance(type_, Primitive):
            n = src.var("n")
            self.length("_I16" if type_.name == "string" else "_I32", n, depth)
            src.line(depth, f"if {n} < 0:")
            if nullable:
                src.line(depth + 1, f"{target} = None")
            else:
                src.line(depth + 1, f"_fail('{field.name}: null in a non-nullable field')")
            src.line(depth, "else:")
            src.line(depth + 1, f"if pos + {n} > len(buf):")
            src.line(depth + 2, f"_fail('{field.name}: length beyond the message')")
            if type_.name == "records" and self.records_views:
                src.line(depth + 1, f"{target} = _view(buf)[pos:pos + {n}]")
            else:
                conversion = ".decode()" if type_.name == "string" else ""
                src.line(depth + 1, f"{target} = buf[pos:pos + {n}]{conversion}")
            src.line(depth + 1, f"pos += {n}")
        elif isinstance(type_, Array):
            n = src.var("n")
            self.length("_I32", n, depth)
            src.line(depth, f"if {n} < 0:")
            src.line(depth + 1, f"{target} = None" if nullable else f"{target} = []")
            src.line(depth, f"elif {n} > len(buf) - pos:")
            src.line(depth + 1, f"_fail('{field.name}: count beyond the message')")
            if self.max_elements is not None:
                src.line(depth, f"elif {n} > _left:")
                too_many = f"more than {self.max_elements} array elements"
                src.line(depth + 1, f"_fail('{field.name}: {too_many}')")
            src.line(depth, "else:")
            if self.max_elements is not None:
                src.line(depth + 1, f"_left -= {n}")
            of = type_.of
            if isinstance(of, Primitive) and of.name in ("int32", "int64"):
                code = _FIXED[of.name]
                src.line(depth + 1, f"{target} = list(_unpack_from('>%d{code}' % {n}, buf, pos))")
                src.line(depth + 1, f"pos += {_SIZES[code]} * {n}")
                return
            src.line(depth + 1, f"{target} = []")
            src.line(depth + 1, f"for _ in range({n}):")
            element = src.var("e")
            if isinstance(of, Struct):
                self.struct(of, element, depth + 2)
            else:
                self.value(field, of, element, depth + 2)
            src.line(depth + 2, f"{target}.append({element})")
        else:
            assert isinstance(type_, Struct)
            if nullable:
                marker = src.var("m")
                src.line(depth, f"{marker} = buf[pos]")
                src.line(depth, "pos += 1")
                src.line(depth, f"if {marker} == 255:")
                src.line(depth + 1, f"{target} = None")
                src.line(depth, "else:")
                self.struct(type_, target, depth + 1)
            else:
                self.struct(type_, target, depth)

    def tagged(self, tagged: list[Field], target: str, depth: int) -> None:
        src = self.src
        count, tag, size, end = src.var("tc"), src.var("tag"), src.var("ts"), src.var("te")
        src.line(depth, f"{count}, pos = _ruv(buf, pos)")
        src.line(depth, f"for _ in range({count}):")
        src.line(depth + 1, f"{tag}, pos = _ruv(buf, pos)")
        src.line(depth + 1, f"{size}, pos = _ruv(buf, pos)")
        src.line(depth + 1, f"{end} = pos + {size}")
        src.line(depth + 1, f"if {end} > len(buf):")
        src.line(depth + 2, "_fail('tagged field beyond the message')")
        for i, field in enumerate(tagged):
            keyword = "if" if i == 0 else "elif"
            src.line(depth + 1, f"{keyword} {tag} == {field.tag}:")
            value = src.var("v")
            self.value(field, field.type, value, depth + 2)
            src.line(depth + 2, f"{target}[{field.body_key!r}] = {value}")
        src.line(depth + 1, f"pos = {end}")


def compile_decoder(
    struct_: Struct,
    version: int,
    flexible: bool,
    name: str,
    *,
    records_views: bool = False,
    max_elements: int | None = None,
) -> Decoder:
    """``max_elements``: the array elements one body may hold over all its arrays
    (a request's budget, as the msgpack decoder's): the count of each array is taken
    from the budget before any element is read, so an oversized request fails at its
    first too-long array, before the per-element work."""
    gen = _DecoderGen(version, flexible, records_views, max_elements)
    gen.struct(struct_, "body", 1)
    header = "def generated(buf, pos):"
    if max_elements is not None:
        header += f"\n    _left = {int(max_elements)}"
    decoder: Decoder = gen.src.build(header, "    return body, pos", f"{name} v{version} decoder")
    return decoder


# -- encoding ------------------------------------------------------------------------------


class _EncoderGen:
    def __init__(self, version: int, flexible: bool) -> None:
        self.version = version
        self.flexible = flexible
        self.src = _Source()

    def get(self, source: str, field: Field) -> str:
        default = field.default_value()
        if isinstance(default, list) or default is None or isinstance(default, (bool, int)):
            return f"{source}.get({field.body_key!r}, {default!r})"
        return f"{source}.get({field.body_key!r}, {self.src.const(default, 'D')})"

    def struct(self, struct_: Struct, source: str, out: str, depth: int) -> None:
        src = self.src
        plain, tagged = _fields_in(struct_, self.version, self.flexible)
        run: list[Field] = []
        for field in plain:
            if _is_fixed(field, self.version):
                run.append(field)
                continue
            self.fixed_run(run, source, out, depth)
            run = []
            value = src.var("x")
            src.line(depth, f"{value} = {self.get(source, field)}")
            self.value(field, field.type, value, out, depth)
        self.fixed_run(run, source, out, depth)
        if self.flexible:
            self.tagged(tagged, source, out, depth)

    def fixed_run(self, run: list[Field], source: str, out: str, depth: int) -> None:
        if not run:
            return
        codes = "".join(_FIXED[f.type.name] for f in run)  # type: ignore[union-attr]
        packer = self.src.const(struct.Struct(">" + codes), "S")
        args = ", ".join(self.get(source, f) for f in run)
        self.src.line(depth, f"{out} += {packer}.pack({args})")

    def length(self, wide: str, n: str, out: str, depth: int) -> None:
        if self.flexible:
            self.src.line(depth, f"{out} += _uv({n} + 1)")
        else:
            self.src.line(depth, f"{out} += {wide}.pack({n})")

    def null(self, wide: str, out: str, depth: int) -> None:
        if self.flexible:
            self.src.line(depth, f"{out} += b'\\x00'")
        else:
            minus_one = "b'\\xff\\xff\\xff\\xff'" if wide == "_I32" else "b'\\xff\\xff'"
            self.src.line(depth, f"{out} += {minus_one}")

    def value(self, field: Field, type_: Any, value: str, out: str, depth: int) -> None:
        src = self.src
        nullable = self.version in field.nullable
        if isinstance(type_, Primitive) and type_.name in _FIXED:
            packer = src.const(struct.Struct(">" + _FIXED[type_.name]), "S")
            src.line(depth, f"{out} += {packer}.pack({value})")
        elif isinstance(type_, Primitive):
            wide = "_I16" if type_.name == "string" else "_I32"
            src.line(depth, f"if {value} is None:")
            if nullable:
                self.null(wide, out, depth + 1)
            else:
                self.length(wide, "0", out, depth + 1)
            src.line(depth, "else:")
            data = value
            if type_.name == "string":
                data = src.var("s")
                src.line(depth + 1, f"{data} = {value}.encode()")
            self.length(wide, f"len({data})", out, depth + 1)
            if type_.name == "records" and out == "out":
                src.line(depth + 1, f"if len({data}) >= _SPLICE:")
                src.line(depth + 2, "parts.append(out)")
                src.line(depth + 2, f"parts.append({data})")
                src.line(depth + 2, "out = bytearray()")
                src.line(depth + 1, "else:")
                src.line(depth + 2, f"out += {data}")
            else:
                src.line(depth + 1, f"{out} += {data}")
        elif isinstance(type_, Array):
            src.line(depth, f"if {value} is None:")
            if nullable:
                self.null("_I32", out, depth + 1)
            else:
                self.length("_I32", "0", out, depth + 1)
            src.line(depth, "else:")
            self.length("_I32", f"len({value})", out, depth + 1)
            of = type_.of
            if isinstance(of, Primitive) and of.name in ("int32", "int64"):
                code = _FIXED[of.name]
                src.line(depth + 1, f"{out} += _pack('>%d{code}' % len({value}), *{value})")
                return
            element = src.var("e")
            src.line(depth + 1, f"for {element} in {value}:")
            if isinstance(of, Struct):
                self.struct(of, element, out, depth + 2)
            else:
                self.value(field, of, element, out, depth + 2)
        else:
            assert isinstance(type_, Struct)
            if nullable:
                src.line(depth, f"if {value} is None:")
                src.line(depth + 1, f"{out} += b'\\xff'")
                src.line(depth, "else:")
                src.line(depth + 1, f"{out} += b'\\x01'")
                self.struct(type_, value, out, depth + 1)
            else:
                src.line(depth, f"if {value} is None:")
                src.line(depth + 1, f"{value} = {{}}")
                self.struct(type_, value, out, depth)

    def tagged(self, tagged: list[Field], source: str, out: str, depth: int) -> None:
        src = self.src
        if not tagged:
            src.line(depth, f"{out} += b'\\x00'")
            return
        found = src.var("tagged")
        src.line(depth, f"{found} = []")
        for field in tagged:
            value = src.var("x")
            src.line(depth, f"{value} = {source}.get({field.body_key!r})")
            default = field.default_value()
            condition = f"{value} is not None"
            if default is not None and not isinstance(default, list):
                condition += f" and {value} != {src.const(default, 'D')}"
            elif isinstance(default, list):
                condition += f" and {value}"
            src.line(depth, f"if {condition}:")
            buffer = src.var("tb")
            src.line(depth + 1, f"{buffer} = bytearray()")
            self.value(field, field.type, value, buffer, depth + 1)
            src.line(depth + 1, f"{found}.append(({field.tag}, {buffer}))")
        src.line(depth, f"{out} += _uv(len({found}))")
        tag, buffer = src.var("tag"), src.var("tb")
        src.line(depth, f"for {tag}, {buffer} in {found}:")
        src.line(depth + 1, f"{out} += _uv({tag})")
        src.line(depth + 1, f"{out} += _uv(len({buffer}))")
        src.line(depth + 1, f"{out} += {buffer}")


def compile_encoder(struct_: Struct, version: int, flexible: bool, name: str) -> Encoder:
    gen = _EncoderGen(version, flexible)
    gen.struct(struct_, "body", "out", 1)
    encoder: Encoder = gen.src.build(
        "def generated(body, out, parts):", "    return out", f"{name} v{version} encoder"
    )
    return encoder

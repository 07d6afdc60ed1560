"""Java ``.properties`` text -> dict, as ``java.util.Properties.load`` reads it.

The parts of the syntax Kafka configuration files use:

- a line whose first non-blank character is ``#`` or ``!`` is a comment;
- the key ends at the first unescaped ``=``, ``:`` or whitespace; blanks around the
  separator are skipped (``a = b``, ``a: b``, ``a b`` all set ``a`` to ``b``);
- a line ending in an odd number of backslashes continues on the next line, whose
  leading blanks are dropped;
- escapes ``\\t \\n \\r \\f \\uXXXX``; a backslash before any other character stands
  for that character (``\\=``, ``\\:``, ``\\ ``, ``\\\\``).

A later duplicate key wins, as in Java.
"""

from __future__ import annotations

from minibroker.protocol.errors import ConfigError

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_BLANK = " \t\f"


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first physical line number, joined text) of each non-comment logical line."""
    result: list[tuple[int, str]] = []
    pending: list[str] = []
    start = 0
    for number, physical in enumerate(text.splitlines(), start=1):
        line = physical.lstrip(_BLANK)
        if not pending:
            if not line or line[0] in "#!":
                continue
            start = number
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:  # an odd run of backslashes escapes the line break
            pending.append(line[:-1])
            continue
        pending.append(line)
        result.append((start, "".join(pending)))
        pending = []
    if pending:
        result.append((start, "".join(pending)))
    return result


def _unescape(raw: str, line: int) -> str:
    out: list[str] = []
    i = 0
    while i < len(raw):
        ch = raw[i]
        if ch != "\\" or i + 1 >= len(raw):
            out.append(ch)
            i += 1
            continue
        nxt = raw[i + 1]
        if nxt == "u":
            digits = raw[i + 2 : i + 6]
            try:
                out.append(chr(int(digits, 16)))
            except ValueError:
                raise ConfigError(f"line {line}: malformed \\uXXXX escape") from None
            if len(digits) != 4:
                raise ConfigError(f"line {line}: malformed \\uXXXX escape")
            i += 6
        else:
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
    return "".join(out)


def _split(line: str) -> tuple[str, str]:
    """Split a logical line at the first unescaped separator (escapes still raw)."""
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=:" or ch in _BLANK:
            break
        i += 1
    key, rest = line[:i], line[i:]
    rest = rest.lstrip(_BLANK)
    if rest[:1] in ("=", ":"):  # at most one separator; "a = = b" sets a to "= b"
        rest = rest[1:].lstrip(_BLANK)
    return key, rest


def parse_properties(text: str) -> dict[str, str]:
    """Parse ``.properties`` text; raises ConfigError on a malformed escape."""
    values: dict[str, str] = {}
    for number, line in _logical_lines(text):
        raw_key, raw_value = _split(line)
        values[_unescape(raw_key, number)] = _unescape(raw_value, number)
    return values

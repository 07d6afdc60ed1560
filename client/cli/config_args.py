"""kafka-configs' ``--add-config`` and ``--delete-config`` syntax, shared by ``configs``
and ``quotas``."""

from __future__ import annotations

from minibroker.protocol.errors import UsageError


def parse_add_config(texts: list[str]) -> dict[str, str]:
    """kafka-configs' ``--add-config``: ``k=v`` pairs split on commas outside brackets;
    a bracketed value keeps its commas (``cleanup.policy=[compact,delete]``)."""
    configs: dict[str, str] = {}
    for text in texts:
        for pair in _split_outside_brackets(text):
            key, sep, value = pair.partition("=")
            if not sep or not key.strip():
                raise UsageError(f"--add-config: expected KEY=VALUE, got {pair!r}")
            value = value.strip()
            if value.startswith("[") and value.endswith("]"):
                value = value[1:-1]
            configs[key.strip()] = value
    return configs


def _split_outside_brackets(text: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [p for p in parts if p.strip()]


def parse_delete_config(texts: list[str]) -> list[str]:
    return [key.strip() for text in texts for key in text.split(",") if key.strip()]

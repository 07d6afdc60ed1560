"""Each public class name has one home in the source tree, and no module re-exports
another's names under ``import X as X`` (issue 32): a reader who greps a name finds one
definition, and an importer names the module that owns it."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = [
    "protocol",
    "storage",
    "zk",
    "net",
    "broker",
    "controller",
    "coordinator",
    "transaction",
    "node",
    "client",
    "analytics",
    "command",
]
PUBLIC_REEXPORTS = {("client/consumer.py", "ConsumerRecord")}
"""Deliberate re-exports of the public API: the consumer hands out ConsumerRecord."""


def _modules() -> list[tuple[str, ast.Module]]:
    return [
        (str(path.relative_to(ROOT)), ast.parse(path.read_text(encoding="utf-8")))
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
    ]


def test_every_public_class_name_has_one_home() -> None:
    homes: dict[str, list[str]] = defaultdict(list)
    for path, tree in _modules():
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                homes[node.name].append(path)
    assert {name: paths for name, paths in homes.items() if len(paths) > 1} == {}


def test_no_module_re_exports_another_modules_names() -> None:
    shims = [
        (path, alias.name)
        for path, tree in _modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.asname == alias.name and (path, alias.name) not in PUBLIC_REEXPORTS
    ]
    assert shims == []

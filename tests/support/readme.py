"""README.md's fenced blocks, for tests that run or check what the README tells a user.

``block("Tour", "sh")`` is the first ``sh`` block under the ``## Tour...`` heading (an
indented block inside a list item counts, without its indentation); ``commands(text)``
are its command lines without comments; ``with_bootstrap(script, servers)`` runs a block
against a test's cluster.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass

from tests.support.broker_process import ROOT

README = ROOT / "README.md"
_FENCE = re.compile(r"^( *)```(\w*)\n(.*?)^\1```$", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class Block:
    section: str  # the "## " heading the block is under
    language: str
    text: str


def readme_blocks(text: str) -> list[Block]:
    """Every fenced block, in order, with the section it is in."""
    blocks = []
    for match in _FENCE.finditer(text):
        headings = re.findall(r"^## (.+)$", text[: match.start()], re.MULTILINE)
        body = textwrap.dedent(match[3])
        blocks.append(Block(headings[-1] if headings else "", match[2], body))
    return blocks


def block(section_prefix: str, language: str, index: int = 0) -> str:
    """The ``index``-th block of ``language`` in the section whose heading starts so."""
    found = [
        b
        for b in readme_blocks(README.read_text(encoding="utf-8"))
        if b.section.startswith(section_prefix) and b.language == language
    ]
    assert len(found) > index, f"README.md has no {language} block {index} in '{section_prefix}'"
    return found[index].text


def commands(shell_block: str) -> list[str]:
    """The command lines of a shell block (comments and blank lines dropped)."""
    lines = (line.split("  #")[0].strip() for line in shell_block.splitlines())
    return [line for line in lines if line and not line.startswith("#")]


# CLI commands that talk to no broker (ZooKeeper or local files), so they get no
# --bootstrap-server.
LOCAL_COMMANDS = ("dev", "zookeeper", "broker", "analyze", "dump-log")


def with_bootstrap(script: str, bootstrap: str) -> str:
    """``script`` for bash, with ``minibroker`` as a shell function that appends
    ``--bootstrap-server BOOTSTRAP`` to client commands: the CLI has no environment
    variable for its bootstrap servers, and a README block talks to 127.0.0.1:9092."""
    local = "|".join(LOCAL_COMMANDS)
    prelude = (
        "set -e -o pipefail\n"
        "minibroker() {\n"
        f'  case "$1" in {local}) command minibroker "$@" ;;\n'
        f'  *) command minibroker "$@" --bootstrap-server {bootstrap} ;; esac\n'
        "}\n"
    )
    return prelude + script

"""Every `--help` text reads the same way: lower case, no trailing period, never missing.

argparse prints each command's and option's help as a fragment after its name; one style
across all commands is what makes `minibroker ... --help` read as one tool.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator

from minibroker.command.main import build_parser

PROPER_NOUNS = {"Kafka", "Spark"}  # capitalised words that start a help text correctly
CAPITALISED_WORD = re.compile(r"^[A-Z][a-z]+\b")


def help_texts(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ("minibroker",)
) -> Iterator[tuple[tuple[str, ...], str, str | None]]:
    """(command path, what, help text) for every command and argument."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                yield path, f"command {choice.dest}", choice.help
            for name, sub in action.choices.items():
                yield from help_texts(sub, (*path, name))
        elif not isinstance(action, argparse._HelpAction):
            yield path, "/".join(action.option_strings) or action.dest, action.help


def style_problem(text: str | None) -> str | None:
    if not text:
        return "no help"
    if text.rstrip().endswith("."):
        return "ends with a period"
    first = CAPITALISED_WORD.match(text)
    if first is not None and first.group(0) not in PROPER_NOUNS:
        return "starts with a capital"
    return None


def test_every_command_and_option_has_help_in_one_style() -> None:
    problems = [
        f"{' '.join(path)} {what}: {problem} ({text!r})"
        for path, what, text in help_texts(build_parser())
        if (problem := style_problem(text)) is not None
    ]
    assert problems == []


def test_the_style_check_catches_sentences_and_missing_help() -> None:
    assert style_problem("Run a broker.") == "ends with a period"
    assert style_problem("Run a broker") == "starts with a capital"
    assert style_problem(None) == "no help"
    assert style_problem("ZooKeeper's port (default 2181)") is None
    assert style_problem("Kafka-style .properties file") is None

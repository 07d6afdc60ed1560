"""`minibroker reassign --execute` refuses a throttle that is not a positive rate before
it contacts any broker."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from minibroker.client.cli import reassign
from minibroker.protocol.errors import UsageError


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    reassign.configure(parser)
    return parser.parse_args(argv)


@pytest.mark.parametrize("flag", ["--throttle", "--replica-alter-log-dirs-throttle"])
@pytest.mark.parametrize("value", ["0", "-2"])
def test_a_throttle_that_is_not_positive_is_a_usage_error(
    tmp_path: Path, flag: str, value: str
) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps({"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1]}]})
    )
    args = parse("--execute", "--reassignment-json-file", str(plan), flag, value)
    with pytest.raises(UsageError, match=flag):
        reassign.run(args)

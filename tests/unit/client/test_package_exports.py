"""The README's `from minibroker import Admin, Producer, Consumer` works, lazily."""

from __future__ import annotations

import subprocess
import sys

import pytest

import minibroker
from minibroker import client
from minibroker.client.admin import Admin
from minibroker.client.consumer import Consumer, ConsumerRecord
from minibroker.client.producer import Producer


def test_the_readme_names_come_from_the_package() -> None:
    assert (minibroker.Admin, minibroker.Producer, minibroker.Consumer) == (
        Admin,
        Producer,
        Consumer,
    )
    assert (client.Admin, client.Producer, client.Consumer) == (Admin, Producer, Consumer)
    assert minibroker.ConsumerRecord is client.ConsumerRecord is ConsumerRecord
    assert sorted(client.__all__) == client.__all__ == minibroker.__all__


@pytest.mark.parametrize("package", [minibroker, client])
def test_an_unknown_name_is_an_attribute_error(package: object) -> None:
    with pytest.raises(AttributeError, match="Nope"):
        package.Nope  # type: ignore[attr-defined]  # noqa: B018


def test_importing_the_package_or_the_cli_does_not_import_the_producer() -> None:
    code = (
        "import sys, minibroker, minibroker.command.main;"
        " print('minibroker.client.producer' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"

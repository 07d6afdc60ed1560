"""The README's `from client import Admin, Producer, Consumer` works, lazily."""

from __future__ import annotations

import subprocess
import sys

import pytest

import client
from client.admin import Admin
from client.consumer import Consumer, ConsumerRecord
from client.producer import Producer


def test_the_readme_names_come_from_the_package() -> None:
    assert (client.Admin, client.Producer, client.Consumer) == (Admin, Producer, Consumer)
    assert client.ConsumerRecord is ConsumerRecord
    assert sorted(client.__all__) == client.__all__


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="Nope"):
        client.Nope  # noqa: B018


def test_importing_the_cli_does_not_import_the_producer() -> None:
    code = "import sys, client.cli.main; print('client.producer' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"

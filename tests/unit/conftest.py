"""Fixtures for the record codec's two implementations (compiled and pure Python)."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import pytest

from tests.support.record_codec import build_compiled_codec, codec


@pytest.fixture(scope="session")
def compiled_codec(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    """The compiled record codec, built from the current source."""
    return build_compiled_codec(tmp_path_factory.mktemp("speedups"))


@pytest.fixture(scope="module", params=["c", "python"])
def record_codec(request: pytest.FixtureRequest, compiled_codec: ModuleType) -> Iterator[str]:
    """Each test using it runs once on the compiled codec and once on the pure-Python
    one (module-scoped so that hypothesis tests may use it)."""
    with codec(compiled_codec if request.param == "c" else None):
        yield request.param

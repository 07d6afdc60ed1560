"""The compiled record codec for tests, built fresh from ``protocol/records/_speedups.c``.

Tests that hold the compiled codec to the pure-Python one build it from the source into
a temporary directory rather than import whatever ``.so`` a checkout or venv holds, so
they always test the C code as it stands (an in-place build may be older than the
source). Building needs a C compiler and Python's headers, as CI has.
"""

from __future__ import annotations

import importlib.util
import sysconfig
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

from setuptools import Distribution, Extension

from minibroker.protocol.records import accel

SOURCE = Path(__file__).resolve().parents[2] / "protocol" / "records" / "_speedups.c"


def build_compiled_codec(where: Path) -> ModuleType:
    """Compile ``_speedups.c`` into ``where`` and load it (not as the package's module)."""
    extension = Extension("_speedups", [str(SOURCE)], optional=False)
    dist = Distribution({"name": "minibroker-speedups-test", "ext_modules": [extension]})
    command = dist.get_command_obj("build_ext")
    command.build_lib = str(where)  # type: ignore[attr-defined]
    command.build_temp = str(where / "tmp")  # type: ignore[attr-defined]
    command.ensure_finalized()
    command.run()
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    spec = importlib.util.spec_from_file_location("_speedups", where / f"_speedups{suffix}")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextmanager
def codec(speedups: ModuleType | None) -> Iterator[None]:
    """Run the record codec on ``speedups`` (None: pure Python) inside the block."""
    saved = accel.speedups
    accel.speedups = speedups
    try:
        yield
    finally:
        accel.speedups = saved

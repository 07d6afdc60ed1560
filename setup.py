"""The optional compiled record codec; everything else is in pyproject.toml.

``optional=True``: without a C compiler (or Python's headers) the build goes on and
minibroker runs on its pure-Python codec, which gives the same bytes and records. In a
checkout, ``scripts/build-speedups`` builds it in place.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "minibroker.protocol.records._speedups",
            ["protocol/records/_speedups.c"],
            optional=True,
        )
    ]
)

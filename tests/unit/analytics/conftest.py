"""The session-wide local SparkSession for the analytics unit tests."""

from tests.support.spark import spark

__all__ = ["spark"]

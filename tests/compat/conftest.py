"""Fixtures for the compatibility tests: the Spark ones share tests/spark's session and broker."""
from tests.spark.conftest import spark, spark_broker  # noqa: F401  (fixtures)

"""One local SparkSession for the whole test run (it takes seconds to start) — under ``make
test``, one per pytest-xdist worker that runs Spark's modules, two at a time at most
(tests/conftest.py) — with ``riverlog`` registered, and a broker process for the Spark tests."""
from __future__ import annotations

import os
import sys

import pytest

from tests.conftest import ROOT, BrokerProcess


def start_spark(warehouse: str):
    """The run's SparkSession (``getOrCreate``: the one already started, if any)."""
    # Python workers are started by the JVM: they must run this interpreter and find this checkout.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))
    from tests.spark.child_process import TEST_JVM_OPTIONS, spark_home_without_its_python
    os.environ["SPARK_HOME"] = spark_home_without_its_python()   # its Python workers' pyspark compiled once
    from pyspark.sql import SparkSession
    return (SparkSession.builder.master("local[2]").appName("riverlog-tests")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.driver.memory", "1g")
            .config("spark.driver.extraJavaOptions", TEST_JVM_OPTIONS)
            .config("spark.sql.warehouse.dir", warehouse)
            .getOrCreate())


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    session = start_spark(str(tmp_path_factory.mktemp("warehouse")))
    import spark_source
    spark_source.register(session)
    yield session
    session.stop()


@pytest.fixture(scope="module")
def spark_broker(tmp_path_factory):
    # log.retention.ms -1: the streams tests write records stamped 2023; a transaction marker
    # (stamped now) rolls the segment under them, and the retention pass every 5 minutes would
    # then delete them as Kafka does, between a test's write and its read
    b = BrokerProcess(str(tmp_path_factory.mktemp("spark-broker")),
                      {"group.min.session.timeout.ms": 300, "log.retention.ms": -1}).start()
    yield b
    b.kill9()

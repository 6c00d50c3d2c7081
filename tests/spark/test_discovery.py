"""``format("riverlog")`` needs no register call: PySpark discovers the installed ``pyspark_riverlog``
module in every Spark application and every session."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.spark.test_source import make_topic

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

_APP = """
import os, sys
os.environ["PYSPARK_PYTHON"] = sys.executable
from pyspark.sql import SparkSession
spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
def read(session):
    return (session.read.format("riverlog").option("riverlog.bootstrap.servers", sys.argv[1])
            .option("subscribe", sys.argv[2]).load())
print("ROWS", sorted(bytes(r.value).decode() for r in read(spark).collect()))
print("NEW SESSION", read(spark.newSession()).count())
spark.stop()
"""


def test_a_fresh_application_reads_riverlog_with_no_register_call(spark_broker, topic_name, tmp_path):
    """A new Python process, outside the checkout and with no PYTHONPATH, as an installed user runs."""
    import pkgutil
    assert "pyspark_riverlog" in {m.name for m in pkgutil.iter_modules()}, \
        "pyspark_riverlog is not installed where PySpark looks: run pip install -e ."
    make_topic(spark_broker.bootstrap, topic_name, n=4)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON")}
    done = subprocess.run([sys.executable, "-c", _APP, spark_broker.bootstrap, topic_name], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "ROWS ['v0', 'v1', 'v2', 'v3']" in done.stdout, done.stdout
    assert "NEW SESSION 4" in done.stdout, done.stdout

"""Makes ``format("riverlog")`` work in every SparkSession with no register call.

PySpark looks, once per Spark application, for installed top-level modules named ``pyspark_<name>``
that define ``DefaultSource`` (a ``DataSource`` subclass) and registers each under its ``name()``
(``pyspark.sql.worker.lookup_data_sources``). Installing Riverlog (``pip install -e .`` included)
installs this module, so

    spark.read.format("riverlog").option("riverlog.bootstrap.servers", "127.0.0.1:9092") \\
        .option("subscribe", "clicks").load()

works in any session, ``spark.newSession()`` too. ``spark_source.register(spark)`` still works and
registers the same class explicitly.
"""
from spark_source.data_source import RiverlogDataSource as DefaultSource

__all__ = ["DefaultSource"]

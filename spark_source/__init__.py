"""Riverlog topics as a Spark data source: ``spark.read/readStream/write/writeStream.format("riverlog")``.

    import spark_source
    spark_source.register(spark)
    df = (spark.readStream.format("riverlog")
          .option("riverlog.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "clicks").load())

The output schema is Spark's Kafka source's. Options and their defaults: docs/spark.md.
"""
from __future__ import annotations

from spark_source.data_source import RiverlogDataSource


def register(spark) -> None:
    """Make ``format("riverlog")`` available in this SparkSession (reading and writing); a local
    session whose ``PYSPARK_PYTHON`` is not set runs its workers with the driver's interpreter."""
    from spark_source.registration import register_data_source
    register_data_source(spark, RiverlogDataSource)


__all__ = ["RiverlogDataSource", "register"]

"""Writing Spark DataFrames to Riverlog topics: ``df.write/writeStream.format("riverlog")``.

    import spark_sink
    spark_sink.register(spark)
    (df.selectExpr("CAST(id AS STRING) AS key", "payload AS value")
       .writeStream.format("riverlog")
       .option("riverlog.bootstrap.servers", "127.0.0.1:9092").option("topic", "clicks")
       .option("checkpointLocation", "/tmp/ck").start())

Exactly-once by default (``deliveryGuarantee``); options and the protocol: docs/spark.md.
"""
from __future__ import annotations

import spark_source


def register(spark) -> None:
    """Make ``format("riverlog")`` available in this SparkSession (one data source reads and writes)."""
    spark_source.register(spark)


__all__ = ["register"]

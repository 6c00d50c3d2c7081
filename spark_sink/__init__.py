"""Writing Spark DataFrames to Riverlog topics: ``df.write/writeStream.format("riverlog")``.

    import spark_source
    spark_source.register(spark)          # "riverlog" reads and writes
    (df.selectExpr("CAST(id AS STRING) AS key", "payload AS value")
       .writeStream.format("riverlog")
       .option("riverlog.bootstrap.servers", "127.0.0.1:9092").option("topic", "clicks")
       .option("checkpointLocation", "/tmp/ck").start())

Exactly-once by default (``deliveryGuarantee``), through the client's exactly-once protocol
(:mod:`broker.client.exactly_once`); options and the protocol: docs/spark.md. This package owns the
writing half of the data source and ``spark_source`` extends it with reading, so an application
that only writes may register this half alone with :func:`register`.
"""
from __future__ import annotations

from broker.client.exactly_once import TransactionLostError
from spark_sink.data_source import RiverlogSinkDataSource
from spark_sink.protocol import SinkReusedError


def register(spark) -> None:
    """Make ``format("riverlog")`` writable in this SparkSession (writing only: it replaces a
    ``riverlog`` registered by ``spark_source.register``, which reads too)."""
    spark.dataSource.register(RiverlogSinkDataSource)


def activate_in_thread(spark) -> None:
    """Make ``spark`` the calling thread's active session. PySpark 4.2 finds a Python data source
    named in ``writeStream.format`` through that session, which a thread started by the
    application (a REST handler, a supervisor) does not have: ``start()`` would fail with
    ``DATA_SOURCE_NOT_FOUND``."""
    spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)


__all__ = ["RiverlogSinkDataSource", "SinkReusedError", "TransactionLostError", "activate_in_thread", "register"]

"""The writing half of the ``riverlog`` data source; ``spark_source`` plugs reading into it.

The layer map runs one way: ``spark_source.RiverlogDataSource`` extends this class with its
readers, so ``spark_source.register(spark)`` gives one ``riverlog`` source that reads and writes,
while this package never imports ``spark_source``. ``spark_sink.register(spark)`` registers this
class alone, for applications that only write.
"""
from __future__ import annotations

from pyspark.sql.datasource import DataSource

from broker.errors import InvalidConfigError


class RiverlogSinkDataSource(DataSource):
    """The writing half of ``format("riverlog")`` (``spark_source.RiverlogDataSource`` adds
    reading): each micro-batch is written exactly once through ``broker.client.exactly_once``.

        (df.selectExpr("CAST(user AS BINARY) AS key", "CAST(n AS STRING) AS value")
           .writeStream.format("riverlog").option("riverlog.bootstrap.servers", servers)
           .option("topic", "counts").option("checkpointLocation", path).start())
    """

    @classmethod
    def name(cls) -> str:
        return "riverlog"

    def writer(self, schema, overwrite: bool):
        if overwrite:  # Spark's Kafka sink refuses Overwrite too: a topic cannot be emptied and rewritten
            raise InvalidConfigError("save mode 'overwrite' is not allowed for riverlog (nor for Spark's Kafka "
                                     "sink): a topic is append-only; use mode('append')", config="mode")
        from spark_sink.writer import BatchWriter
        return BatchWriter(self.options, schema)

    def streamWriter(self, schema, overwrite: bool):
        # ``overwrite`` is Complete output mode: every micro-batch's whole result is appended to the
        # topic, as Spark's Kafka sink does in that mode.
        from spark_sink.writer import StreamWriter
        return StreamWriter(self.options, schema)

    def schema(self):
        raise _writes_only()

    def reader(self, schema):
        raise _writes_only()

    def streamReader(self, schema):
        raise _writes_only()


def _writes_only() -> InvalidConfigError:
    return InvalidConfigError("this SparkSession registered 'riverlog' with spark_sink.register(spark), which only "
                              "writes; call spark_source.register(spark) to read and write")

"""The ``riverlog`` data source: reading (this package) plugged into the writing half that
``spark_sink`` owns, so one registered name reads and writes and the dependency runs one way."""
from __future__ import annotations

from spark_sink.data_source import RiverlogSinkDataSource
from spark_source.options import SourceOptions, check_fixed_schema, output_schema


class RiverlogDataSource(RiverlogSinkDataSource):
    """``format("riverlog")`` for ``read``, ``readStream``, ``write`` and ``writeStream``, with the
    options and output schema of Spark's Kafka source and sink.

        spark_source.register(spark)
        df = (spark.readStream.format("riverlog")
              .option("riverlog.bootstrap.servers", "127.0.0.1:9092").option("subscribe", "clicks").load())
    """

    @classmethod
    def name(cls) -> str:
        return "riverlog"

    def schema(self):
        return output_schema(SourceOptions.include_headers_of(self.options))

    def reader(self, schema):
        from spark_source.reader import BatchReader
        options = SourceOptions.parse(self.options, streaming=False)
        check_fixed_schema(schema, options.include_headers)
        return BatchReader(options)

    def streamReader(self, schema):
        from spark_source.reader import StreamReader
        options = SourceOptions.parse(self.options, streaming=True)
        check_fixed_schema(schema, options.include_headers)
        return StreamReader(options)

"""The ``riverlog`` data source: one name for reading (this package) and writing (``spark_sink``)."""
from __future__ import annotations

from pyspark.sql.datasource import DataSource

from spark_source.options import SourceOptions, output_schema


class RiverlogDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "riverlog"

    def schema(self):
        return output_schema(SourceOptions.include_headers_of(self.options))

    def reader(self, schema):
        from spark_source.reader import BatchReader
        return BatchReader(SourceOptions.parse(self.options, streaming=False))

    def streamReader(self, schema):
        from spark_source.reader import StreamReader
        return StreamReader(SourceOptions.parse(self.options, streaming=True))

    def writer(self, schema, overwrite: bool):
        from spark_sink.writer import BatchWriter
        return BatchWriter(self.options, schema)

    def streamWriter(self, schema, overwrite: bool):
        from spark_sink.writer import StreamWriter
        return StreamWriter(self.options, schema)

"""The ceiling of Spark's Python data source read path: a source that yields, from memory and with
no broker, Arrow batches shaped as ``format("riverlog")`` yields them (same schema, same number of
partitions, same batch sizes). What ``riverlog`` reads below this is the broker, the consumer and
the conversion; what this reads below Parquet is Spark's Python worker and the Arrow hand-over.

    spark.dataSource.register(ArrowCeiling)
    spark.read.format("arrow_ceiling").option("rows", 1_000_000).option("partitions", 2).load()
"""
from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from spark_source.options import output_schema

# Built once per Python worker (workers are reused across tasks), so a timed read only hands them over.
_BATCHES: dict[tuple, list] = {}


def batches(partition: int, start: int, until: int, batch_rows: int, value_size: int) -> list:
    import pyarrow as pa
    key = (partition, start, until, batch_rows, value_size)
    if key not in _BATCHES:
        out = []
        for a in range(start, until, batch_rows):
            n = min(batch_rows, until - a)
            out.append(pa.RecordBatch.from_arrays([
                pa.nulls(n, pa.binary()), pa.array([b"x" * value_size] * n, pa.binary()),
                pa.array(["bench"] * n, pa.string()), pa.array([partition] * n, pa.int32()),
                pa.array(range(a, a + n), pa.int64()),
                pa.array([1_700_000_000_000_000] * n, pa.timestamp("us", tz="UTC")),
                pa.array([0] * n, pa.int32())],
                names=["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]))
        _BATCHES[key] = out
    return _BATCHES[key]


class CeilingReader(DataSourceReader):
    def __init__(self, options: dict):
        self.rows = int(options.get("rows", 1_000_000))
        self.parts = int(options.get("partitions", 2))
        self.batch_rows = int(options.get("batchrows", 10_000))
        self.value_size = int(options.get("valuesize", 100))

    def partitions(self):
        step = -(-self.rows // self.parts)
        return [InputPartition((p, 0, min(step, self.rows - p * step))) for p in range(self.parts)]

    def read(self, partition):
        p, start, until = partition.value
        yield from batches(p, start, until, self.batch_rows, self.value_size)


class ArrowCeiling(DataSource):
    @classmethod
    def name(cls) -> str:
        return "arrow_ceiling"

    def schema(self):
        return output_schema(False)

    def reader(self, schema):
        return CeilingReader(self.options)

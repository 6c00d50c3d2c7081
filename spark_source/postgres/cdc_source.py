"""``format("postgres-cdc")``: PostgreSQL changes as a Spark stream, in Kafka's record shape.

    changes = (spark.readStream.format("postgres-cdc").option("dsn", "postgresql://app@db/shop")
               .option("table.include.list", "public.customers,public.orders").option("slot.name", "lake")
               .load())

Rows have the schema of Spark's Kafka source (``key``, ``value``, ``topic``, ``partition``,
``offset``, ``timestamp``, ``timestampType``, ``headers``): key and value are Debezium's JSON,
the topic is ``<topic.prefix>.<schema>.<table>``, ``partition`` is 0, ``offset`` and the header
``riverlog.cdc.commit_lsn`` are the commit LSN (the consistent point for snapshot rows),
``riverlog.cdc.order`` the record's position in its transaction or in the snapshot, and
``timestamp`` the commit time (the read time for snapshot rows). A topic read with
``format("riverlog")`` that a CDC connector wrote looks the same.

The driver owns the connections (:class:`~spark_source.postgres.capture.Capture`): it reads ahead
when Spark asks for the latest offset and hands each batch's records to the tasks inside their
input partitions (Arrow IPC bytes), because one slot has exactly one reader. The slot is
acknowledged with the end of a batch only once Spark has committed it — when Spark plans the next
batch from there, or calls ``commit`` — so a crash replays the uncommitted batch and never skips.
"""
from __future__ import annotations

import itertools
import logging

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow

from spark_source.options import output_schema
from spark_source.postgres.options import CdcOptions

log = logging.getLogger(__name__)

HEADER_TYPE = pa.list_(pa.field("element", pa.struct([("key", pa.string()), ("value", pa.binary())])))
ARROW_SCHEMA = pa.schema([("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
                          ("partition", pa.int32()), ("offset", pa.int64()),
                          ("timestamp", pa.timestamp("us", tz="UTC")), ("timestampType", pa.int32()),
                          ("headers", HEADER_TYPE)])
ROWS_PER_PARTITION = 50_000
ROWS_PER_BATCH = 5_000   # records turned into Arrow at a time


def to_arrow(records) -> pa.RecordBatch:
    """(CdcRecord, timestamp µs) pairs as one record batch in Spark's Kafka source schema."""
    return pa.RecordBatch.from_arrays([
        pa.array([r.key for r, _ in records], pa.binary()),
        pa.array([r.value for r, _ in records], pa.binary()),
        pa.array([r.topic for r, _ in records], pa.string()),
        pa.array([0] * len(records), pa.int32()),
        pa.array([r.commit_lsn for r, _ in records], pa.int64()),
        pa.array([ts for _, ts in records], pa.timestamp("us", tz="UTC")),
        pa.array([0] * len(records), pa.int32()),
        pa.array([[{"key": k, "value": v} for k, v in r.headers] for r, _ in records], HEADER_TYPE),
    ], schema=ARROW_SCHEMA)


def _ipc(chunks) -> bytes:
    """Record lists as one Arrow IPC stream, a record batch each, zstd-compressed: Debezium's JSON
    repeats its schema in every record, and a batch's partitions all live in the driver while
    Spark plans it."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, ARROW_SCHEMA, options=pa.ipc.IpcWriteOptions(compression="zstd")) as writer:
        for chunk in chunks:
            writer.write_batch(to_arrow(chunk))
    return sink.getvalue().to_pybytes()


def _slices(records, size: int):
    """``records`` (an iterator) in lists of up to ``size``."""
    while True:
        chunk = list(itertools.islice(records, size))
        if not chunk:
            return
        yield chunk


def _partitions(records) -> list[bytes]:
    """``records`` as IPC streams of up to ``ROWS_PER_PARTITION`` rows, built ``ROWS_PER_BATCH``
    records at a time, so the driver holds the batch compressed, never as Python records."""
    records, out = iter(records), []
    while True:
        first = list(itertools.islice(records, ROWS_PER_BATCH))
        if not first:
            return out
        rest = _slices(itertools.islice(records, ROWS_PER_PARTITION - len(first)), ROWS_PER_BATCH)
        out.append(_ipc(itertools.chain([first], rest)))


class RecordsPartition(InputPartition):
    """A slice of one batch's records, as Arrow IPC bytes."""

    def __init__(self, data: bytes):
        super().__init__(data)
        self.data = data


class PostgresCdcDataSource(DataSource):
    """``spark.readStream.format("postgres-cdc")`` and ``spark.read.format("postgres-cdc")``; options in
    docs/cdc.md and :mod:`spark_source.postgres.options`."""

    @classmethod
    def name(cls) -> str:
        return "postgres-cdc"

    def schema(self):
        return output_schema(True)

    def streamReader(self, schema):
        batch_only = sorted(k for k in self.options if str(k).lower() in ("endingoffsets", "snapshot.max.threads"))
        if batch_only:
            from broker.errors import InvalidConfigError
            raise InvalidConfigError(f"option '{batch_only[0]}' is for a batch read (spark.read) only; a stream "
                                     "has no end and reads its snapshot in one task", config=batch_only[0])
        return CdcStreamReader(CdcOptions.parse(self.options))

    def reader(self, schema):
        """``spark.read``: the snapshot, or the changes pending in a slot (:mod:`~spark_source.postgres.batch`)."""
        from spark_source.postgres.batch import CdcBatchReader
        return CdcBatchReader.from_options(self.options)


class CdcStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: CdcOptions):
        self.options = options
        self._capture = None
        self._until: int | None = None   # Trigger.AvailableNow: nothing committed after this LSN

    def __getstate__(self):  # tasks get the options, never the driver's connections
        return {"options": self.options, "_capture": None, "_until": None}

    @property
    def capture(self):
        if self._capture is None:
            from spark_source.postgres.capture import Capture
            self._capture = Capture(self.options)
        return self._capture

    def initialOffset(self) -> dict:
        """The same answer every time (Spark asks again when it replays the first batch): the
        slot is made when that batch is planned (``capture.NEW``)."""
        from spark_source.postgres.capture import NEW, CdcOffset
        return CdcOffset(NEW, 0).to_json()

    def getDefaultReadLimit(self):
        if self.options.max_changes_per_trigger:
            return ReadMaxRows(self.options.max_changes_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict, limit) -> dict:
        from spark_source.postgres.capture import CdcOffset
        begin = CdcOffset.from_json(start)
        self.capture.acknowledge(begin)   # Spark plans from ``start`` only after that batch committed
        max_changes = limit.max_rows if isinstance(limit, ReadMaxRows) else self.options.max_changes_per_trigger
        return self.capture.next_offset(begin, max_changes, self._until).to_json()

    def prepareForTriggerAvailableNow(self) -> None:
        self._until = self.capture.mark()

    def partitions(self, start: dict, end: dict):
        from spark_source.postgres.capture import CdcOffset
        records = self.capture.iter_records(CdcOffset.from_json(start), CdcOffset.from_json(end))
        return [RecordsPartition(data) for data in _partitions(records)]

    def read(self, partition):
        data = getattr(partition, "data", None)
        if data:
            yield from pa.ipc.open_stream(data).read_all().to_batches()

    def commit(self, end: dict) -> None:
        from spark_source.postgres.capture import CdcOffset
        self.capture.acknowledge(CdcOffset.from_json(end))

    def stop(self) -> None:
        if self._capture is not None:
            self._capture.close()
            self._capture = None


def register(spark) -> None:
    """Make ``format("postgres-cdc")`` available in this SparkSession (it is found without this
    call when Riverlog is installed: ``pyspark_postgres_cdc``, but then only if Spark's workers run
    an interpreter with Riverlog). Registered here, a local session whose ``PYSPARK_PYTHON`` is not
    set runs this source's workers with the driver's interpreter
    (:func:`spark_source.registration.worker_python`)."""
    from spark_source.registration import register_data_source
    register_data_source(spark, PostgresCdcDataSource)

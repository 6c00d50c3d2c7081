"""One connector as one Structured Streaming query: the record frame, converters, transforms,
error handling and the exactly-once write, in Kafka Connect's order.

Source connector (Kafka's ``AbstractWorkerSourceTask``)::

    connector.read_stream() -> transforms -> key/value converters -> foreachBatch:
        rows + connect-offsets records -> format("riverlog") write, sinkId/batchId (one transaction)

Sink connector (Kafka's ``WorkerSinkTask``)::

    format("riverlog") (group connect-<name>) -> key/value converters -> transforms -> foreachBatch:
        connector.write_batch(good rows)  ->  DLQ rows + the group's offsets in one transaction
                                              (or a plain group commit when no row failed)

Recovery. Spark's checkpoint (``<state.dir>/<group.id>/<connector>-<hash>/checkpoint``) replays an
unfinished batch with the same id, which the exactly-once sink recognises. The broker is the
truth: a query without a checkpoint starts from connect-offsets (source) or the consumer group's
committed offsets (sink), and writes under a new ``sinkId`` (written to ``sink-id`` next to the
checkpoint) so its batch ids, which restart at 0, are not mistaken for the old query's.

Jobs per batch. A batch runs the connector's write and nothing else it can do without: under
``errors.tolerance=none`` a flagged record fails the write itself (a guard in the plan, see
:mod:`connect.record_frame`) instead of a scan before it; a JSON converter's type is inferred once
and carried to later batches until a record does not fit it; the frame is persisted only when it
is read twice (dead-letter queue, ``errors.log.enable``). A sink's converters, transforms and error
split are planned in Python once per converter type and moved onto each later batch
(:mod:`connect.plan_template`); the batch that learns a type is planned as the batches that carry
it, so its plan is the template and the second batch is not planned again.
"""
from __future__ import annotations

import json

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import NullType

from broker.client import Consumer, TopicPartition
from spark_sink import activate_in_thread

from connect import converters, dead_letter, offset_commit, record_frame, sink_input, topic_tracking
from connect.config import ConnectorConfig, WorkerConfig
from connect.connector import Connector, SinkConnector, SourceConnector
from connect.connector_state import (ConnectorPaths, batch_end_offset, batch_start_offset, finish_pending, group_id,
                                     held_partitions)
from connect.dead_letter_topic import ensure_dead_letter_topic
from connect.errors import DataError
from connect.plan_template import PlanTemplate
from connect.plugins import canonical, canonical_transform_config
from connect.config import CONVERTERS
from connect.storage import ConnectStorage
from connect.topic_tracking import TrackingConfig
from connect.transforms import chain, from_connector_config

BYTE_ARRAY = converters.BYTE_ARRAY_CONVERTER


def _converter(config: ConnectorConfig, worker: WorkerConfig, which: str, default: str | None = None):
    name = config.values.get(f"{which}.converter") or default or getattr(worker, f"{which}_converter")
    settings = {k[len(which) + 11:]: v for k, v in worker.originals.items() if k.startswith(f"{which}.converter.")}
    settings.update(config.converter_config(which))
    return converters.converter(canonical(CONVERTERS, name), settings, is_key=which == "key")


def _bind(conv, frame: DataFrame, column: str):
    """A JSON converter given no type learns the batch's (the envelope's schema, or the type
    inferred from plain JSON), as Kafka's reads each record's schema as it comes."""
    if _unbound(conv):
        try:
            bound = conv.bind(frame, column)
        except converters.NothingToBind:   # an empty or all-null batch keeps the converter unbound
            return conv
        except DataError as e:   # no type Spark can hold: unbound, its records fail saying why
            return conv.unbound_because(str(e))
        # Plain JSON of which no row parses infers VOID: no type learnt, so stay unbound.
        return conv if isinstance(bound.data_type, NullType) else bound
    return conv


def _unbound(conv) -> bool:
    return isinstance(conv, converters.JsonConverter) and conv.data_type is None


class _Rebind(Exception):
    """A record did not fit a converter's carried type: infer again from this batch and rerun it."""


def apply_tolerance(frame: DataFrame, config: ConnectorConfig, rebind: bool = False) -> tuple[DataFrame, DataFrame]:
    """(good, bad) records per ``errors.tolerance``, planned without running a job: only
    ``errors.log.enable`` scans the flagged records here; otherwise under ``none`` the job that
    reads ``good`` fails on the first one (see :func:`translated`)."""
    none = config.errors_tolerance == "none"
    if not config.errors_log_enable:
        return record_frame.split_errors(frame, dead_letter.describe_column(frame) if none else None, rebind)
    good, bad = record_frame.split_errors(frame, rebind=rebind)
    rows = dead_letter.report(bad, config)
    if rows and none:
        raise dead_letter.fail(rows, config)
    return good, bad


def translated(exc: BaseException, config: ConnectorConfig) -> BaseException:
    """What a failed write means: a guard's flagged record as Kafka's tolerance error (naming it),
    a misfit as :class:`_Rebind`, anything else itself."""
    marked = record_frame.raised(exc)
    if marked is None:
        return exc
    kind, message = marked
    if kind == record_frame.REBIND:
        return _Rebind(message)
    return dead_letter.tolerance_exceeded(message, config)


class Pipeline:
    """Builds a connector's streaming query; the ``foreachBatch`` function is this object."""

    def __init__(self, spark, worker: WorkerConfig, config: ConnectorConfig, connector: Connector,
                 storage: ConnectStorage, paths: ConnectorPaths):
        self.spark, self.worker, self.config, self.connector = spark, worker, config, connector
        self.storage, self.paths = storage, paths
        self.steps = from_connector_config(canonical_transform_config(config.originals))
        default = BYTE_ARRAY if getattr(connector, "bytes_in_bytes_out", False) else None
        self.key_converter = _converter(config, worker, "key", default)
        self.value_converter = _converter(config, worker, "value", default)
        if getattr(connector, "pre_serialized", False):
            # The connector wrote its records as the configured converters would (Debezium's JSON):
            # its bytes pass through unchanged.
            self.key_converter = converters.converter(BYTE_ARRAY, is_key=True)
            self.value_converter = converters.converter(BYTE_ARRAY)
        self.tasks = len(connector.task_configs(config.tasks_max))
        self._bound: dict[str, converters.JsonConverter] = {}  # types learnt from a batch, carried on
        self.template = PlanTemplate()  # a sink batch's plan, moved onto the next batch
        self.sink_id = ""
        self.offsets_topic = storage.offset_log.topic
        self._query_start = None  # a sink query's startingOffsets, as kept beside its checkpoint

    # ------------------------------------------------------------------------------ starting
    def start(self):
        servers = self.connector.output_bootstrap_servers if isinstance(self.connector, SourceConnector) \
            else self.worker.bootstrap_servers
        previous = self.paths.previous()
        if previous is not None:
            for owner in (previous[0], previous[0] + "-dlq"):
                finish_pending(previous[1] or servers, owner)
        self.sink_id = self.paths.sink_id(self.config.name, servers)
        committer = None
        if isinstance(self.connector, SourceConnector):
            frame = topic_tracking.observed(self._source_records(self.connector.read_stream()),
                                            TrackingConfig.of(self.worker))
            committer = self._committer_options()
        else:
            # Kafka's DeadLetterQueueReporter.createAndSetup: the DLQ topic before the first record.
            ensure_dead_letter_topic(self.storage.offset_log.client_config, self.config)
            frame = self._sink_input()
        w = (frame.writeStream.queryName(f"connect-{self.config.name}")
             .option("checkpointLocation", self.paths.checkpoint)
             .trigger(processingTime=self.worker.originals.get("connect.trigger.interval", "500 milliseconds")))
        if committer is None:
            return w.foreachBatch(self).start()
        # A source connector's records and its offsets in the riverlog sink's streaming write: the
        # committer writes the offsets in the batch's transaction (connect.offset_commit).
        w = w.format("riverlog").option("riverlog.bootstrap.servers", servers).option("sinkId", self.sink_id)
        for k, v in committer.items():
            w = w.option(k, v)
        w = self._with_producer_settings(w)
        activate_in_thread(frame.sparkSession)   # the worker starts queries from its REST and supervisor threads
        return w.start()

    def _with_producer_settings(self, w):
        """A write (``riverlog`` sink) with the connector's producer settings: the worker's
        ``producer.*`` under its ``producer.override.*`` (Kafka's ``baseProducerConfigs``, used for
        a source's records and a sink's dead-letter queue alike)."""
        for k, v in self.config.producer_overrides.items():
            w = w.option(f"riverlog.{k}", str(v))
        return w

    def _committer_options(self) -> dict[str, str] | None:
        """The streaming write's options for a source connector whose offsets its committer can
        write (None: ``foreachBatch`` writes each batch): the offsets go to the worker's cluster,
        and no batch is scanned twice for ``errors.log.enable``."""
        c = self.connector
        if c.output_bootstrap_servers != self.worker.bootstrap_servers or self.config.errors_log_enable:
            return None
        log = self.storage.offset_log
        return offset_commit.committer_options(c, self.config.name, self.paths.checkpoint, log.topic, log.partitions)

    def _sink_input(self) -> DataFrame:
        frame, self._query_start = sink_input.read(self.spark, self.config, self.connector, self.paths)
        return frame

    # ------------------------------------------------------------------------------ batches
    def __call__(self, df: DataFrame, batch_id: int) -> None:
        if isinstance(self.connector, SourceConnector):
            self._source_batch(df, batch_id)
        else:
            self._sink_batch(df, batch_id)

    def _check(self, frame: DataFrame, rebind: bool = False) -> tuple[DataFrame, DataFrame]:
        return apply_tolerance(frame, self.config, rebind)

    def _failed(self, exc: Exception) -> None:
        failure = translated(exc, self.config)
        if failure is exc:
            raise exc
        raise failure from None

    def _source_records(self, stream: DataFrame) -> DataFrame:
        """Transforms, converters and ``errors.tolerance`` on the streaming frame, planned once at
        start: built in each batch they cost more than the batch's write (every step is a
        projection Spark analyses). With ``errors.log.enable`` the batch splits off the errors."""
        frame = stream.select(*[F.col(x) for x in record_frame.RECORD_COLUMNS],
                              F.lit(None).cast(record_frame.ERROR_TYPE).alias(record_frame.ERROR))
        frame = chain(frame, self.steps)
        frame = converters.encode(converters.encode(frame, self.key_converter, "key"), self.value_converter, "value")
        return frame if self.config.errors_log_enable else self._source_output(self._check(frame)[0])

    def _source_output(self, good: DataFrame) -> DataFrame:
        if self.tasks > 1:
            good = good.repartition(self.tasks)  # tasks.max: the write's parallelism
        return record_frame.to_sink(good.withColumn("key", F.col("key").cast("binary"))
                                    .withColumn("value", F.col("value").cast("binary")), partition=True)

    def _source_batch(self, frame: DataFrame, batch_id: int) -> None:
        c = self.connector
        assert isinstance(c, SourceConnector)
        twice = self.config.errors_log_enable  # the report's scan, then the write
        if twice:
            frame = frame.persist()
        try:
            out = self._source_output(self._check(frame)[0]) if twice else frame
            pairs = c.source_offsets(batch_end_offset(self.paths.checkpoint, batch_id))
            same_cluster = c.output_bootstrap_servers == self.worker.bootstrap_servers
            if same_cluster and pairs:
                records = [self.storage.offset_record(self.config.name, p, o) for p, o in pairs]
                offsets = self.spark.createDataFrame(
                    [(r.topic, r.key, r.value, [], None, r.partition) for r in records], out.schema)
                out = out.unionByName(offsets)
            w = (out.write.format("riverlog").mode("append")
                 .option("riverlog.bootstrap.servers", c.output_bootstrap_servers)
                 .option("sinkId", self.sink_id).option("batchId", str(batch_id)))
            w = self._with_producer_settings(w)
            try:
                w.save()
            except Exception as e:  # noqa: BLE001 - re-raised by _failed
                self._failed(e)
            if not same_cluster and pairs:
                self.storage.put_offsets(self.config.name, pairs)
        finally:
            if twice:
                frame.unpersist()

    def _sink_batch(self, df: DataFrame, batch_id: int) -> None:
        c = self.connector
        assert isinstance(c, SinkConnector)
        try:
            self._sink_write(c, df, batch_id)
        except _Rebind:
            self._bound.clear()  # a schema change: learn the types from this batch, as Kafka would
            try:
                self._sink_write(c, df, batch_id)
            except _Rebind:   # not expected (the types were learnt from these rows): read them as bound
                self._bound.clear()
                self._sink_write(c, df, batch_id, carry=False)

    def _converters(self, df: DataFrame, carry: bool = True) -> tuple[list, bool]:
        """The key and value converters for a batch, and whether the plan they give is the next
        batch's too: a type learnt from an earlier batch is carried over; an unbound JSON converter
        learns it from this one (a job, once). With ``carry``, a type learnt here is applied in its
        carried form where every row it was learnt from fits that form alike
        (``JsonConverter.fits_own_batch``): this batch is then planned as the next one will be."""
        out, frame, same = [], None, True
        for which, conv in (("key", self.key_converter), ("value", self.value_converter)):
            if which in self._bound:
                out.append(self._bound[which].carried())
                continue
            if _unbound(conv):
                frame = record_frame.from_source(df) if frame is None else frame
                bound = _bind(conv, frame, which)
                if bound is not conv and bound.carriable():
                    self._bound[which] = bound
                    if carry and bound.fits_own_batch():
                        out.append(bound.carried())
                        continue
                conv, same = bound, False
            out.append(conv)
        return out, same

    def _sink_write(self, c: SinkConnector, df: DataFrame, batch_id: int, carry: bool = True) -> None:
        (key_conv, value_conv), same = self._converters(df, carry)
        end = {t: ps for t, ps in batch_end_offset(self.paths.checkpoint, batch_id).items() if ps}
        if (_unbound(key_conv) or _unbound(value_conv)) and df.isEmpty():
            # Nothing to learn a type from and nothing to write (e.g. only aborted records were
            # read): the offsets move on, the transforms are not planned over a type-less column.
            if end:
                self._commit(c.input_bootstrap_servers, end)
            return
        rebind = any(getattr(conv, "carried_over", False) for conv in (key_conv, value_conv))
        dlq = self.config.errors_tolerance == "all" and bool(self.config.dlq_topic)
        twice = dlq or self.config.errors_log_enable  # read again for the DLQ or the error log
        # The plan is the same as the last batch's while the converters are (see PlanTemplate).
        key = (self._bound.get("key"), self._bound.get("value"), rebind, twice) if same else None

        def converted(batch: DataFrame) -> DataFrame:
            frame = record_frame.from_source(batch)
            frame = converters.decode(converters.decode(frame, key_conv, "key"), value_conv, "value")
            return chain(frame, self.steps)

        frame = good = bad = None
        try:
            try:
                if twice:
                    frame = self.template.frame(key, df, converted).persist()
                    good, bad = self._good(frame, rebind)
                    good = c.prepare(good)
                else:
                    good = self.template.frame(key, df,
                                               lambda batch: c.prepare(self._good(converted(batch), rebind)[0]))
                if c.wants_batch_start:
                    c.batch_start, c.batch_partitions = self._batch_range(c, batch_id, end)
                rejected = c.write_batch(good, batch_id)
                if rejected is not None:  # fails the batch under errors.tolerance=none
                    failed = self._write_failures(converted(df) if frame is None else frame, rejected, c)
                    bad = None if bad is None else bad.unionByName(failed)
                if dlq and not bad.isEmpty():
                    w = (dead_letter.dead_letter_frame(bad, self.config).write.format("riverlog").mode("append")
                         .option("riverlog.bootstrap.servers", self.worker.bootstrap_servers)
                         .option("sinkId", self.sink_id + "-dlq").option("batchId", str(batch_id)))
                    if end:
                        w = w.option("groupId", group_id(self.config.name)).option("groupOffsets", json.dumps(end))
                    self._with_producer_settings(w).save()   # Kafka's DLQ producer takes them too
                    end = {}
            except Exception as e:  # noqa: BLE001 - re-raised by _failed
                self._failed(e)
            if end:
                self._commit(c.input_bootstrap_servers, end)
        finally:
            if frame is not None:
                frame.unpersist()

    def _batch_range(self, c: SinkConnector, batch_id: int,
                     end: dict) -> tuple[dict[tuple[str, int], int], tuple[tuple[str, int], ...]]:
        """Where the batch starts in each partition it may hold (those of its end offsets): the same
        for every attempt at the batch, a replay with the checkpoint or, without it, the new query's
        first batch from the group's offsets. Where the query started at earliest (or the partition
        is new), the partition's first offset now. And the partitions it may hold records of: a
        range that is not empty, or one whose start had to be looked up (retention may have moved
        the first offset since Spark read from it)."""
        start = batch_start_offset(self.paths.checkpoint, batch_id, self._query_start)
        held = held_partitions(start, end)
        unknown = [tp for tp in held if start.get(tp, -1) < 0]   # held includes every unknown start
        if unknown:
            consumer = Consumer({"bootstrap.servers": c.input_bootstrap_servers, "group.id": group_id(self.config.name),
                                 "enable.auto.commit": False})
            try:
                for t, p in unknown:
                    start[(t, p)] = consumer.get_watermark_offsets(TopicPartition(t, p), timeout=30)[0]
            finally:
                consumer.close()
        return start, held

    def _good(self, frame: DataFrame, rebind: bool) -> tuple[DataFrame, DataFrame]:
        """(the rows the connector writes, the flagged rows) of a converted frame."""
        good, bad = self._check(frame, rebind)
        good = good.drop(record_frame.ORIGINAL)
        if self.tasks > 1:
            good = good.repartition(self.tasks)  # tasks.max: the write's parallelism
        return good, bad

    def _write_failures(self, frame: DataFrame, rejected: DataFrame, c) -> DataFrame:
        """The records the sink could not write (``rejected``: topic, partition, offset, message), as
        consumed and flagged at Kafka's TASK_PUT stage: dead letters with ``errors.tolerance=all``;
        with ``none`` the connector fails naming the first of them."""
        r = rejected.select("topic", "partition", "offset", F.col("message").cast("string").alias("__put_message"))
        failed = (frame.drop(record_frame.ERROR).join(r, ["topic", "partition", "offset"])
                  .withColumn(record_frame.ERROR, record_frame.error_struct("task_put", type(c).class_name,
                                                                            F.col("__put_message"))
                              .cast(record_frame.ERROR_TYPE))
                  .drop("__put_message"))
        if self.config.errors_tolerance == "none" or self.config.errors_log_enable:
            rows = dead_letter.report(failed, self.config)
            if rows and self.config.errors_tolerance == "none":
                raise dead_letter.fail(rows, self.config)
        return failed.select(*frame.columns)

    def _commit(self, servers: str, end: dict) -> None:
        consumer = Consumer({"bootstrap.servers": servers, "group.id": group_id(self.config.name),
                             "enable.auto.commit": False})
        try:
            consumer.commit(offsets=[TopicPartition(t, int(p), int(o)) for t, ps in end.items()
                                     for p, o in ps.items()], asynchronous=False)
        finally:
            consumer.close()


__all__ = ["Pipeline", "apply_tolerance", "translated"]

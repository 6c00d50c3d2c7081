"""The ``riverlog`` sink: Spark's Arrow writers over Riverlog producers.

``write()`` runs on executors (the writer is pickled there) and produces each Arrow batch with
``Producer.produce_batch``. Exactly-once (the default) is the client's protocol
(:mod:`broker.client.exactly_once`) with the sink as its owner: every task attempt writes inside
its own transaction and hands its transaction handle to the driver, whose ``commit()`` records the
decision and then ends those transactions. At-least-once: an idempotent producer with
``acks=all``, flushed before ``write()`` returns.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage

from broker.client import ExactlyOnce, Producer
from broker.client.exactly_once import SKIP, DecisionLog
from broker.errors import InvalidConfigError, InvalidTimestampError, RiverlogError
from spark_sink import crash_points
from spark_sink.options import SinkOptions, check_schema
from spark_sink.protocol import Attempt, RunMemo, sink_errors, stream_run

_FLUSH_TIMEOUT_S = 300.0
_RUNS = RunMemo()  # per Python worker: lets a run's later batches skip the replay check


@dataclass
class SinkCommitMessage(WriterCommitMessage):
    sink_id: str
    batch_id: int
    partition_id: int
    rows: int
    attempt: Attempt | None = None   # None: nothing was written (no rows, at-least-once, or skipped)
    skipped: bool = False            # the batch was already decided by an earlier driver
    checked: bool = False            # the task found the batch undecided: the driver need not look again


class _RiverlogWriter:
    # Whether a batch the run memo vouches for (a later batch of a run that found one undecided)
    # counts as checked, so the driver's commit need not read the decision log either. True where
    # a run writes each batch id once (a streaming write); a foreachBatch body may write its batch
    # again in the same run, and that write must find the batch decided.
    memo_vouches = False

    def __init__(self, options, schema):
        self.options = SinkOptions.parse(options)
        check_schema(schema, self.options)
        # Spark's taskAttemptId() starts again at 0 in a new application: after a driver restart
        # a replay's attempt could take the id of a killed attempt of the previous run, and that
        # attempt, opening late, would abort the replay's (decided) transaction. A nonce drawn on
        # the driver once per writer keeps the attempts of different runs apart.
        self._run_nonce = uuid.uuid4().int % 10**9

    def _attempt(self, ctx) -> int:
        return self._run_nonce * 10**12 + ctx.taskAttemptId()

    # ------------------------------------------------------------------------------ executors
    def write_partition(self, batches, sink_id: str, batch_id: int, partition_id: int, attempt: int,
                        check_replay: bool, run_id: str | None = None) -> SinkCommitMessage:
        """Produce one task's rows; in exactly-once mode leave its transaction open for the driver.
        ``run_id``: the streaming query's run, whose later batches need no replay check (:class:`RunMemo`)."""
        opts = self.options
        eo = ExactlyOnce(opts.client_config(), sink_id) if opts.exactly_once else None
        checked = eo is not None and check_replay
        if checked and not _RUNS.known_undecided(sink_id, run_id, batch_id):
            with sink_errors():
                if eo.write_action(batch_id) == SKIP:
                    return SinkCommitMessage(sink_id, batch_id, partition_id, 0, skipped=True)
            _RUNS.found_undecided(sink_id, run_id, batch_id)
        elif checked:
            checked = self.memo_vouches
        txn_id = eo.transactional_id(batch_id, partition_id, attempt) if eo is not None else None
        producer = None
        errors: list = []
        rows = 0
        try:
            for batch in batches:
                if batch.num_rows == 0:
                    continue
                if producer is None:
                    producer = Producer(opts.producer_config(txn_id))
                    if txn_id is not None:
                        producer.init_transactions()
                        producer.begin_transaction()
                rows += _produce(producer, batch, opts.topic, errors, opts.writes_headers(batch.schema.names))
            if producer is None:
                return SinkCommitMessage(sink_id, batch_id, partition_id, 0, checked=checked)
            left = producer.flush(_FLUSH_TIMEOUT_S)
            if errors:
                raise errors[0].exception()
            if left:
                raise RiverlogError(f"{left} record(s) were not delivered within {_FLUSH_TIMEOUT_S}s")
            if txn_id is None:
                return SinkCommitMessage(sink_id, batch_id, partition_id, rows)
            return SinkCommitMessage(sink_id, batch_id, partition_id, rows, producer.transaction_handle(),
                                     checked=checked)
        except BaseException:
            if producer is not None and txn_id is not None:
                try:
                    producer.abort_transaction(5)
                except Exception:  # noqa: BLE001 - the driver's abort() finds it by its id prefix
                    pass
            raise
        finally:
            if producer is not None:
                producer.close(1)

    # ------------------------------------------------------------------------------ driver
    def _owner(self, messages) -> tuple[str | None, list]:
        """The sink id (the option, else the one the tasks used) and the messages of finished tasks."""
        done = [m for m in messages if m is not None]
        return self.options.sink_id or next((m.sink_id for m in done), None), done

    def _commit(self, messages, batch_id: int, record: bool) -> None:
        if not self.options.exactly_once:
            return
        sink_id, done = self._owner(messages)
        if sink_id is None:
            return
        opts = self.options
        # Every task found the batch undecided: reading the log again would tell nothing new.
        undecided = bool(done) and len(done) == len(messages) and all(m.checked for m in done)
        with ExactlyOnce(opts.client_config(), sink_id, transaction_timeout_ms=opts.transaction_timeout_ms,
                         log=crash_points.decision_log(opts.client_config())) as eo, sink_errors():
            eo.commit(batch_id, [m.attempt for m in done if m.attempt is not None], record=record,
                      offsets=opts.offsets(batch_id), group_id=opts.group_id, undecided=undecided,
                      records=opts.batch_records(batch_id))

    def _abort(self, messages, batch_id: int, record: bool) -> None:
        if not self.options.exactly_once:
            return
        sink_id, done = self._owner(messages)
        if sink_id is None:
            return  # no attempt reported: the replay's init_transactions and commit() end them
        with ExactlyOnce(self.options.client_config(), sink_id) as eo:
            eo.abort(batch_id, [m.attempt for m in done if m.attempt is not None], record=record)


class BatchWriter(_RiverlogWriter, DataSourceArrowWriter):
    """``df.write.format("riverlog")``: one job, one fresh sink id; all tasks commit together.

    With ``sinkId`` and ``batchId`` (inside ``foreachBatch``, e.g. for ``outputMode("update")``,
    which Python data source sinks do not offer), the write is that micro-batch of that sink and is
    recorded like a streaming one: a replayed batch id is recognised and not written twice. With
    ``groupId`` and ``groupOffsets`` too, the driver's commit also commits those offsets for that
    group in the same batch (the client's offsets attempt): a consume-transform-produce query's
    input progress becomes visible exactly when its output does. When ``batchId`` is the id of the
    micro-batch running the write, the tasks of its query run's later batches skip the replay check
    as a streaming write's do (:func:`spark_sink.protocol.stream_run`)."""

    def __init__(self, options, schema):
        super().__init__(options, schema)
        self.sink_id = self.options.sink_id or f"batch-{uuid.uuid4().hex}"
        self.batch_id = self.options.batch_id
        self.recorded = self.batch_id is not None and self.options.exactly_once
        if self.options.group_id is not None and self.batch_id is None:
            raise InvalidConfigError("option 'groupId' on a batch write commits one micro-batch's input offsets: it "
                                     "needs 'sinkId', 'batchId' and 'groupOffsets' (inside foreachBatch)",
                                     config="groupId")
        if self.options.transaction_records is not None and self.batch_id is None:
            raise InvalidConfigError("option 'transactionRecords' on a batch write needs 'sinkId' and 'batchId' (one "
                                     "micro-batch, whose records are written once)", config="transactionRecords")
        if self.recorded:
            DecisionLog(self.options.client_config()).ensure_topic()

    def write(self, iterator) -> SinkCommitMessage:
        from pyspark import TaskContext
        ctx = TaskContext.get()
        # Inside foreachBatch, the micro-batch's run: its later batches skip the replay check.
        run_id = stream_run(ctx.getLocalProperty, self.batch_id) if self.recorded else None
        return self.write_partition(iterator, self.sink_id, self.batch_id or 0, ctx.partitionId(),
                                    self._attempt(ctx), check_replay=self.recorded, run_id=run_id)

    def commit(self, messages) -> None:
        self._commit(messages, self.batch_id or 0, record=self.recorded)

    def abort(self, messages) -> None:
        self._abort(messages, self.batch_id or 0, record=self.recorded)


class StreamWriter(_RiverlogWriter, DataSourceStreamArrowWriter):
    """``writeStream.format("riverlog")``: one transaction per task attempt per micro-batch.

    The sink id is the ``sinkId`` option or else the query's id, which Spark keeps in the
    checkpoint: stable across restarts, new for a new checkpoint. With ``groupId``, the driver's
    commit also commits the batch's input offsets (its end offsets in the query's offset log) for
    that group in the batch's transaction: a consume-transform-produce query's progress becomes
    visible to the group exactly when its output does (Kafka Streams' exactly-once).
    """

    memo_vouches = True   # Spark writes a micro-batch once per run: a failed one ends the run

    def __init__(self, options, schema):
        super().__init__(options, schema)
        if self.options.group_offsets is not None:
            raise InvalidConfigError("option 'groupOffsets' names one foreachBatch micro-batch's offsets; a streaming "
                                     "write with 'groupId' reads each batch's from its offset log", config="groupOffsets")
        if self.options.group_id is not None:
            self.options.require_offset_log()
        if self.options.exactly_once:
            DecisionLog(self.options.client_config()).ensure_topic()

    def write(self, iterator) -> SinkCommitMessage:
        from pyspark import TaskContext
        ctx = TaskContext.get()
        batch_id = int(ctx.getLocalProperty("streaming.sql.batchId"))
        crash_points.crash_at("before_write", batch_id)
        sink_id = self.options.sink_id or ctx.getLocalProperty("sql.streaming.queryId")
        # Spark runs a streaming query's jobs in the job group of its runId (StreamExecution.runStream).
        return self.write_partition(iterator, sink_id, batch_id, ctx.partitionId(), self._attempt(ctx),
                                    check_replay=True, run_id=ctx.getLocalProperty("spark.jobGroup.id"))

    def commit(self, messages, batchId: int) -> None:
        self._commit(messages, batchId, record=True)
        crash_points.crash_at("before_spark_commit", batchId)

    def abort(self, messages, batchId: int) -> None:
        self._abort(messages, batchId, record=True)


# ------------------------------------------------------------------------------ routing
def _produce(producer: Producer, batch: pa.RecordBatch, topic_option: str | None, errors: list,
             with_headers: bool = True) -> int:
    """Produce one Arrow batch as Spark's Kafka sink sends its rows (``KafkaRowWriter.sendRow``):
    every row checked as a ``ProducerRecord`` first, then one ``produce_batch`` per topic carrying
    each row's partition, so rows bound for one partition keep their input order whether the row
    named it or the partitioner chose it (Spark sends row by row; the producer keeps a partition's
    order). A row ``ProducerRecord`` refuses fails the batch before any of it is queued."""
    names: dict[str, int] = {}
    for i, name in enumerate(batch.schema.names):
        names.setdefault(name, i)   # Spark's Kafka sink takes the first column of exactly that name

    def column(name):
        return batch.column(names[name]) if name in names else None

    # ``timestamp`` (Riverlog's addition to Spark's Kafka sink columns): the record's own time, which
    # a Streams application keeps from input to output; without it the producer stamps the send time.
    wanted = ("key", "value", "headers", "timestamp", "partition") if with_headers \
        else ("key", "value", "timestamp", "partition")
    columns = {name: column(name) for name in wanted if name in names}
    _check_rows(columns)
    records = pa.RecordBatch.from_arrays(list(columns.values()), names=list(columns))
    topics = None if topic_option is not None else column("topic")
    if topics is None:
        return producer.produce_batch(topic_option, records, -1, _collect(errors))
    if topics.null_count:
        raise InvalidConfigError("a row has a null 'topic' and no 'topic' option is set", config="topic")
    encoded = topics.dictionary_encode()
    idx = encoded.indices.to_numpy(zero_copy_only=False)
    order = np.argsort(idx, kind="stable")   # stable: a topic's rows keep their order
    bounds = np.flatnonzero(np.diff(idx[order])) + 1
    for rows in np.split(order, bounds):
        producer.produce_batch(encoded.dictionary[int(idx[rows[0]])].as_py(),
                               records if len(rows) == len(batch) else records.take(pa.array(rows)),
                               -1, _collect(errors))
    return len(batch)


def _collect(errors: list):
    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)
    return on_delivery


def _check_rows(columns: dict) -> None:
    """Kafka's ``ProducerRecord`` and ``RecordHeader`` refuse these rows, which fails Spark's Kafka
    sink's task at the first one: a negative partition (null is the partitioner's), a timestamp
    before 1970 (after Spark's cast to milliseconds, which truncates) and a null header key."""
    partitions = columns.get("partition")
    if partitions is not None and (bad := _first_negative(partitions)) is not None:
        raise InvalidConfigError(f"Invalid partition: {bad}. Partition number should always be non-negative "
                                 "or null.", config="partition")
    stamps = columns.get("timestamp")
    if stamps is not None and (bad := _first_negative(
            stamps.cast(pa.timestamp("ms", tz=stamps.type.tz), safe=False).cast(pa.int64()))) is not None:
        raise InvalidTimestampError(f"Invalid timestamp: {bad}. Timestamp should always be non-negative or null.")
    headers = columns.get("headers")
    if headers is not None and headers.null_count < len(headers):
        entries = pc.list_flatten(headers)
        if entries.null_count or entries.field("key").null_count:
            raise InvalidConfigError("Null header keys are not permitted", config="headers")


def _first_negative(column: pa.Array):
    """The first negative value of ``column`` (nulls are fine), or None."""
    if column.null_count == len(column) or pc.min(column).as_py() >= 0:
        return None
    return column[pc.index(pc.less(column, 0), True).as_py()].as_py()

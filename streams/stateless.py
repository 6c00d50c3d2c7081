"""The stateless operations as processors: what the interpreter runs for every record, and what a
query runs in Python for the operations it cannot hand to Spark SQL (callables, or anything after
a stateful operation in the same sub-topology)."""
from __future__ import annotations

import logging
from typing import Any

from streams.errors import StreamsError
from streams.functions import Fn
from streams.processor import Processor
from streams.parameters import ExtractRecordMetadataTimestamp, uses_partition_time
from streams.record import Change, ConsumerRecord, Record
from streams.column_functions import call_record


def _row(p: Processor, record: Record, **extra) -> dict:
    row = record.row(*p.context.source())
    row.update(extra)
    return row


def _value_of(v):
    return v.new if isinstance(v, Change) else v


def test(p: Processor, fn: Fn, record: Record) -> bool:
    if fn.is_sql:
        return fn.evaluate(_row(p, record)) is True
    if fn.is_vectorized:
        return call_record(fn, record.key, record.value) is True
    return bool(fn.fn(record.key, record.value))


def map_value(p: Processor, fn: Fn, record: Record) -> Any:
    if fn.is_sql:
        return fn.evaluate(_row(p, record))
    if fn.is_vectorized:
        return call_record(fn, record.key, record.value)
    return fn.fn(record.value) if fn.arity == 1 else fn.fn(record.key, record.value)


def pack_change(change: Change, serde) -> bytes:
    """A table change on a repartition topic: both values, each length-prefixed (-1 for none)."""
    out = bytearray(b"\x01")
    for v in (change.new, change.old):
        data = serde.serialize(v) if serde is not None and v is not None else v
        if data is None:
            out += (-1).to_bytes(4, "big", signed=True)
        else:
            out += len(data).to_bytes(4, "big") + data
    return bytes(out)


def unpack_change(data: bytes, serde) -> Change:
    if not data or data[0] != 1:
        raise StreamsError("a repartition record of a grouped table is not a change (format 1); was the topic "
                           "written by another application?")
    values, pos = [], 1
    for _ in range(2):
        n = int.from_bytes(data[pos:pos + 4], "big", signed=True)
        pos += 4
        if n < 0:
            values.append(None)
        else:
            raw = data[pos:pos + n]
            pos += n
            values.append(serde.deserialize(raw) if serde is not None else raw)
    return Change(values[0], values[1])


_log = logging.getLogger("streams.source")
UNKNOWN = -1     # Kafka's RecordQueue.UNKNOWN: no partition time yet


class Source(Processor):
    """Deserializes what a topic holds into the stream's key and value (``changes``: a grouped
    table's repartition topic, whose values are packed changes) and gives the record its timestamp.

    :meth:`prepare` is Kafka's ``RecordQueue.updateHead`` for one record (deserialize through the
    deserialization exception handler, then extract the timestamp), so a task can merge its input
    partitions by extracted timestamp before processing (:func:`streams.interpreter.merged`);
    :meth:`process` prepares and forwards. The task's config reaches it through :meth:`configure`."""
    def __init__(self, key_serde, value_serde, timestamp_extractor=None, changes: bool = False):
        self.key_serde, self.value_serde, self.extractor = key_serde, value_serde, timestamp_extractor
        self.changes = changes
        self.on_deserialization_error = None     # None: Kafka's LogAndFailExceptionHandler

    def configure(self, default_extractor, deserialization_handler) -> None:
        """``default.timestamp.extractor`` (for a source with none of its own; None: an internal
        topic, whose records carry the timestamps the application wrote) and the deserialization
        exception handler."""
        if self.extractor is None and not self.changes:
            self.extractor = default_extractor
        self.on_deserialization_error = deserialization_handler

    def process(self, record: Record) -> None:
        prepared = self.prepare(record, self.context.source())
        if prepared is not None:
            self.forward(prepared)

    def prepare(self, record: Record, source: tuple) -> Record | None:
        """The record deserialized and timestamped, or None when it is skipped (a handler that
        continues, or a negative extracted timestamp: Kafka's ``RecordQueue`` drops it)."""
        topic = source[0]
        ks = self.key_serde or self.context.default_serde("key")
        vs = self.value_serde or self.context.default_serde("value")
        try:
            key = ks.deserialize(record.key) if ks is not None else record.key
            if self.changes:
                value = unpack_change(record.value, vs)
            else:
                value = vs.deserialize(record.value) if vs is not None else record.value
        except Exception as e:
            handler = self.on_deserialization_error
            if handler is not None and handler.handle(self.context.task, topic, source[1], source[2], e):
                return None
            raise StreamsError(f"could not deserialize a record of topic {topic!r} at {source}: {e}; check the "
                               f"Consumed serdes of this source. Deserialization exception handler is set to fail "
                               f"upon a deserialization error. If you would rather have the streaming pipeline "
                               f"continue after a deserialization error, please set the "
                               f"deserialization.exception.handler appropriately.") from e
        ts = record.timestamp
        if self.extractor is not None:
            ts = self._extract(ConsumerRecord(key, value, ts, record.headers, *source), topic)
            if ts < 0:
                _log.warning("Skipping record due to negative extracted timestamp. topic=[%s] partition=[%s] "
                             "offset=[%s] extractedTimestamp=[%s] extractor=[%s]", *source, ts,
                             type(self.extractor).__name__)
                return None
        return Record(key, value, ts, record.headers)

    def _extract(self, record: ConsumerRecord, topic: str | None) -> int:
        """Kafka's ``RecordQueue``: the extractor gets the input partition's time before this record
        (the largest timestamp extracted so far, -1 before any) and the partition time then takes
        this record's timestamp if larger; a dropped (negative) timestamp leaves it. Kept in the
        task's meta per source topic (the task is the partition), so it survives what the task's
        meta survives: its state and changelog (a sub-topology whose extractor reads the partition
        time keeps them even with no store: :attr:`streams.topology.SubTopology.stateful`). An
        extractor that reads no partition time (:func:`streams.parameters.uses_partition_time`)
        skips that bookkeeping and is given -1."""
        if not uses_partition_time(self.extractor):
            if isinstance(self.extractor, ExtractRecordMetadataTimestamp) and record.timestamp >= 0:
                return record.timestamp
            return int(self.extractor(record, UNKNOWN))
        name = f"partition_time:{topic}"
        seen = self.context.meta(name)
        partition_time = UNKNOWN if seen is None else seen
        ts = int(self.extractor(record, partition_time))
        if ts > partition_time:
            self.context.set_meta(name, ts)
        return ts


class Filter(Processor):
    def __init__(self, predicate: Fn, negate: bool = False):
        self.predicate, self.negate = predicate, negate

    def process(self, record: Record) -> None:
        if test(self, self.predicate, record) != self.negate:
            self.forward(record)


class Split(Processor):
    """``split()``'s splitter, Kafka's ``KStreamBranch``: the record goes to the child of the first
    predicate that holds, else to the default branch (the child after the predicates' ones) when
    there is one. ``predicates`` is the list ``branch()`` appends to; the children are the
    branches in the order ``branch()``/``defaultBranch()`` made them."""
    def __init__(self, predicates: list[Fn]):
        self.predicates = predicates

    def process(self, record: Record) -> None:
        children = self.context.children
        for i, pred in enumerate(self.predicates):
            if test(self, pred, record):
                children[i].process(record)
                return
        if len(children) > len(self.predicates):
            children[len(self.predicates)].process(record)


class MapValues(Processor):
    def __init__(self, mapper: Fn):
        self.mapper = mapper

    def process(self, record: Record) -> None:
        self.forward(record.with_(value=map_value(self, self.mapper, record)))


class SelectKey(Processor):
    def __init__(self, selector: Fn):
        self.selector = selector

    def process(self, record: Record) -> None:
        if self.selector.is_sql:
            key = self.selector.evaluate(_row(self, record))
        elif self.selector.is_vectorized:
            key = call_record(self.selector, record.key, record.value)
        else:
            key = self.selector.fn(record.key, record.value)
        self.forward(record.with_(key=key))


class Map(Processor):
    """``map``: a callable returning (key, value), or a pair of SQL expressions."""
    def __init__(self, mapper: Fn | None, key_expr: Fn | None = None, value_expr: Fn | None = None):
        self.mapper, self.key_expr, self.value_expr = mapper, key_expr, value_expr

    def process(self, record: Record) -> None:
        if self.mapper is not None and self.mapper.is_vectorized:
            key, value = call_record(self.mapper, record.key, record.value)
        elif self.mapper is not None:
            out = self.mapper.fn(record.key, record.value)
            if out is None:
                raise StreamsError("map's mapper returned None; it must return a (key, value) pair")
            key, value = out
        else:
            row = _row(self, record)
            key, value = self.key_expr.evaluate(row), self.value_expr.evaluate(row)
        self.forward(record.with_(key=key, value=value))


class FlatMap(Processor):
    """``flatMap`` (pairs) or ``flatMapValues`` (values); SQL gives an array (of
    ``struct(key, value)`` for flatMap), and a null array gives nothing, as Spark's ``explode``.
    A Python callable returning None fails the task, as Kafka's does (a NullPointerException
    there): an empty iterable is how it emits nothing."""
    def __init__(self, mapper: Fn, values_only: bool):
        self.mapper, self.values_only = mapper, values_only

    def process(self, record: Record) -> None:
        if self.mapper.is_sql:
            out = self.mapper.evaluate(_row(self, record)) or []
            if not self.values_only:
                out = [(e["key"], e["value"]) for e in out]
        elif self.values_only:
            out = map_value(self, self.mapper, record)
        else:
            out = self.mapper.fn(record.key, record.value)
        if out is None and not self.mapper.is_sql and not self.mapper.is_vectorized:
            op = "flatMapValues" if self.values_only else "flatMap"
            raise StreamsError(f"{op}'s mapper returned None; it must return an iterable of "
                               f"{'values' if self.values_only else '(key, value) pairs'} (empty to emit nothing)")
        for item in out or ():
            if self.values_only:
                self.forward(record.with_(value=item))
            else:
                key, value = item
                self.forward(record.with_(key=key, value=value))


class Peek(Processor):
    """``peek`` forwards after the action; ``foreach`` is a peek with no children."""
    def __init__(self, action):
        self.action = action

    def process(self, record: Record) -> None:
        self.action(record.key, _value_of(record.value))
        self.forward(record)


class PassThrough(Processor):
    """``merge`` and the source side of a repartition: records pass unchanged."""
    def process(self, record: Record) -> None:
        self.forward(record)


class Sink(Processor):
    """Serializes and hands the record to the task's output (a topic, fixed or chosen per record).
    A KTable's change is written as its new value (null for a delete), as Kafka writes a changelog.

    The partition is ``partitioner``'s when given (internal topics only), else, for a ``to()``
    whose key serde is windowed, Kafka's ``WindowedStreamPartitioner`` (``StreamSinkNode``): the
    inner key's partition, for which the task tells the topic's partition count
    (:meth:`configure`); else None, the producer's default partitioner on the key's bytes."""
    def __init__(self, topic: str | None, extractor: Fn | None, key_serde, value_serde, partitioner=None,
                 changes: bool = False, internal: bool = False, stream_partitioner=None):
        from streams.serdes_windowed import TimeWindowedSerde, windowed_partition
        self._windowed_partition = windowed_partition
        self.topic, self.extractor, self.internal = topic, extractor, internal
        self.key_serde, self.value_serde, self.partitioner = key_serde, value_serde, partitioner
        self.changes, self.stream_partitioner = changes, stream_partitioner   # the user's (Produced, Repartitioned)
        # Kafka looks at the sink's own (Produced's, else the stream's) serde, not default.key.serde
        self.windowed = partitioner is None and stream_partitioner is None and not internal and isinstance(key_serde, TimeWindowedSerde)
        self.partition_count = None

    def configure(self, partition_count) -> None:
        """``partition_count(topic)``: the number of partitions of an output topic, which a
        windowed key's partition needs (Kafka's ``RecordCollectorImpl`` asks
        ``producer.partitionsFor``). Not configured, the producer partitions."""
        self.partition_count = partition_count

    def process(self, record: Record) -> None:
        value = record.value if self.changes else _value_of(record.value)
        key = record.key
        topic = self.topic
        if self.internal:
            topic = f"{self.context.application_id}-{topic}"
        if topic is None:
            f = self.extractor.fn
            if self.extractor.arity == 2:
                topic = f(key, value)
            else:   # Kafka's RecordContext: the input record's topic, partition, offset, timestamp, headers
                topic = f(key, value, ConsumerRecord(key, value, record.timestamp, record.headers,
                                                     *self.context.source()))
            if not isinstance(topic, str) or not topic:
                raise StreamsError(f"the topic extractor returned {topic!r}; it must return a topic name")
        ks = self.key_serde or self.context.default_serde("key")
        vs = self.value_serde or self.context.default_serde("value")
        try:
            kb = ks.serialize(key) if ks is not None else key
            if self.changes:
                vb = pack_change(value, vs)
            else:
                vb = vs.serialize(value) if vs is not None else value
        except Exception as e:
            raise StreamsError(f"could not serialize a record for topic {topic!r}: {e}; check the Produced "
                               f"(or Grouped/Repartitioned) serdes") from e
        partition = None
        if self.stream_partitioner is not None:
            from streams.stream_partitioner import choose
            if self.partition_count is None:
                raise StreamsError(f"a stream partitioner needs the partition count of topic {topic!r}")
            for p in choose(self.stream_partitioner, topic, key, value, self.partition_count(topic)):
                self.context.emit(topic, kb, vb, record.timestamp, record.headers, p)
            return
        if self.partitioner is not None:
            partition = self.partitioner(key, value, topic)
        elif self.windowed and key is not None and self.partition_count is not None:
            partition = self._windowed_partition(self.key_serde, key, topic, self.partition_count(topic))
        self.context.emit(topic, kb, vb, record.timestamp, record.headers, partition)

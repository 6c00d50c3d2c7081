"""The sink's options and input columns, checked on the driver so a bad query fails at start.

Options mirror Spark's Kafka sink with ``riverlog.`` in place of ``kafka.``: every
``riverlog.<producer config>`` other than ``riverlog.bootstrap.servers`` goes to the producers.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from broker.client import PRODUCER_CONFIG, TopicPartition
from broker.errors import InvalidConfigError
from spark_sink import offset_log

PREFIX = "riverlog."
BOOTSTRAP = "riverlog.bootstrap.servers"
EXACTLY_ONCE, AT_LEAST_ONCE = "exactly-once", "at-least-once"
# The longest transaction the broker allows by default: a decided batch must still be open when a
# restarted driver comes back to commit it.
DEFAULT_TXN_TIMEOUT_MS = 900_000
# Options Spark itself adds or that other writers of the same query may carry.
_SPARK_OWN = {"checkpointlocation", "path", "queryname"}
_OWN = {"topic", "deliveryguarantee", "sinkid", "batchid", "includeheaders", "groupid", "groupoffsets",
        "transactionrecords"}
# ``transactionRecords.<name>`` options go to the transactionRecords function.
RECORDS_PREFIX = "transactionrecords."
# The sink sets these itself: a user's value would break the delivery guarantee.
_RESERVED = {"transactional.id", "enable.idempotence", "acks", "bootstrap.servers"}


@dataclass(frozen=True)
class SinkOptions:
    bootstrap: str
    topic: str | None
    guarantee: str
    sink_id: str | None
    producer: dict = field(default_factory=dict)
    batch_id: int | None = None  # a batch write that is one micro-batch of a foreachBatch query
    # Spark's includeHeaders: None (unset) writes a ``headers`` column when there is one (as Spark's
    # Kafka sink does); true requires that column; false writes no headers even if it is there.
    include_headers: bool | None = None
    # A micro-batch's input progress, committed in the same exactly-once batch as its rows: the
    # consumer group and, on a foreachBatch write, its next offsets to read as (topic, partition,
    # offset), sorted (a streaming write reads them from its offset log at each commit).
    group_id: str | None = None
    group_offsets: tuple[tuple[str, int, int], ...] | None = None
    # ``transactionRecords``: "module:function" giving records the driver's commit writes in the
    # batch's transaction (``function(batch_id, options)``), and its ``transactionRecords.*`` options.
    transaction_records: str | None = None
    records_options: dict = field(default_factory=dict)
    # Spark's own ``checkpointLocation`` of a streaming write (where its offset log is).
    checkpoint: str | None = None

    @classmethod
    def parse(cls, options) -> "SinkOptions":
        opts = {k.lower(): v for k, v in dict(options).items()}
        bootstrap = opts.get(BOOTSTRAP)
        if not bootstrap:
            raise InvalidConfigError(f"option '{BOOTSTRAP}' is required", config=BOOTSTRAP)
        producer = {}
        for key, value in opts.items():
            if key == BOOTSTRAP or key in _SPARK_OWN or key in _OWN or key.startswith(RECORDS_PREFIX):
                continue
            if not key.startswith(PREFIX):
                raise InvalidConfigError(
                    f"unknown option '{key}' for the riverlog sink; expected {BOOTSTRAP}, topic, includeHeaders, "
                    f"deliveryGuarantee, sinkId, batchId, groupId, groupOffsets, transactionRecords(.*) or "
                    f"{PREFIX}<producer config>",
                    config=key)
            name = key[len(PREFIX):]
            if name in _RESERVED:
                raise InvalidConfigError(f"option '{key}' is set by the sink (deliveryGuarantee decides it)",
                                         config=key)
            producer[name] = value
        try:
            PRODUCER_CONFIG.parse({"bootstrap.servers": bootstrap, **producer})
        except InvalidConfigError as e:
            raise InvalidConfigError(f"option '{PREFIX}{e.details.get('config', '')}': {e}",
                                     config=PREFIX + str(e.details.get("config", ""))) from e
        guarantee = opts.get("deliveryguarantee", EXACTLY_ONCE).lower()
        if guarantee not in (EXACTLY_ONCE, AT_LEAST_ONCE):
            raise InvalidConfigError(f"option 'deliveryGuarantee' is '{guarantee}'; expected {EXACTLY_ONCE} or "
                                     f"{AT_LEAST_ONCE}", config="deliveryGuarantee")
        sink_id = opts.get("sinkid") or None
        if sink_id is not None and ("/" in sink_id or not sink_id.strip()):
            raise InvalidConfigError(f"option 'sinkId' must be a non-empty name without '/', got {sink_id!r}",
                                     config="sinkId")
        batch_id = opts.get("batchid")
        if batch_id is not None:
            if not str(batch_id).isdigit():
                raise InvalidConfigError(f"option 'batchId' must be a batch number, got {batch_id!r}",
                                         config="batchId")
            if sink_id is None:
                raise InvalidConfigError("option 'batchId' needs 'sinkId' too (the pair identifies the write, "
                                         "so a replayed batch is recognised)", config="batchId")
            batch_id = int(batch_id)
        include_headers = opts.get("includeheaders")
        if include_headers is not None:
            if str(include_headers).lower() not in ("true", "false"):
                raise InvalidConfigError(f"option 'includeHeaders' must be true or false, got {include_headers!r}",
                                         config="includeHeaders")
            include_headers = str(include_headers).lower() == "true"
        group_id, group_offsets = _group_progress(opts, guarantee, batch_id)
        records = opts.get("transactionrecords") or None
        if records is not None:
            transaction_records_function(records)
            if guarantee != EXACTLY_ONCE:
                raise InvalidConfigError(f"option 'transactionRecords' writes records in each batch's transaction: it "
                                         f"needs deliveryGuarantee {EXACTLY_ONCE} (the default)",
                                         config="transactionRecords")
        records_options = {k[len(RECORDS_PREFIX):]: v for k, v in opts.items() if k.startswith(RECORDS_PREFIX)}
        return cls(bootstrap, _topic(opts), guarantee, sink_id, producer, batch_id, include_headers,
                   group_id, group_offsets, records, records_options, opts.get("checkpointlocation") or None)

    def batch_records(self, batch_id: int):
        """The ``transactionRecords`` of ``batch_id``, as a function for the committer (None without
        the option): called only when the batch is written for the first time."""
        if self.transaction_records is None:
            return None
        fn, options = transaction_records_function(self.transaction_records), dict(self.records_options)
        return lambda: fn(batch_id, options)

    def offsets(self, batch_id: int) -> list[TopicPartition] | None:
        """The group's offsets for ``batch_id`` as the client's offsets (None without ``groupId`` or
        when the batch has none): ``groupOffsets``, or on a streaming write its offset log's."""
        if self.group_id is None:
            return None
        triples = self.group_offsets
        if triples is None:
            self.require_offset_log()
            triples = offset_log.topic_offsets(self.checkpoint, batch_id)
        return [TopicPartition(t, p, o) for t, p, o in triples] or None

    def require_offset_log(self) -> None:
        """``groupId`` without ``groupOffsets`` (a streaming write) needs the query's checkpoint."""
        if self.checkpoint is None:
            raise InvalidConfigError("option 'groupId' on a streaming write reads each batch's input offsets from its "
                                     "offset log: set checkpointLocation on the writer", config="checkpointLocation")

    @property
    def transaction_timeout_ms(self) -> int:
        """The tasks' transaction.timeout.ms, which the driver's offsets transaction shares."""
        return int(self.producer_config("any")["transaction.timeout.ms"])

    def writes_headers(self, columns) -> bool:
        return "headers" in columns and self.include_headers is not False

    @property
    def exactly_once(self) -> bool:
        return self.guarantee == EXACTLY_ONCE

    def producer_config(self, transactional_id: str | None = None) -> dict:
        cfg = {"bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True, **self.producer}
        if transactional_id is not None:
            cfg.setdefault("transaction.timeout.ms", DEFAULT_TXN_TIMEOUT_MS)
            cfg["transactional.id"] = transactional_id
        return cfg

    def client_config(self) -> dict:
        """For the driver's admin calls and the commit log: the connection settings only."""
        keep = ("request.timeout.ms", "retry.backoff.ms", "client.id")
        return {"bootstrap.servers": self.bootstrap, **{k: v for k, v in self.producer.items() if k in keep}}


def _topic(opts: dict) -> str | None:
    """The ``topic`` option, trimmed as Spark's Kafka sink trims it; unset: the ``topic`` column.
    Set, Spark uses it whatever the column says, so an empty one is refused rather than taken as
    unset (Spark's producer would fail every row on the topic "")."""
    if opts.get("topic") is None:
        return None
    topic = str(opts["topic"]).strip()
    if not topic:
        raise InvalidConfigError(f"option 'topic' is {opts['topic']!r}: set a topic name, or leave the option out "
                                 "to take each row's topic from the 'topic' column", config="topic")
    return topic


def transaction_records_function(name: str):
    """``"package.module:function"`` imported: a function ``(batch_id, options) -> [(topic,
    partition, key, value), ...]`` whose records the driver's commit writes in the batch's
    transaction (partition -1: the producer's partitioner). For records only the committer can
    know, such as progress read from the query's checkpoint: Connect's source offsets."""
    import importlib
    module, _, attr = str(name).partition(":")
    try:
        fn = getattr(importlib.import_module(module), attr) if module and attr else None
    except ImportError as e:
        raise InvalidConfigError(f"option 'transactionRecords' names module '{module}', which does not import ({e})",
                                 config="transactionRecords") from None
    except AttributeError:
        fn = None
    if not callable(fn):
        raise InvalidConfigError(f"option 'transactionRecords' must name a function as 'package.module:function', "
                                 f"got {name!r}", config="transactionRecords")
    return fn


def _group_progress(opts: dict, guarantee: str, batch_id: int | None):
    """``groupId`` (with ``groupOffsets`` on a foreachBatch write; a streaming write reads its
    offsets from its offset log) on an exactly-once write."""
    group_id, raw = opts.get("groupid"), opts.get("groupoffsets")
    if group_id is None and raw is None:
        return None, None
    if group_id is None:
        raise InvalidConfigError("option 'groupOffsets' needs 'groupId' too: the offsets of which group",
                                 config="groupId")
    if not str(group_id).strip():
        raise InvalidConfigError("option 'groupId' must be a non-empty consumer group id", config="groupId")
    if guarantee != EXACTLY_ONCE:
        raise InvalidConfigError(
            "option 'groupId' commits a micro-batch's input offsets in the transaction of its output: it needs "
            f"deliveryGuarantee {EXACTLY_ONCE} (the default)", config="groupId")
    if batch_id is None:
        if raw is not None:
            raise InvalidConfigError(
                "option 'groupOffsets' names one foreachBatch micro-batch's offsets: it needs 'sinkId' and "
                "'batchId'; a streaming write with 'groupId' takes each batch's offsets from its offset log",
                config="groupOffsets")
        return str(group_id), None
    if raw is None:
        raise InvalidConfigError("option 'groupId' on a foreachBatch write (with 'batchId') needs 'groupOffsets' "
                                 "too: the micro-batch's input offsets", config="groupOffsets")
    return str(group_id), _parse_offsets(raw)


def _parse_offsets(raw) -> tuple[tuple[str, int, int], ...]:
    """``{"topic": {"partition": nextOffsetToRead}}`` (the source's offset JSON) into sorted triples."""
    def bad(why: str) -> InvalidConfigError:
        return InvalidConfigError(f"option 'groupOffsets' {why}; expected JSON "
                                  '{"topic": {"partition": nextOffsetToRead}}, e.g. {"orders": {"0": 42}}',
                                  config="groupOffsets")
    try:
        doc = json.loads(raw)
    except (TypeError, ValueError) as e:
        raise bad(f"is not JSON ({e})") from None
    if not isinstance(doc, dict) or not doc:
        raise bad("names no topic")
    out = []
    for topic, partitions in doc.items():
        if not topic or not isinstance(partitions, dict) or not partitions:
            raise bad(f"has no partitions for topic {topic!r}")
        for partition, offset in partitions.items():
            if not str(partition).isdigit():
                raise bad(f"has partition {partition!r} of topic {topic!r}, not a partition number")
            if type(offset) is not int or offset < 0:
                raise bad(f"has offset {offset!r} for {topic} [{partition}], not a next offset to read (0 or more)")
            out.append((topic, int(partition), offset))
    if len({(t, p) for t, p, _ in out}) != len(out):
        raise bad("names a partition twice")
    return tuple(sorted(out))


def check_schema(schema, options: SinkOptions) -> None:
    """Spark's Kafka sink's input columns (``KafkaWriter.validateQuery``): value required; key,
    headers, topic, partition optional. Names match exactly and the first column of a name counts,
    as Spark's ``schema.find(_.name == attrName)``: a ``Value`` column is not the value."""
    from pyspark.sql.types import (ArrayType, BinaryType, IntegerType, StringType, StructType, TimestampType)
    fields: dict = {}
    for f in schema.fields:
        fields.setdefault(f.name, f.dataType)

    def fail(column, expected):
        raise InvalidConfigError(f"column '{column}' of the riverlog sink must be {expected}, "
                                 f"got {fields[column].simpleString()}", config=column)

    if "value" not in fields:
        raise InvalidConfigError("Required attribute 'value' not found: the riverlog sink needs a 'value' column "
                                 f"(binary or string; names match exactly, as in Spark); columns: {sorted(fields)}",
                                 config="value")
    for column in ("value", "key"):
        if column in fields and not isinstance(fields[column], (BinaryType, StringType)):
            fail(column, "binary or string")
    if options.topic is None and "topic" in fields and not isinstance(fields["topic"], StringType):
        fail("topic", "string")   # with the option set, Spark's Kafka sink ignores the column
    if "timestamp" in fields and not isinstance(fields["timestamp"], TimestampType):
        fail("timestamp", "timestamp")
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        fail("partition", "int")
    if options.include_headers and "headers" not in fields:
        raise InvalidConfigError("option 'includeHeaders' is true but there is no 'headers' column "
                                 "(array<struct<key:string,value:binary>>)", config="includeHeaders")
    if "headers" in fields and options.include_headers is not False:
        t = fields["headers"]
        ok = (isinstance(t, ArrayType) and isinstance(t.elementType, StructType)
              and [f.name for f in t.elementType.fields] == ["key", "value"]
              and isinstance(t.elementType.fields[0].dataType, StringType)
              and isinstance(t.elementType.fields[1].dataType, BinaryType))   # Spark's headersType, exactly
        if not ok:
            fail("headers", "array<struct<key:string,value:binary>>")
    if options.topic is None and "topic" not in fields:
        raise InvalidConfigError("the riverlog sink needs a 'topic' option or a 'topic' column", config="topic")

"""``TopicCopy``: a source connector that copies topics from a riverlog cluster to a riverlog
cluster, with the connector's transforms on the way (a MirrorMaker-style copy between two
clusters is this connector with two bootstrap settings).

Configs (MirrorMaker 2's names):

- ``source.cluster.bootstrap.servers``: where the topics are read (default: the worker's cluster);
- ``target.cluster.bootstrap.servers``: where they are written (default: the worker's cluster);
- ``source.cluster.alias``: the ``cluster`` of the source partitions in connect-offsets (``source``);
- ``topics``: MirrorMaker 2's ``DefaultTopicFilter`` list of topic names and/or regular expressions
  (default ``.*``), each matched against the whole name; ``topics.exclude`` (default
  ``.*[\\-\\.]internal, .*\\.replica, __.*``) leaves topics out; ``topics.regex`` (Riverlog's) is one
  regular expression instead of ``topics``. A record keeps its topic name unless a transform
  (``RegexRouter``) renames it. ``consumer.override.*`` go to the reader, ``producer.override.*`` to
  the writer. MirrorMaker 2 keys this connector does not implement (``replication.policy.class``,
  ``sync.topic.configs.enabled``, …) are refused at validation rather than ignored.

Records are copied as bytes (key, value, headers, timestamp) to the partition they had, as
``MirrorSourceTask`` copies them, so ``key.converter``/``value.converter`` default to
``ByteArrayConverter``; topic, header and filter transforms apply to them. When the query starts,
each target topic (the source topic's name as the transforms route it) is created with the
source's partition count, and one with fewer partitions than its source is grown to it, as
``MirrorSourceConnector.computeAndCreateTopicPartitions`` does; a topic routed onto itself on the
same cluster is refused. Source offsets are MirrorMaker's ``{"cluster", "topic", "partition"} ->
{"offset"}``: the offset of the last record copied; a query without a checkpoint starts each
partition after it (``MirrorSourceTask.initializeConsumer`` seeks to ``offset + 1``). Offsets that
Riverlog stored before it followed that rule hold the next offset to copy: a query that starts from
one of them without its checkpoint skips that one record (with the checkpoint, the usual case,
nothing changes, and its next batch stores offsets by the rule). When the target is the worker's
cluster (run the worker next to the target, as MirrorMaker 2 advises) the offsets are written in
the same transaction as the copied records: exactly once even if the checkpoint is lost. With a
target elsewhere they are written to connect-offsets after the target's transaction commits, so a
lost checkpoint with a crash between the two copies that batch again.

    {"connector.class": "TopicCopy", "topics": "orders, audit-.*", "source.cluster.bootstrap.servers": "east:9092",
     "target.cluster.bootstrap.servers": "west:9092"}
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from broker.client import AdminClient, Consumer, NewPartitions, NewTopic
from broker.errors import TopicAlreadyExistsError

from connect.config_def import ConfigDef, ConfigKey, ConfigValue, Importance, Invalid, Type, Width
from connect.config_validators import non_empty_string, regex
from connect.connector import SourceConnector, register_connector
from connect.errors import ConfigError, ConnectError
from connect.java_text import java_string

GROUP = "Clusters"
TOPICS_INCLUDE_DEFAULT = ".*"
TOPICS_EXCLUDE_DEFAULT = ".*[\\-\\.]internal, .*\\.replica, __.*"
"""``DefaultTopicFilter``'s defaults."""
CLUSTER, TOPIC, PARTITION, OFFSET = "cluster", "topic", "partition", "offset"
"""MirrorMaker 2's source partition and offset keys (``MirrorUtils``)."""
_INT_MAX, _LONG_MIN, _LONG_MAX = 2 ** 31 - 1, -(2 ** 63), 2 ** 63 - 1
# MirrorSourceConnector keys this connector does not implement: refused, as the copy would not do
# what they ask.
_UNSUPPORTED = frozenset({
    "replication.policy.class", "replication.policy.separator", "replication.factor", "topic.filter.class",
    "config.properties.exclude", "config.property.filter.class", "sync.topic.configs.enabled",
    "sync.topic.configs.interval.seconds", "sync.topic.acls.enabled", "sync.topic.acls.interval.seconds",
    "refresh.topics.enabled", "refresh.topics.interval.seconds", "emit.offset-syncs.enabled",
    "offset-syncs.topic.location", "offset-syncs.topic.replication.factor", "offset.lag.max",
    "heartbeats.topic.replication.factor", "checkpoints.topic.replication.factor", "topics.blacklist",
    "add.source.alias.to.metrics", "use.defaults.from"})


def compile_pattern_list(fields: list[str]) -> re.Pattern | None:
    """``MirrorUtils.compilePatternList``: the items as one alternation; an empty list matches
    nothing (None), where the empty pattern would match everything."""
    fields = [f for f in fields if f != ""]
    return re.compile("|".join(fields)) if fields else None


class TopicFilter:
    """MirrorMaker 2's ``DefaultTopicFilter``: a topic is copied when an include item matches its
    whole name and no exclude item does.

        TopicFilter(["orders", "audit-.*"], ["__.*"]).should_copy("audit-eu")   # True
    """

    def __init__(self, include: list[str], exclude: list[str]):
        self.include, self.exclude = compile_pattern_list(include), compile_pattern_list(exclude)

    def should_copy(self, topic: str) -> bool:
        return self.include is not None and self.include.fullmatch(topic) is not None and \
            (self.exclude is None or self.exclude.fullmatch(topic) is None)

    def subscribe_pattern(self) -> str:
        """The filter as one ``subscribePattern`` (Python's ``re``, found anywhere: so anchored), so
        topics created later are read too."""
        if self.include is None:
            return "(?!)"
        excluded = f"(?!(?:{self.exclude.pattern})$)" if self.exclude is not None else ""
        return f"^{excluded}(?:{self.include.pattern})$"


def _is_integer(v: Any, low: int, high: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and low <= v <= high


def validate_source_partition_string(partition: Mapping[str, Any], key: str) -> None:
    """``MirrorUtils.validateSourcePartitionString``."""
    if key not in partition:
        raise ConnectError(f"Source partition {java_string(partition)} is missing the '{key}' key, which is required")
    if not isinstance(partition[key], str):
        raise ConnectError(f"Source partition {java_string(partition)} has an invalid value "
                           f"{java_string(partition[key])} for the '{key}' key, which must be a string")


def validate_source_partition_partition(partition: Mapping[str, Any]) -> None:
    """``MirrorUtils.validateSourcePartitionPartition``: an integer that fits an int, not negative."""
    if PARTITION not in partition:
        raise ConnectError(f"Source partition {java_string(partition)} is missing the '{PARTITION}' key, "
                           "which is required")
    value = partition[PARTITION]
    if not _is_integer(value, _LONG_MIN, _INT_MAX):
        raise ConnectError(f"Source partition {java_string(partition)} has an invalid value {java_string(value)} "
                           f"for the '{PARTITION}' key, which must be an integer")
    if value < 0:
        raise ConnectError(f"Source partition {java_string(partition)} has an invalid value {java_string(value)} "
                           f"for the '{PARTITION}' key, which cannot be negative")


def validate_source_offset(partition: Mapping[str, Any], offset: Mapping[str, Any] | None) -> None:
    """``MirrorUtils.validateSourceOffset`` (as ``MirrorSourceConnector`` calls it: any
    non-negative offset)."""
    if offset is None:
        return
    if OFFSET not in offset:
        raise ConnectError(f"Source offset {java_string(offset)} for source partition {java_string(partition)} is "
                           f"missing the '{OFFSET}' key, which is required")
    value = offset[OFFSET]
    if not _is_integer(value, _LONG_MIN, _LONG_MAX):
        raise ConnectError(f"Source offset {java_string(offset)} for source partition {java_string(partition)} has "
                           f"an invalid value {java_string(value)} for the '{OFFSET}' key, which must be an integer")
    if value < 0:
        raise ConnectError(f"Source offset {java_string(offset)} for source partition {java_string(partition)} has "
                           f"an invalid value {java_string(value)} for the '{OFFSET}' key, which cannot be negative")


def unsupported(key: str) -> str | None:
    """Why a config key is refused (None: the connector or the worker takes it)."""
    if key in _UNSUPPORTED:
        return f"MirrorMaker 2's {key} is not supported by TopicCopy: remove it (the copy would not do what it asks)"
    return None


class _TopicCopyConfigDef(ConfigDef):
    """The connector's keys, plus a per-field error for every MirrorMaker 2 key it does not implement
    (listed by ``PUT /connector-plugins/TopicCopy/config/validate`` too)."""

    def validate_all(self, props: Mapping[str, Any]) -> dict[str, ConfigValue]:
        values = super().validate_all(props)
        for name, raw in props.items():
            why = unsupported(name)
            if why is not None:
                values[name] = ConfigValue(name, raw, [], [why])
        return values


def _patterns(name: str, value: Any) -> None:
    for item in value or []:
        try:
            re.compile(item)
        except re.error as e:
            raise Invalid(f"{item!r} is not a valid regular expression: {e}") from None


def _key(name: str, type_: str, default: Any, doc: str, order: int, validator=None) -> ConfigKey:
    return ConfigKey(name, type_, default, validator, Importance.HIGH, doc, GROUP, order, Width.LONG, name)


@register_connector
class TopicCopy(SourceConnector):
    """Topics from one cluster to another (or the same), transformed on the way."""
    class_name = "io.riverlog.connect.mirror.TopicCopySourceConnector"
    aliases = ("TopicCopy", "TopicCopySource", "TopicCopySourceConnector", "RiverlogSource")
    bytes_in_bytes_out = True
    reads_topics = True
    config_def = _TopicCopyConfigDef([
        _key("source.cluster.bootstrap.servers", Type.STRING, None,
             "The cluster to read from (default: the worker's bootstrap.servers).", 1),
        _key("target.cluster.bootstrap.servers", Type.STRING, None,
             "The cluster to write to (default: the worker's bootstrap.servers).", 2),
        _key("source.cluster.alias", Type.STRING, "source", "The source cluster's name in the stored source offsets.",
             3, non_empty_string),
        _key("topics", Type.LIST, TOPICS_INCLUDE_DEFAULT,
             "Topics to replicate. Supports comma-separated topic names and regexes.", 4, _patterns),
        _key("topics.exclude", Type.LIST, TOPICS_EXCLUDE_DEFAULT,
             "Excluded topics. Supports comma-separated topic names and regexes.", 5, _patterns),
        _key("topics.regex", Type.STRING, "", "Regular expression of the topics to copy (instead of topics).", 6,
             regex),
    ])

    def __init__(self, config, context):
        super().__init__(config, context)
        problems = self.problems(config.originals)
        if problems:
            raise ConfigError("; ".join(m for ms in problems.values() for m in ms), errors=problems)

    @classmethod
    def problems(cls, props: Mapping[str, Any]) -> dict[str, list[str]]:
        """``topics`` and ``topics.regex`` are alternatives; MirrorMaker 2 keys this connector does
        not implement are refused, each under its own name."""
        errors: dict[str, list[str]] = {}
        if str(props.get("topics.regex") or "").strip() and "topics" in props:
            msg = "Must configure one of topics or topics.regex, not both"
            errors.update({"topics": [msg], "topics.regex": [msg]})
        for name in props:
            why = unsupported(name)
            if why is not None:
                errors[name] = [why]
        return errors

    @classmethod
    def alter_offsets(cls, config, offsets) -> bool:
        """``MirrorSourceConnector.alterOffsets``: a tombstone is always allowed (to clean up
        whatever is stored); any other offset needs a partition with string ``cluster`` and
        ``topic``, a non-negative int ``partition``, and a non-negative integer ``offset``, with
        ``MirrorUtils``' messages. connect-offsets is all the copy keeps (the checkpoint is dropped
        when they change)."""
        for partition, offset in offsets:
            if offset is None:
                continue
            if partition is None:
                raise ConnectError("Source partitions may not be null")
            validate_source_partition_string(partition, CLUSTER)
            validate_source_partition_string(partition, TOPIC)
            validate_source_partition_partition(partition)
            validate_source_offset(partition, offset)
        return True

    def topic_filter(self) -> TopicFilter:
        pattern = (self.values.get("topics.regex") or "").strip()
        include = [pattern] if pattern else list(self.values.get("topics") or [])
        return TopicFilter(include, list(self.values.get("topics.exclude") or []))

    @property
    def source_servers(self) -> str:
        return self.values.get("source.cluster.bootstrap.servers") or self.context.bootstrap_servers

    @property
    def output_bootstrap_servers(self) -> str:
        return self.values.get("target.cluster.bootstrap.servers") or self.context.bootstrap_servers

    def _source_partitions(self) -> dict[str, int]:
        """The topics the filter copies, with their partition counts on the source cluster."""
        keep = self.topic_filter()
        c = Consumer({"bootstrap.servers": self.source_servers, "group.id": "", "enable.auto.commit": False})
        try:
            topics = c.list_topics(timeout=30).topics
        finally:
            c.close()
        return {t: len(m.partitions) for t, m in sorted(topics.items()) if keep.should_copy(t) and m.partitions}

    def _starting(self, counts: Mapping[str, int]) -> str:
        """Where a query without a checkpoint starts: after the last record copied (MirrorMaker's
        stored offset + 1), else each partition's start."""
        alias = self.values["source.cluster.alias"]
        stored = {(p.get(TOPIC), int(p.get(PARTITION, -1))): int(o[OFFSET])
                  for p, o in self.context.stored_offsets if p.get(CLUSTER) == alias and OFFSET in (o or {})}
        if not stored:
            return "earliest"
        out = {t: {str(p): stored[(t, p)] + 1 if stored.get((t, p), -1) >= 0 else -2 for p in range(n)}
               for t, n in counts.items()}
        return json.dumps(out) if out else "earliest"

    def _routes(self, topics: list[str]) -> dict[str, str]:
        """Each source topic's target name: the connector's transforms run over one record per topic
        (null key and value), as they will route its records. A topic whose record a transform
        drops or fails is left out (its records, if any pass, go to a topic the broker creates)."""
        from connect.plugins import canonical_transform_config
        from connect.record_frame import ERROR, ERROR_TYPE, HEADERS_TYPE
        from connect.transforms import chain, from_connector_config
        steps = from_connector_config(canonical_transform_config(self.config.originals))
        if not steps or not topics:
            return {t: t for t in topics}
        source = "__connect_source_topic"
        frame = self.context.spark.createDataFrame([(t,) for t in topics], f"{source} string").select(
            F.col(source).alias("topic"), F.lit(None).cast("int").alias("partition"),
            F.lit(None).cast("long").alias("offset"), F.current_timestamp().alias("timestamp"),
            F.lit(None).cast("binary").alias("key"), F.lit(None).cast("binary").alias("value"),
            F.array().cast(HEADERS_TYPE).alias("headers"), F.col(source), F.lit(None).cast(ERROR_TYPE).alias(ERROR))
        rows = chain(frame, steps).where(F.col(ERROR).isNull()).select(source, "topic").collect()
        return {r[0]: r[1] for r in rows if r[1]}

    def _create_targets(self, counts: Mapping[str, int]) -> None:
        """``MirrorSourceConnector.computeAndCreateTopicPartitions``: a missing target topic is
        created with its source's partition count, an existing one with fewer is grown to it."""
        routes = self._routes(sorted(counts))
        same_cluster = self.output_bootstrap_servers == self.source_servers
        wanted: dict[str, int] = {}
        for source, target in routes.items():
            if same_cluster and source == target:
                raise ConnectError(f"TopicCopy would copy topic '{source}' onto itself: the source and target "
                                   "clusters are the same; rename the copies with a transform (RegexRouter) or "
                                   "leave the topic out with topics.exclude")
            wanted[target] = max(wanted.get(target, 0), counts[source])
        if not wanted:
            return
        admin = AdminClient({"bootstrap.servers": self.output_bootstrap_servers})
        try:
            existing = admin.list_topics(timeout=30).topics
            new = [NewTopic(t, n) for t, n in sorted(wanted.items()) if t not in existing]
            grow = [NewPartitions(t, n) for t, n in sorted(wanted.items())
                    if t in existing and len(existing[t].partitions) < n]
            for _, future in (admin.create_topics(new).items() if new else ()):
                try:
                    future.result(30)
                except TopicAlreadyExistsError:
                    pass
            for _, future in (admin.create_partitions(grow).items() if grow else ()):
                future.result(30)
        finally:
            admin.close()

    def read_stream(self) -> DataFrame:
        counts = self._source_partitions()
        self._create_targets(counts)
        reader = (self.context.spark.readStream.format("riverlog")
                  .option("riverlog.bootstrap.servers", self.source_servers).option("includeHeaders", "true")
                  .option("startingOffsets", self._starting(counts)))
        for k, v in self.config.reader_options().items():
            reader = reader.option(k, v)
        # Connect matches topics against whole names; Spark's subscribePattern finds them anywhere
        df = reader.option("subscribePattern", self.topic_filter().subscribe_pattern()).load()
        return df.select("topic", "partition", "offset", "timestamp", "key", "value", "headers")

    def source_offsets(self, end_offset: Mapping[str, Any]) -> list[tuple[dict, dict]]:
        """MirrorMaker's ``{"offset": <last record copied>}`` (``MirrorSourceTask.convertRecord``
        stores ``record.offset()``): Spark's end offset is the next one, so one less; a partition
        with nothing copied yet stores nothing."""
        alias = self.values["source.cluster.alias"]
        return [({CLUSTER: alias, TOPIC: t, PARTITION: int(p)}, {OFFSET: int(o) - 1})
                for t, ps in sorted(end_offset.items()) for p, o in sorted(ps.items(), key=lambda x: int(x[0]))
                if int(o) > 0]


__all__ = ["TopicCopy", "TopicFilter", "compile_pattern_list"]

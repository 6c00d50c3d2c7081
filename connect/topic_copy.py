"""``TopicCopy``: a source connector that copies topics from a riverlog cluster to a riverlog
cluster, with the connector's transforms on the way (a MirrorMaker-style copy between two
clusters is this connector with two bootstrap settings).

Configs (MirrorMaker 2's names):

- ``source.cluster.bootstrap.servers``: where the topics are read (default: the worker's cluster);
- ``target.cluster.bootstrap.servers``: where they are written (default: the worker's cluster);
- ``source.cluster.alias``: the ``cluster`` of the source partitions in connect-offsets (``source``);
- ``topics`` (comma-separated names) or ``topics.regex``: what to copy; a record keeps its topic
  name unless a transform (``RegexRouter``) renames it. ``consumer.override.*`` go to the reader,
  ``producer.override.*`` to the writer.

Records are copied as bytes (key, value, headers, timestamp; the partition is chosen again by the
target's partitioner from the key), so ``key.converter``/``value.converter`` default to
``ByteArrayConverter``; topic, header and filter transforms apply to them. Source offsets are
MirrorMaker's ``{"cluster", "topic", "partition"} -> {"offset"}`` (the next offset to copy). When
the target is the worker's cluster (run the worker next to the target, as MirrorMaker 2 advises)
they are written in the same transaction as the copied records: exactly once even if the
checkpoint is lost. With a target elsewhere they are written to connect-offsets after the
target's transaction commits, so a lost checkpoint with a crash between the two copies that batch
again.

    {"connector.class": "TopicCopy", "topics": "orders", "source.cluster.bootstrap.servers": "east:9092",
     "target.cluster.bootstrap.servers": "west:9092"}
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from broker.client import Consumer

from connect.config_def import ConfigDef, ConfigKey, Importance, Type, Width, non_empty_string, regex
from connect.connector import SourceConnector, register_connector

GROUP = "Clusters"


def _key(name: str, type_: str, default: Any, doc: str, order: int, validator=None) -> ConfigKey:
    return ConfigKey(name, type_, default, validator, Importance.HIGH, doc, GROUP, order, Width.LONG, name)


@register_connector
class TopicCopy(SourceConnector):
    """Topics from one cluster to another (or the same), transformed on the way."""
    class_name = "io.riverlog.connect.mirror.TopicCopySourceConnector"
    aliases = ("TopicCopy", "TopicCopySource", "TopicCopySourceConnector", "RiverlogSource")
    bytes_in_bytes_out = True
    reads_topics = True
    config_def = ConfigDef([
        _key("source.cluster.bootstrap.servers", Type.STRING, None,
             "The cluster to read from (default: the worker's bootstrap.servers).", 1),
        _key("target.cluster.bootstrap.servers", Type.STRING, None,
             "The cluster to write to (default: the worker's bootstrap.servers).", 2),
        _key("source.cluster.alias", Type.STRING, "source", "The source cluster's name in the stored source offsets.",
             3, non_empty_string),
        _key("topics", Type.LIST, "", "Topics to copy, separated by commas.", 4),
        _key("topics.regex", Type.STRING, "", "Regular expression of the topics to copy (instead of topics).", 5,
             regex),
    ])

    def __init__(self, config, context):
        super().__init__(config, context)
        from connect.errors import ConfigError
        listed, pattern = self._listed(), (self.values.get("topics.regex") or "").strip()
        if bool(listed) == bool(pattern):
            msg = "Must configure one of topics or topics.regex, not both"
            raise ConfigError(msg, errors={"topics": [msg], "topics.regex": [msg]})

    @classmethod
    def alter_offsets(cls, config, offsets) -> bool:
        """connect-offsets is all it keeps (the checkpoint is dropped when they change)."""
        return True

    def _listed(self) -> list[str]:
        return [t.strip() for t in self.values.get("topics") or [] if t.strip()]

    @property
    def source_servers(self) -> str:
        return self.values.get("source.cluster.bootstrap.servers") or self.context.bootstrap_servers

    @property
    def output_bootstrap_servers(self) -> str:
        return self.values.get("target.cluster.bootstrap.servers") or self.context.bootstrap_servers

    def _starting(self) -> str:
        """Where a query without a checkpoint starts: the stored offsets, else each partition's start."""
        alias = self.values["source.cluster.alias"]
        stored = {(p.get("topic"), int(p.get("partition", -1))): int(o["offset"])
                  for p, o in self.context.stored_offsets if p.get("cluster") == alias and "offset" in (o or {})}
        if not stored:
            return "earliest"
        c = Consumer({"bootstrap.servers": self.source_servers, "group.id": "", "enable.auto.commit": False})
        try:
            topics = c.list_topics(timeout=30).topics
            pattern = (self.values.get("topics.regex") or "").strip()
            names = [t for t in topics if (re.fullmatch(pattern, t) if pattern else t in self._listed())]
            out = {t: {str(p): stored.get((t, p), -2) for p in sorted(topics[t].partitions)} for t in names}
        finally:
            c.close()
        import json
        return json.dumps({t: ps for t, ps in out.items() if ps}) if out else "earliest"

    def read_stream(self) -> DataFrame:
        reader = (self.context.spark.readStream.format("riverlog")
                  .option("riverlog.bootstrap.servers", self.source_servers).option("includeHeaders", "true")
                  .option("startingOffsets", self._starting()))
        for k, v in self.config.reader_options().items():
            reader = reader.option(k, v)
        pattern = (self.values.get("topics.regex") or "").strip()
        # Connect matches topics.regex against the whole name; Spark's subscribePattern finds it anywhere
        reader = reader.option("subscribePattern", f"^(?:{pattern})$") if pattern else \
            reader.option("subscribe", ",".join(self._listed()))
        df = reader.load()
        return df.select("topic", F.lit(None).cast("int").alias("partition"), "offset", "timestamp", "key", "value",
                         "headers")

    def source_offsets(self, end_offset: Mapping[str, Any]) -> list[tuple[dict, dict]]:
        alias = self.values["source.cluster.alias"]
        return [({"cluster": alias, "topic": t, "partition": int(p)}, {"offset": int(o)})
                for t, ps in sorted(end_offset.items()) for p, o in sorted(ps.items(), key=lambda x: int(x[0]))]


__all__ = ["TopicCopy"]

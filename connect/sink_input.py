"""Where a sink connector's query reads from: the ``riverlog`` stream of its ``topics`` (or
``topics.regex``, matched against the whole name as Kafka Connect does), listed topics created when
missing, and the offsets it starts at — the group ``connect-<name>``'s committed offsets, the
earliest where it has none (Kafka's ``WorkerSinkTask`` with ``auto.offset.reset=earliest``)."""
from __future__ import annotations

import json
import re

from pyspark.sql import DataFrame

from broker.client import AdminClient, Consumer, NewTopic, TopicPartition
from broker.errors import TopicAlreadyExistsError

from connect.config import ConnectorConfig
from connect.connector import SinkConnector
from connect.connector_state import ConnectorPaths, group_id


def read(spark, config: ConnectorConfig, connector: SinkConnector, paths: ConnectorPaths) -> tuple[DataFrame, dict]:
    """(the streaming frame, the query's startingOffsets as kept beside its checkpoint)."""
    servers = connector.input_bootstrap_servers
    reader = (spark.readStream.format("riverlog").option("riverlog.bootstrap.servers", servers)
              .option("includeHeaders", "true").option("groupId", group_id(config.name)))
    for k, v in config.reader_options().items():
        reader = reader.option(k, v)
    pattern = str(config.values.get("topics.regex") or "").strip()
    # Connect matches topics.regex against the whole name; Spark's subscribePattern finds it anywhere
    reader = reader.option("subscribePattern", f"^(?:{pattern})$") if pattern else \
        reader.option("subscribe", ",".join(listed(config)))
    _create_missing(config, servers)
    # Always given, not only without a checkpoint: the riverlog source asks initialOffset()
    # again when batch 0 is replayed, and its default (latest) would skip that batch's records.
    committed = _committed(config, servers)
    reader = reader.option("startingOffsets", committed if isinstance(committed, str) else json.dumps(committed))
    query_start = paths.query_start(lambda: committed)
    return reader.load(), query_start   # its topics are read from the query's progress (connect.topic_tracking)


def listed(config: ConnectorConfig) -> list[str]:
    """The connector's ``topics``, a list or comma-separated."""
    raw = config.values.get("topics") or []
    items = raw if isinstance(raw, (list, tuple)) else str(raw).split(",")
    return [t.strip() for t in items if t.strip()]


def _topics(config: ConnectorConfig, consumer: Consumer) -> list[str]:
    topics = listed(config)
    pattern = str(config.values.get("topics.regex") or "").strip()
    if pattern:
        topics = [t for t in consumer.list_topics(timeout=30).topics if re.fullmatch(pattern, t)]
    return topics


def _create_missing(config: ConnectorConfig, servers: str) -> None:
    """Listed ``topics`` that do not exist yet are created with the broker's defaults, as a
    Kafka consumer's subscription creates them (``allow.auto.create.topics``); the query reads
    the partitions it finds when it starts."""
    names = listed(config)
    if not names:
        return
    admin = AdminClient({"bootstrap.servers": servers})
    try:
        existing = admin.list_topics(timeout=30).topics
        for name, future in admin.create_topics([NewTopic(t) for t in names if t not in existing]).items():
            try:
                future.result(30)
            except TopicAlreadyExistsError:
                pass
    finally:
        admin.close()


def _committed(config: ConnectorConfig, servers: str) -> dict | str:
    """The group's committed offsets (earliest where it has none): where a sink without a
    checkpoint starts."""
    c = Consumer({"bootstrap.servers": servers, "group.id": group_id(config.name), "enable.auto.commit": False})
    try:
        out: dict[str, dict[str, int]] = {}
        for topic in _topics(config, c):
            meta = c.list_topics(topic, timeout=30).topics.get(topic)
            parts = sorted(meta.partitions) if meta is not None and meta.partitions else []
            out[topic] = {str(p): -2 for p in parts}
            for tp in c.committed([TopicPartition(topic, p) for p in parts], timeout=30):
                if tp.offset >= 0:
                    out[topic][str(tp.partition)] = tp.offset
        return {t: ps for t, ps in out.items() if ps} or "earliest"
    finally:
        c.close()

"""Which steps of a sub-topology Spark runs on whole columns: the fast path, no Python per record.

The *prefix* is the longest line of stateless operations from a sub-topology's single source
(filter, filterNot, mapValues, selectKey, map with two expressions, flatMapValues) whose arguments
are SQL or vectorised callables (:mod:`streams.column_functions`). Spark decodes the source's bytes with
its serdes and applies the SQL steps as column expressions and the vectorised ones as Arrow UDFs
(one call per Arrow batch); the rest of the sub-topology (from the prefix's first
child on) runs in the task processors. A sub-topology that is only a prefix ending at a
fixed-topic sink runs no Python per record (none at all when it is all SQL). The reference
interpreter evaluates the same SQL text and calls the same functions, so both agree
(``tests/spark/test_streams_expressions_oracle.py``, ``tests/spark/test_streams_vectorized.py``).
"""
from __future__ import annotations

from dataclasses import dataclass

from streams.topology import Node, SubTopology

SQL_OPS = {"filter", "filterNot", "mapValues", "selectKey", "map", "flatMapValues"}
_ARGS = ("predicate", "mapper", "selector", "key", "value")


@dataclass
class Plan:
    source: Node | None          # the source Spark decodes, None: Python decodes (no prefix)
    prefix: list[Node]           # the SQL steps, in order
    entry: str | None            # the node the task processors start at (None: the sources)
    sink: Node | None            # a fixed-topic sink ending a pure-SQL sub-topology


def _sql(node: Node) -> bool:
    if node.op not in SQL_OPS or len(node.parents) != 1:
        return False
    fns = [v for k, v in node.args.items() if k in _ARGS]
    return bool(fns) and all(getattr(f, "is_sql", False) or getattr(f, "is_vectorized", False) for f in fns)


def _windowed(sink: Node) -> bool:
    """A sink of windowed keys chooses each record's partition by the inner key (Kafka's
    ``WindowedStreamPartitioner``, :class:`streams.stateless.Sink`), so it runs in the task, on
    the keys its source deserialized (Spark's columns would leave the partition to the producer);
    so does a sink with the user's stream partitioner, called per record."""
    from streams.serdes_windowed import TimeWindowedSerde
    return isinstance(sink.key_serde, TimeWindowedSerde) or sink.args.get("partitioner") is not None


def vectorized_fn(node: Node):
    """The node's vectorised function, or None when its arguments are SQL."""
    return next((v for k, v in node.args.items() if k in _ARGS and getattr(v, "is_vectorized", False)), None)


def plan(sub: SubTopology, decode_in_spark: bool = True) -> Plan:
    """``decode_in_spark`` False: the sources decode in Python (a deserialization handler that
    continues, or a default timestamp extractor other than ``FailOnInvalidTimestamp``, needs each
    record in :class:`streams.stateless.Source`), so there is no prefix."""
    sources = sub.sources
    if len(sources) != 1 or not decode_in_spark:
        return Plan(None, [], None, None)
    src = sources[0]
    consumed = src.args.get("consumed")
    if src.op == "table" or (consumed is not None and consumed.timestamp_extractor is not None):
        return Plan(None, [], None, None)
    chain, node = [], src
    while len(node.children) == 1 and _sql(node.children[0]):
        node = node.children[0]
        chain.append(node)
    if not chain:
        return Plan(None, [], None, None)
    if len(node.children) == 1:
        nxt = node.children[0]
        if nxt.kind == "sink" and nxt.topics and not nxt.children \
                and len(sub.nodes) == len(chain) + 2:
            if _windowed(nxt):
                return Plan(None, [], None, None)
            return Plan(src, chain, None, nxt)
        return Plan(src, chain, nxt.name, None)
    if not node.children:
        return Plan(src, chain, None, None)
    return Plan(src, chain[:-1], chain[-1].name, None) if len(chain) > 1 else Plan(None, [], None, None)


def apply(df, p: Plan, defaults: tuple):
    """The source's rows decoded and run through the prefix: columns key and value typed."""
    from pyspark.sql import functions as F
    ks = p.source.key_serde or defaults[0]
    vs = p.source.value_serde or defaults[1]
    record = (F.col("topic"), F.col("partition"), F.col("offset"))   # a poison record's failure names it
    df = df.select((ks.decode(F.col("key"), record=record) if ks is not None else F.col("key")).alias("key"),
                   (vs.decode(F.col("value"), record=record) if vs is not None else F.col("value")).alias("value"),
                   "topic", "partition", "offset", "timestamp", "headers")
    for n in p.prefix:
        a = n.args
        f = vectorized_fn(n)
        if f is not None:
            from streams.column_functions import spark_column
            col = spark_column(f)
            if n.op == "map":
                df = df.withColumn("__kv", col).select(
                    F.col("__kv.key").alias("key"), F.col("__kv.value").alias("value"),
                    "topic", "partition", "offset", "timestamp", "headers")
                continue
            a = {"predicate": col, "mapper": col, "selector": col}
        else:
            a = {k: F.expr(v.sql) for k, v in a.items() if k in _ARGS}
        if n.op == "filter":
            df = df.where(F.coalesce(a["predicate"], F.lit(False)))
        elif n.op == "filterNot":
            df = df.where(~F.coalesce(a["predicate"], F.lit(False)))
        elif n.op == "mapValues":
            df = df.withColumn("value", a["mapper"])
        elif n.op == "selectKey":
            df = df.withColumn("key", a["selector"])
        elif n.op == "map":
            df = df.select(a["key"].alias("__k"), a["value"].alias("__v"),
                           "topic", "partition", "offset", "timestamp", "headers") \
                   .withColumnRenamed("__k", "key").withColumnRenamed("__v", "value")
        elif n.op == "flatMapValues":
            df = df.withColumn("value", F.explode(a["mapper"]))
    return df


def sink_columns(df, p: Plan, defaults: tuple, application_id: str):
    """A pure-SQL sub-topology's output: the sink's serdes encode in Spark."""
    from pyspark.sql import functions as F
    from streams.topology import Topology
    ks = p.sink.key_serde or defaults[0]
    vs = p.sink.value_serde or defaults[1]
    topic = Topology.topic(application_id, p.sink, p.sink.topics[0])
    return df.select(F.lit(topic).alias("topic"), F.lit(None).cast("int").alias("partition"),
                     (ks.encode(F.col("key")) if ks is not None else F.col("key")).alias("key"),
                     (vs.encode(F.col("value")) if vs is not None else F.col("value")).alias("value"),
                     "timestamp", "headers")


def fail_on_invalid_timestamp(df, topics, patterns=()):
    """Kafka's default ``FailOnInvalidTimestamp`` for rows no Python source sees (the SQL prefix,
    the steps that combine rows before their task): a record of ``topics`` (or of a topic a
    pattern source matches, ``patterns``) with a negative timestamp fails the query with Kafka's
    message."""
    from pyspark.sql import functions as F
    from streams.parameters import invalid_timestamp_message
    before, after = invalid_timestamp_message("\0").split("\0")
    record = F.concat(F.lit("ConsumerRecord(topic = "), F.col("topic"), F.lit(", partition = "),
                      F.col("partition").cast("string"), F.lit(", offset = "), F.col("offset").cast("string"),
                      F.lit(", CreateTime = "), F.unix_millis("timestamp").cast("string"), F.lit(")"))
    mine = F.col("topic").isin(*sorted(topics))
    for p in patterns:
        mine = mine | F.col("topic").rlike(f"^(?:{p})$")
    bad = (F.unix_millis("timestamp") < 0) & mine
    return df.withColumn("timestamp", F.when(bad, F.raise_error(F.concat(F.lit(before), record, F.lit(after))))
                         .otherwise(F.col("timestamp")))

"""A count per key combined before its task: one row per key a batch touches reaches
``transformWithState`` instead of one row per record.

Spark turns every cell it hands a stateful processor into a Python value, which is most of a
count's cost (BENCHMARKS.md, "Streams"), and a count needs only how many records each key gained
or lost and their timestamps. So a ``mapInArrow`` step before the shuffle counts each input
partition's records per key bytes with Arrow and NumPy, and the task applies each key's counts at
once. Two counts qualify, each alone in its sub-topology behind the record cache:

- ``groupByKey()/groupBy(...).count()`` of a stream (Kafka's ``KStreamAggregate`` with the count
  functions), also right behind Spark's SQL steps that keep the key (the rows they leave, decoded,
  with the key encoded again by its serde): a record with a key and a value adds one, the row's
  timestamp is the largest of its records' and its own; a record whose key or value reads as null
  is skipped (logged once per batch and partition here, where Kafka logs each). Keys are counted
  per bytes and merged per decoded key in the task (counts add).
- ``table.groupBy(...).count()`` (``KTableAggregate``), whose repartition topic carries changes
  (``Change(new, old)`` packed, :func:`streams.stateless.pack_change`): the subtractor runs only on
  a group that has a row, so the record order matters up to a group's first added row. Per key the
  step gives the rows added and taken away in all, those taken away up to and including the first
  record that adds (skipped when the group had no row before the batch), and the largest
  timestamp from that record on and over all. The topic is this application's, so each key has
  one byte form.

Only what a record-at-a-time run with Kafka's record cache could emit is emitted: one change per
key per commit, the latest count against the one of the last commit, the last record's headers
and position; forwarded in the order of each key's last record. A cache too small for a batch's
keys would forward some intermediate counts record by record (Kafka emits them or not by cache size
and commit timing); here it does not.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from streams.arrow_step import (cannot_fail, check_column, headers_as_json, headers_back, lone_source,
                                per_partition)
from streams.errors import StreamsError
from streams.topology import SubTopology

COUNT_COLUMNS = ("added", "subtracted", "lead_subtracted", "first_index", "last_index", "timestamp_all")
COUNT_DDL = ("topic STRING, partition INT, offset BIGINT, key BINARY, value BINARY, timestamp TIMESTAMP, "
             "headers STRING, added BIGINT, subtracted BIGINT, lead_subtracted BIGINT, first_index BIGINT, "
             "last_index BIGINT, timestamp_all BIGINT")
_INPUT = ("topic", "partition", "offset", "key", "timestamp", "headers")


@dataclass(frozen=True)
class KeyCount:
    """Where a sub-topology's count is combined per key: its aggregate, which count, the source's serdes."""
    aggregate: str
    table: bool                   # KGroupedTable.count: the rows are packed changes
    key_serde: Any = None
    value_serde: Any = None       # a stream count's value serde, decoded in Spark for null; None: bytes
    typed: bool = False           # the rows come out of Spark's SQL steps (streams.spark_plan), decoded
    DESCRIPTION: ClassVar[str] = "records counted per key with Arrow (mapInArrow) before the task"


def combinable(sub: SubTopology, defaults: tuple, cache_bytes: int, plan=None) -> KeyCount | None:
    """The sub-topology's :class:`KeyCount`, or None when its task must see every record.
    ``plan``: the sub-topology's :class:`streams.spark_plan.Plan` when Spark runs SQL steps before
    the task (a stream's count behind a filter, mapValues or flatMapValues that keep the key)."""
    from streams.aggregate import KStreamAggregate, KTableAggregate, count_adder, count_subtractor
    if plan is not None and plan.source is not None:
        return _after_sql(sub, defaults, cache_bytes, plan)
    src = lone_source(sub, cache_bytes, ("stream", "repartition"))
    if src is None:
        return None
    agg = src.children[0]
    if agg.op != "count" or len(agg.parents) != 1 or any(n.stores for n in sub.nodes if n is not agg):
        return None
    proc, changes = agg.factory(), getattr(src.factory(), "changes", False)
    ks = src.key_serde or defaults[0]
    if type(proc) is KTableAggregate and changes and proc.adder is count_adder \
            and proc.subtractor is count_subtractor:
        return KeyCount(agg.name, True, ks)
    if type(proc) is KStreamAggregate and not changes and proc.aggregator is count_adder:
        vs = src.value_serde or defaults[1]
        # a value this application wrote reads back as itself: null only when its bytes are
        decoded = not src.internal and vs is not None and not cannot_fail(vs)
        return KeyCount(agg.name, False, ks, vs if decoded else None)
    return None


def _after_sql(sub: SubTopology, defaults: tuple, cache_bytes: int, plan) -> KeyCount | None:
    """A stream's count right after Spark's SQL steps, none of which changes the key."""
    from streams.aggregate import KStreamAggregate, count_adder
    if plan.entry is None or plan.sink is not None or any(n.op in ("selectKey", "map") for n in plan.prefix):
        return None
    if lone_source(sub, cache_bytes, ("stream", "repartition")) is not plan.source:
        return None
    agg = next((n for n in sub.nodes if n.name == plan.entry), None)
    if agg is None or agg.op != "count" or len(agg.parents) != 1 or any(n.stores for n in sub.nodes if n is not agg):
        return None
    proc = agg.factory()
    if type(proc) is not KStreamAggregate or proc.aggregator is not count_adder:
        return None
    return KeyCount(agg.name, False, plan.source.key_serde or defaults[0], typed=True)


def combined(df, c: KeyCount):
    """``df`` (the source's rows, or with ``c.typed`` the rows out of the SQL steps) as one row per
    (input partition, key bytes) plus a summary row per input partition (:data:`COUNT_DDL`)."""
    from pyspark.sql import functions as F
    cols = [headers_as_json() if x == "headers" else x for x in _INPUT]
    record = (F.col("topic"), F.col("partition"), F.col("offset"))   # a poison record's failure names it
    if c.typed:     # the key as the task reads it back (its serde), null key or value skipped
        key = F.col("key") if c.key_serde is None else c.key_serde.encode(F.col("key"))
        cols[_INPUT.index("key")] = key.alias("key")
        cols.append((F.col("key").isNotNull() & F.col("value").isNotNull()).alias("valid"))
    elif c.table:
        cols.append("value")
    else:
        key = F.col("key")
        valid = (key if c.key_serde is None else c.key_serde.decode(key, record=record)).isNotNull()
        if c.value_serde is not None:
            valid = valid & ~check_column(c.value_serde)
        else:
            valid = valid & F.col("value").isNotNull()
        cols.append(valid.alias("valid"))
    return headers_back(df.select(*cols).mapInArrow(per_partition(lambda t: count_table(t, c.table)), COUNT_DDL))


def change_flags(values):
    """(has new, has old) of each packed change in ``values`` (a binary array), read from the
    length prefixes with NumPy; a value that is not a change fails as the task's source would."""
    import numpy as np
    import pyarrow as pa
    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    arr = arr.cast(pa.binary())
    n = len(arr)
    if arr.null_count:
        raise StreamsError("a repartition record of a grouped table is not a change (format 1); was the topic "
                           "written by another application?")
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32)[arr.offset:arr.offset + n + 1].astype(np.int64)
    data = np.frombuffer(arr.buffers()[2], dtype=np.uint8) if n else np.zeros(0, np.uint8)
    start, length = offsets[:-1], offsets[1:] - offsets[:-1]
    if n and ((length < 9).any() or (data[start] != 1).any()):
        raise StreamsError("a repartition record of a grouped table is not a change (format 1); was the topic "
                           "written by another application?")

    def int32_at(pos):
        b = [data[pos + k].astype(np.int64) for k in range(4)]
        u = (b[0] << 24) | (b[1] << 16) | (b[2] << 8) | b[3]
        return np.where(u >= 1 << 31, u - (1 << 32), u)

    new_len = int32_at(start + 1)
    has_new = new_len >= 0
    old_len = int32_at(start + 5 + np.maximum(new_len, 0))
    return has_new, old_len >= 0


def count_table(t, table: bool):
    """One topic-partition's rows (in offset order) as one row per key bytes, plus a summary row
    (key and ``first_index`` null): ``added`` the records skipped (a stream count's null key or
    value), ``timestamp`` the last record's.

    Per key: ``added`` and ``subtracted`` the rows added and taken away in all (a stream count
    takes none away); ``lead_subtracted`` those taken away by records up to and including the
    first that adds (a table count's, all of them when none adds); ``timestamp`` the largest from
    that record on, ``timestamp_all`` (epoch ms) the largest of all; ``offset``, ``topic``,
    ``partition`` and ``headers`` the last record's; ``first_index`` and ``last_index`` the
    first and last record's row in the partition's batch (rows of one offset, which a
    ``flatMapValues`` before the count makes, in their order)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    n = t.num_rows
    ts = np.floor_divide(t["timestamp"].combine_chunks().cast(pa.int64()).to_numpy(zero_copy_only=False), 1000)
    if table:
        keep = np.ones(n, dtype=bool)
        adds, subs = change_flags(t["value"])
    else:
        keep = np.asarray(t["valid"].to_numpy(zero_copy_only=False), dtype=bool)
        adds, subs = np.ones(n, dtype=bool), np.zeros(n, dtype=bool)
    idx = np.nonzero(keep)[0]
    codes = pc.dictionary_encode(t["key"].combine_chunks().take(pa.array(idx, pa.int64())), null_encoding="encode")
    g = np.asarray(codes.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    keys = len(codes.dictionary)
    none = np.iinfo(np.int64).max
    add, sub, t_k = adds[idx], subs[idx], ts[idx]
    first_add = np.full(keys, none, np.int64)
    np.minimum.at(first_add, g[add], idx[add])
    from_first = idx >= first_add[g]
    counts = {
        "added": np.bincount(g, weights=add, minlength=keys).astype(np.int64),
        "subtracted": np.bincount(g, weights=sub, minlength=keys).astype(np.int64),
        "lead_subtracted": np.bincount(g, weights=sub & (idx <= first_add[g]), minlength=keys).astype(np.int64)}
    low = np.iinfo(np.int64).min
    ts_all = np.full(keys, low, np.int64)
    np.maximum.at(ts_all, g, t_k)
    ts_from = np.full(keys, low, np.int64)
    np.maximum.at(ts_from, g[from_first], t_k[from_first])
    ts_from = np.where(first_add == none, ts_all, ts_from)
    last = np.full(keys, -1, np.int64)
    np.maximum.at(last, g, idx)
    first = np.full(keys, none, np.int64)
    np.minimum.at(first, g, idx)
    last_a, ms_type = pa.array(last, pa.int64()), pa.timestamp("us", tz="UTC")
    out = pa.table({
        "topic": t["topic"].take(last_a), "partition": t["partition"].take(last_a), "offset": t["offset"].take(last_a),
        "key": codes.dictionary.cast(pa.binary()), "value": pa.nulls(keys, pa.binary()),
        "timestamp": pa.array(ts_from * 1000, pa.int64()).cast(ms_type), "headers": t["headers"].take(last_a),
        **{k: pa.array(v, pa.int64()) for k, v in counts.items()},
        "first_index": pa.array(first, pa.int64()), "last_index": last_a,
        "timestamp_all": pa.array(ts_all, pa.int64())})
    end = n - 1
    summary = pa.table({
        "topic": t["topic"].slice(end, 1), "partition": t["partition"].slice(end, 1),
        "offset": t["offset"].slice(end, 1), "key": pa.nulls(1, pa.binary()), "value": pa.nulls(1, pa.binary()),
        "timestamp": t["timestamp"].slice(end, 1).cast(ms_type), "headers": pa.nulls(1, t.schema.field("headers").type),
        "added": pa.array([n - len(idx)], pa.int64()), "subtracted": pa.array([0], pa.int64()),
        "lead_subtracted": pa.array([0], pa.int64()), "first_index": pa.nulls(1, pa.int64()),
        "last_index": pa.nulls(1, pa.int64()),
        "timestamp_all": pa.nulls(1, pa.int64())})
    return pa.concat_tables([out.cast(summary.schema), summary])

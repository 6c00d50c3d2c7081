"""A windowed count combined per window before its task: one row per (key, window) a batch
touches reaches ``transformWithState`` instead of one row per record.

Spark turns every cell it hands a stateful processor into a Python value, and that conversion is
most of a windowed count's cost (BENCHMARKS.md, "Streams"). A count needs only how many records
each window gained and the largest timestamp among them, so a ``mapInArrow`` step before the
shuffle counts them per input partition with Arrow and NumPy, and the task adds each window's
count at once. The result equals Kafka's record-at-a-time rules:

- the processor's stream time is the largest timestamp of the records (with a key) it has seen;
  a record updates window ``[s, s + size)`` iff ``s + size + grace >`` that stream time, the
  record's own timestamp included;
- within a batch, that stream time is the larger of the task's stream time before the batch
  (``T0``) and the batch's running maximum up to the record (``prefix``). A record whose
  ``prefix`` already closes a window is dropped here; the rest of a window's records are all
  kept or all dropped by ``T0``, which the task checks;
- the task adds the windows in order of start, so a window expired by a later window's put (store
  retention) is one whose remaining records were already dropped, as record by record; windows of
  one start in order of their first record, so the store lists their keys in the same order.

Only what a record-at-a-time run with Kafka's record cache could emit is emitted: one update per
changed window per commit, its timestamp the window's largest, its headers the last record's. So
the step runs only where the cache is on (``statestore.cache.max.bytes`` > 0, the store cached),
for ``count`` over ``TimeWindows`` with ``emitStrategy(onWindowUpdate)``, fed straight from one
source topic (or right behind Spark's SQL steps that keep the key: the rows they leave, decoded,
the key encoded again by its serde), with no other store in the sub-topology. Spark still
decodes every key (a key that decodes to null is dropped, as record by record) and, from a topic
the application did not write, every value whose serde can fail, so a malformed record fails the
query as it would in the task. Windows are counted per key's bytes and merged per decoded key in the task.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from streams.arrow_step import (check_column, checked_serde, headers_as_json, headers_back, lone_source,
                                per_partition)
from streams.topology import SubTopology

COMBINED_COLUMNS = ("window_start", "window_count", "first_offset", "stream_time")
COMBINED_DDL = ("topic STRING, partition INT, offset BIGINT, key BINARY, value BINARY, timestamp TIMESTAMP, "
                "headers STRING, window_start BIGINT, window_count BIGINT, first_offset BIGINT, stream_time BIGINT")
_INPUT = ("topic", "partition", "offset", "key", "timestamp", "headers")


@dataclass(frozen=True)
class Combine:
    """Where a sub-topology's windowed count is combined: its aggregate, the windows, the source's serdes."""
    aggregate: str
    size: int
    advance: int
    grace: int
    key_serde: Any = None
    value_serde: Any = None       # decoded in Spark only to fail on a malformed value; None: not checked
    typed: bool = False           # the rows come out of Spark's SQL steps (streams.spark_plan), decoded
    DESCRIPTION: ClassVar[str] = "records counted per window with Arrow (mapInArrow) before the task"


def combinable(sub: SubTopology, defaults: tuple, cache_bytes: int, plan=None) -> Combine | None:
    """The sub-topology's :class:`Combine`, or None when it must run record by record. ``plan``:
    the sub-topology's :class:`streams.spark_plan.Plan` when Spark runs SQL steps before the task
    (then the count must come right after them, and none of them may change the key)."""
    from streams.window_aggregate import ON_WINDOW_UPDATE, TimeWindowAggregate, _plus_one
    src = lone_source(sub, cache_bytes, ("stream", "repartition"))
    if src is None:
        return None
    typed = plan is not None and plan.source is not None
    if typed:
        if plan.source is not src or plan.entry is None or plan.sink is not None \
                or any(n.op in ("selectKey", "map") for n in plan.prefix):
            return None
        agg = next((n for n in sub.nodes if n.name == plan.entry), None)
        if agg is None:
            return None
    else:
        agg = src.children[0]
    if agg.op != "count" or len(agg.parents) != 1:
        return None
    proc = agg.factory()
    if type(proc) is not TimeWindowAggregate or proc.aggregator is not _plus_one or proc.emit != ON_WINDOW_UPDATE:
        return None
    if any(n.stores for n in sub.nodes if n is not agg) or getattr(src.factory(), "changes", False):
        return None
    w = proc.windows
    return Combine(agg.name, w.size(), w.advanceMs, w.gracePeriodMs(), src.key_serde or defaults[0],
                   None if typed else checked_serde(src, defaults), typed)


def combined(df, c: Combine):
    """``df`` (the source's rows, or with ``c.typed`` the rows out of the SQL steps) as combined
    rows, per input partition (:data:`COMBINED_DDL`)."""
    from pyspark.sql import functions as F
    key = F.col("key")
    cols = [headers_as_json() if x == "headers" else x for x in _INPUT]
    record = (F.col("topic"), F.col("partition"), F.col("offset"))   # a poison key's failure names it
    if c.typed:     # decoded by the SQL steps: encoded again by its serde, as the task reads it back
        cols[_INPUT.index("key")] = (key if c.key_serde is None else c.key_serde.encode(key)).alias("key")
        cols.append(key.isNotNull().alias("key_valid"))
    else:
        cols.append((key if c.key_serde is None else c.key_serde.decode(key, record=record)).isNotNull()
                    .alias("key_valid"))
    if c.value_serde is not None:
        cols.append(check_column(c.value_serde))
    return headers_back(df.select(*cols).mapInArrow(per_partition(lambda t: combine_table(t, c)), COMBINED_DDL))


def combine_table(t, c: Combine):
    """One topic-partition's rows (in offset order; ``key_valid``: its key decodes to a value) as
    one row per (key bytes, window) kept, plus a summary row (key and ``window_start`` null):
    ``window_count`` the records dropped (no key, or their window closed by the batch's own stream
    time), ``stream_time`` the batch's largest timestamp with a key, ``timestamp`` and ``offset``
    the last record's."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    n = t.num_rows
    ts = np.floor_divide(t["timestamp"].combine_chunks().cast(pa.int64()).to_numpy(zero_copy_only=False), 1000)
    valid = np.asarray(t["key_valid"].to_numpy(zero_copy_only=False), dtype=bool)
    low = np.iinfo(np.int64).min
    prefix = np.maximum.accumulate(np.where(valid, ts, low))
    first = (np.maximum(0, ts - c.size + c.advance) // c.advance) * c.advance
    rows, starts, dropped = [], [], int(n - valid.sum())
    for k in range(c.size // c.advance + 1):
        s = first + k * c.advance
        inside = valid & (s <= ts)
        if not inside.any():
            break
        kept = inside & (prefix < s + c.size + c.grace)
        dropped += int(inside.sum() - kept.sum())
        idx = np.nonzero(kept)[0]
        rows.append(idx)
        starts.append(s[idx])
    idx = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    start = np.concatenate(starts) if starts else np.zeros(0, np.int64)
    pairs = pa.table({"key": t["key"].take(pa.array(idx)), "window_start": pa.array(start, pa.int64()),
                      "i": pa.array(idx, pa.int64()), "ts": pa.array(ts[idx] if len(idx) else [], pa.int64())})
    g = pairs.group_by(["key", "window_start"]).aggregate([("i", "min"), ("i", "max"), ("i", "count"), ("ts", "max")])
    last = g["i_max"]
    ms_type = pa.timestamp("us", tz="UTC")
    out = pa.table({
        "topic": t["topic"].take(last), "partition": t["partition"].take(last), "offset": t["offset"].take(last),
        "key": g["key"], "value": pa.nulls(g.num_rows, pa.binary()),
        "timestamp": pc.multiply(g["ts_max"], 1000).cast(ms_type), "headers": t["headers"].take(last),
        "window_start": g["window_start"], "window_count": g["i_count"].cast(pa.int64()),
        "first_offset": t["offset"].take(g["i_min"]), "stream_time": pa.nulls(g.num_rows, pa.int64())})
    end = n - 1
    summary = pa.table({
        "topic": t["topic"].slice(end, 1), "partition": t["partition"].slice(end, 1),
        "offset": t["offset"].slice(end, 1), "key": pa.nulls(1, pa.binary()), "value": pa.nulls(1, pa.binary()),
        "timestamp": t["timestamp"].slice(end, 1).cast(ms_type), "headers": pa.nulls(1, t.schema.field("headers").type),
        "window_start": pa.nulls(1, pa.int64()), "window_count": pa.array([dropped], pa.int64()),
        "first_offset": pa.nulls(1, pa.int64()),
        "stream_time": pa.array([int(prefix[-1]) if valid.any() else None], pa.int64())})
    return pa.concat_tables([out.cast(summary.schema), summary])

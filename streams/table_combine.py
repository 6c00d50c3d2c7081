"""A cached table read from a topic keeps only each key's last record of a batch before its task.

A ``builder.table(topic)`` whose store is cached (Kafka's record cache, ``statestore.cache.max.bytes``
> 0) forwards one change per key per commit: the key's latest value against the value it had at
the last commit, with the latest record's timestamp, headers and position. Every earlier record of
that key in the batch only overwrites the store and the cache entry, so a task that never sees it
leaves the same store, the same changelog (latest value per key) and the same forwarded changes,
in the same order (the cache forwards keys in order of their last write). Spark turns every cell it
hands ``transformWithState`` into a Python value, so a ``mapInArrow`` step before the shuffle drops
those records per input partition with Arrow.

The rule is per key *bytes*: a record is dropped only when a later record of the same topic-partition
carries the same key bytes (which the task reads as the same key), so two byte forms of one key are
both kept and the task orders them. Records without key bytes are kept (the task drops and logs
them). From a topic the application did not write, every value whose serde can fail is decoded in
Spark, so a malformed value fails the query as it would in the task. It applies where the table's
store is the sub-topology's only store, unversioned and cached, read from one topic without a
timestamp extractor: every processor downstream sees only what the cache forwards. What is lost
is Kafka's "out-of-order KTable update" warning for a dropped record, and a cache that would have
filled and forwarded a key's intermediate value mid-commit (Kafka emits that or not by cache size
and commit timing; both are its rules).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from streams.arrow_step import check_column, checked_serde, headers_as_json, headers_back, lone_source
from streams.topology import SubTopology

LATEST_DDL = "topic STRING, partition INT, offset BIGINT, key BINARY, value BINARY, timestamp TIMESTAMP, headers STRING"
_COLUMNS = ("topic", "partition", "offset", "key", "value", "timestamp", "headers")


@dataclass(frozen=True)
class LatestPerKey:
    """A sub-topology whose cached source table reads each key's last record of a batch."""
    value_serde: Any = None       # decoded in Spark only to fail on a malformed value; None: not checked
    DESCRIPTION: ClassVar[str] = "each key's last record of a batch kept with Arrow (mapInArrow) before the task"


def combinable(sub: SubTopology, defaults: tuple, cache_bytes: int) -> LatestPerKey | None:
    """The sub-topology's :class:`LatestPerKey`, or None when its task must see every record."""
    src = lone_source(sub, cache_bytes, ("table",))
    if src is None:
        return None
    table = src.children[0]
    if table.op != "table-source" or table.args.get("versioned") or table.args.get("global") \
            or any(n.stores for n in sub.nodes if n is not table):
        return None
    return LatestPerKey(checked_serde(src, defaults))


def combined(df, c: LatestPerKey):
    """``df`` (the source's rows) without the records a later one of the same key bytes overwrites."""
    from pyspark.sql import functions as F
    cols = [headers_as_json() if x == "headers" else F.col(x) for x in _COLUMNS]
    if c.value_serde is not None:
        cols.append(check_column(c.value_serde))
    return headers_back(df.select(*cols).mapInArrow(latest_batches, LATEST_DDL))


def latest_batches(batches):
    """``mapInArrow``'s function: each input partition's rows, each key's last record only."""
    import pyarrow as pa
    batches = [b for b in batches if b.num_rows]
    if batches:
        yield from latest_table(pa.Table.from_batches(batches)).to_batches()


def latest_table(t):
    """``t``'s rows (any order) without those a later offset of the same topic-partition and key
    bytes overwrites, in (topic, partition, offset) order; the check column dropped."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    t = t.select(list(_COLUMNS)).sort_by([("topic", "ascending"), ("partition", "ascending"),
                                          ("offset", "ascending")])
    i = pa.array(np.arange(t.num_rows, dtype=np.int64))
    keyed = pc.is_valid(t["key"])
    index = pa.table({"topic": t["topic"], "partition": t["partition"], "key": t["key"], "i": i})
    last = index.filter(keyed).group_by(["topic", "partition", "key"], use_threads=False).aggregate([("i", "max")])
    unkeyed = np.nonzero(~np.asarray(keyed.to_numpy(zero_copy_only=False), dtype=bool))[0]
    kept = np.sort(np.concatenate([last["i_max"].to_numpy(), unkeyed]))
    return t.take(pa.array(kept, pa.int64()))

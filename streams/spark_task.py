"""What runs on Spark's executors: a sub-topology's tasks inside ``transformWithState`` (stateful)
or ``mapInArrow`` (stateless), applying rows through the same processors as the interpreter.

Stores live in one ``MapState`` per store, their entries grouped in buckets behind a write-back
cache (:mod:`streams.state_buckets`): a batch reads each bucket it touches from Spark once and
writes it once, and every entry it changed is also emitted as a changelog row (latest value per
key, as compaction keeps), in the same output — and so the same exactly-once write — as the
records the batch produced.
"""
from __future__ import annotations

import itertools
import logging
from datetime import datetime, timedelta, timezone

from streams.count_combine import COUNT_COLUMNS, KeyCount
from streams.errors import StreamsError
from streams.global_table import global_topics, with_global_stores
from streams.interpreter import TaskPolicy, build_task, merged
from streams.record import Record
from streams.stores import DictBacking, _hashable
from streams.state_buckets import HEADER, BucketedBacking, bucket_key, encode_blob, encode_header
from streams.task_placement import task_of
from streams.topology import Topology, changelog_topic
from streams.window_combine import COMBINED_COLUMNS, Combine

OUTPUT_DDL = ("topic STRING, partition INT, key BINARY, value BINARY, timestamp TIMESTAMP, "
              "headers ARRAY<STRUCT<key: STRING, value: BINARY>>")
TASK_COLUMNS = ("topic", "partition", "offset", "key", "value", "timestamp", "headers", "source_partition")
META_STORE = "__meta"
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MS = timedelta(milliseconds=1)
log = logging.getLogger(__name__)


def meta_changelog(app: str, sub_id: int) -> str:
    """The changelog of a sub-topology's processor metadata (each windowed processor's stream time)."""
    return f"{app}-subtopology-{sub_id}-meta-changelog"


def to_ms(ts) -> int:
    if ts is None:
        return 0
    if isinstance(ts, int):
        return ts
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=timezone.utc)
    return (ts - _EPOCH) // _MS


def task_input(df):
    """``df`` narrowed to the columns a task reads, the timestamp as epoch milliseconds: Spark turns
    every cell it is given into a Python value before the processor is called, so
    ``timestampType`` is left out, and a datetime would only be turned back into milliseconds."""
    from pyspark.sql import functions as F
    return df.select(*[F.unix_millis("timestamp").alias("timestamp") if c == "timestamp" else F.col(c)
                       for c in df.columns if c in TASK_COLUMNS or c in COMBINED_COLUMNS or c in COUNT_COLUMNS])


def queues(rows, first: set[str] = frozenset()) -> tuple[list, list[list]]:
    """A task's rows as (the ``first`` topics' rows, each input partition's rows): offset order
    within each partition, the partitions by topic name then number. The ``first`` topics (global
    tables) are applied before the rest, as Kafka's global thread keeps its stores ahead of the
    stream threads; the others are merged by :func:`streams.interpreter.merged`."""
    by_input: dict[tuple, list] = {}
    for r in rows:
        by_input.setdefault((r["topic"], r["partition"]), []).append(r)
    head = [r for k in sorted(k for k in by_input if k[0] in first)
            for r in sorted(by_input.pop(k), key=lambda r: r["offset"])]
    return head, [sorted(rs, key=lambda r: r["offset"]) for _, rs in sorted(by_input.items())]


def python_value(v):
    """Spark's Rows (structs) as the dicts the processors and the interpreter use."""
    if hasattr(v, "asDict"):
        return {k: python_value(x) for k, x in v.asDict(recursive=False).items()}
    if isinstance(v, list):
        return [python_value(x) for x in v]
    if isinstance(v, dict):
        return {k: python_value(x) for k, x in v.items()}
    return v


class PartitionCounts:
    """Each output topic's number of partitions, asked of the cluster the first time a task's
    windowed sink writes to it and kept for as long as this object (one Spark task: a batch of
    the tasks it runs), as Kafka's ``RecordCollectorImpl`` asks its producer's metadata
    (``partitionsFor``, which may create the topic where the broker auto-creates topics)."""

    def __init__(self, bootstrap_servers: str | None):
        self.bootstrap_servers = bootstrap_servers
        self.counts: dict[str, int] = {}
        self._producer = None

    def __call__(self, topic: str) -> int:
        n = self.counts.get(topic)
        if n is None:
            n = self.counts[topic] = self._ask(topic)
        return n

    def _ask(self, topic: str) -> int:
        from broker.client import Producer
        if self.bootstrap_servers is None:
            raise StreamsError(f"could not determine the number of partitions for topic '{topic}': no "
                               f"bootstrap.servers")
        if self._producer is None:
            self._producer = Producer({"bootstrap.servers": self.bootstrap_servers})
        try:
            info = self._producer.list_topics(topic, timeout=30).topics.get(topic)
        except Exception as e:
            raise StreamsError(f"Could not determine the number of partitions for topic '{topic}' due to "
                               f"{e}") from e
        if info is None or info.error is not None or not info.partitions:
            raise StreamsError(f"Could not get partition information for topic {topic}. This can happen if the "
                               f"topic does not exist.")
        return len(info.partitions)

    def close(self) -> None:
        if self._producer is not None:
            self._producer.close()
            self._producer = None


def run_rows(topology: Topology, sub_id: int, app: str, partition: int, rows, defaults, backing=None,
             entry: str | None = None, cache_bytes: int = 0, policy: TaskPolicy | None = None,
             partition_count=None):
    """Apply ``rows`` (source rows of one task) and return the task's output rows. Each record is
    deserialized and timestamped (the sources' extractors, the exception handlers of ``policy``)
    as it becomes its partition's head, and the partitions are merged by those timestamps, as
    Kafka's partition group picks. With ``entry``, Spark SQL already ran the steps before that
    node: the rows carry typed keys and values and their own timestamps. The batch is one commit:
    with ``cache_bytes`` (``statestore.cache.max.bytes``) a cached table store forwards each key's
    latest change once, at the end or when its cache is full. ``partition_count``: a
    :class:`PartitionCounts`, for the sinks of windowed keys."""
    sub = with_global_stores(topology, topology.subtopologies[sub_id])
    task, sources = build_task(topology, sub, app, partition, backing=backing, defaults=defaults, policy=policy,
                               partition_count=partition_count)
    task.use_cache(cache_bytes)
    head = task.processors[entry] if entry is not None else None

    def prepare(r):
        task.source = (r["topic"], r["partition"], r["offset"])
        headers = tuple((h["key"], h["value"]) for h in (r.get("headers") or ()))
        if head is not None:
            return Record(python_value(r["key"]), python_value(r["value"]), to_ms(r["timestamp"]), headers)
        return sources[r["topic"]].prepare(Record(r["key"], r["value"], to_ms(r["timestamp"]), headers), task.source)

    first, inputs = queues(rows, global_topics(topology, sub))
    last_ts = None
    for r, record in itertools.chain(((r, prepare(r)) for r in first), merged(inputs, prepare)):
        if record is not None:
            task.source = (r["topic"], r["partition"], r["offset"])
            (head.process if head is not None else sources[r["topic"]].forward)(record)
            last_ts = record.timestamp   # extracted: the broker's may be negative
    task.commit()
    return task, _outputs(task), _as_datetime(last_ts)


def run_combined(topology: Topology, sub_id: int, app: str, partition: int, rows, defaults, combine: Combine,
                 backing=None, cache_bytes: int = 0, policy: TaskPolicy | None = None, partition_count=None):
    """:func:`run_rows` for rows combined per window (:mod:`streams.window_combine`): each window's
    count added in order of window start and first record (so store time and retention advance as
    the records would advance them), then each input partition's summary (records dropped before
    the task, stream time). The cache then forwards the windows in the order the records would have
    left them in: by each window's last record, then start (Kafka's ``NamedCache`` flushes the
    least recently written first; one record updates its windows by start)."""
    task, _ = build_task(topology, topology.subtopologies[sub_id], app, partition, backing=backing,
                         defaults=defaults, policy=policy, partition_count=partition_count)
    task.use_cache(cache_bytes)
    agg = task.processors[combine.aggregate]
    ks = combine.key_serde
    windows: dict[tuple, dict] = {}      # one per (start, decoded key): a key may have several byte forms
    for r in rows:
        if r["window_start"] is None:
            continue
        key = ks.deserialize(r["key"]) if ks is not None else r["key"]
        w = windows.setdefault((r["window_start"], _hashable(key)),
                               {"key": key, "count": 0, "ts": None, "last": r, "first": r["first_offset"]})
        w["count"] += r["window_count"]
        ts = to_ms(r["timestamp"])
        w["ts"] = ts if w["ts"] is None else max(w["ts"], ts)
        w["last"] = max(w["last"], r, key=lambda x: x["offset"])
        w["first"] = min(w["first"], r["first_offset"])
    for (start, _), w in sorted(windows.items(), key=lambda kv: (kv[0][0], kv[1]["first"])):
        last = w["last"]
        task.source = (last["topic"], last["partition"], last["offset"])
        headers = tuple((h["key"], h["value"]) for h in (last["headers"] or ()))
        agg.add_counted(w["key"], start, w["count"], w["ts"], headers)
    last_ts = None
    for r in sorted((r for r in rows if r["window_start"] is None), key=lambda r: (r["topic"], r["offset"])):
        task.source = (r["topic"], r["partition"], r["offset"])
        agg.observe_counted(r["stream_time"], r["window_count"])
        last_ts = r["timestamp"]
    if task.cache is not None:
        last = {(start, hk): (w["last"]["offset"], start) for (start, hk), w in windows.items()}
        task.cache.reorder(agg.store_name, lambda window: last.get((window.start, _hashable(window.key)),
                                                                    (float("inf"), window.start)))
    task.commit()
    return task, _outputs(task), _as_datetime(last_ts)


def _apply_key_counts(task, agg, c: KeyCount, rows):
    """Apply combined ``rows`` to the task's count ``agg``; return the last record's timestamp.
    Keys are applied in order of their first record and the cache set to forward them in order of
    their last (Kafka's ``NamedCache`` flushes the least recently written first)."""
    ks = c.key_serde
    groups: dict = {}
    for r in rows:
        if r["first_index"] is None:
            continue
        key = ks.deserialize(r["key"]) if ks is not None else r["key"]
        hk = _hashable(key)
        g = groups.get(hk)
        if g is None:
            groups[hk] = {"key": key, "row": r, "first": r["first_index"], "last": r["last_index"],
                          "added": r["added"], "subtracted": r["subtracted"], "lead": r["lead_subtracted"],
                          "ts": to_ms(r["timestamp"]), "ts_all": r["timestamp_all"]}
            continue
        if c.table:     # one byte form per key on this application's repartition topic
            raise StreamsError(f"two byte forms of the group key {key!r} on a grouped table's repartition topic; "
                               "was the topic written by another application?")
        g["added"] += r["added"]
        g["ts"] = g["ts_all"] = max(g["ts"], to_ms(r["timestamp"]))
        g["first"] = min(g["first"], r["first_index"])
        if r["last_index"] > g["last"]:
            g["last"], g["row"] = r["last_index"], r
    for g in sorted(groups.values(), key=lambda g: g["first"]):
        r = g["row"]
        task.source = (r["topic"], r["partition"], r["offset"])
        headers = tuple((h["key"], h["value"]) for h in (r["headers"] or ()))
        if c.table:
            agg.add_changes(g["key"], g["added"], g["subtracted"], g["lead"], g["ts"], g["ts_all"], headers)
        else:
            agg.add_count(g["key"], g["added"], g["ts"], headers)
    last_ts = None
    for r in sorted((r for r in rows if r["first_index"] is None), key=lambda r: (r["topic"], r["offset"])):
        if r["added"]:
            log.warning("Skipping %d records due to null key or value. topic=[%s] partition=[%s] "
                        "offsets up to [%s]", r["added"], r["topic"], r["partition"], r["offset"])
        last_ts = r["timestamp"]
    if task.cache is not None:
        last = {hk: g["last"] for hk, g in groups.items()}
        task.cache.reorder(agg.store_name, lambda key: last.get(_hashable(key), float("inf")))
    return last_ts


def run_key_counts(topology: Topology, sub_id: int, app: str, partition: int, rows, defaults, combine: KeyCount,
                   backing=None, cache_bytes: int = 0, policy: TaskPolicy | None = None, partition_count=None):
    """:func:`run_rows` for rows combined per key (:mod:`streams.count_combine`)."""
    task, _ = build_task(topology, topology.subtopologies[sub_id], app, partition, backing=backing,
                         defaults=defaults, policy=policy, partition_count=partition_count)
    task.use_cache(cache_bytes)
    last_ts = _apply_key_counts(task, task.processors[combine.aggregate], combine, rows)
    task.commit()
    return task, _outputs(task), _as_datetime(last_ts)


def _as_datetime(ts):
    return datetime.fromtimestamp(ts / 1000, tz=timezone.utc) if isinstance(ts, int) else ts


def _outputs(task) -> list:
    return [(t, p, k, v, datetime.fromtimestamp(ts / 1000, tz=timezone.utc),
             [{"key": hk, "value": hv} for hk, hv in hdrs]) for (t, k, v, ts, hdrs, p) in task.outputs]


try:
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor
except ImportError:  # pragma: no cover - pyspark is a dependency
    StatefulProcessor = object


class TaskProcessor(StatefulProcessor):
    """One sub-topology's tasks; Spark groups the input by task (under its placement key,
    :mod:`streams.task_placement`), so each call is one task."""

    def __init__(self, topology: Topology, sub_id: int, app: str, defaults: tuple, entry: str | None = None,
                 cache_bytes: int = 0, keys: tuple[int, ...] = (), combine: Combine | KeyCount | None = None,
                 policy: TaskPolicy | None = None):
        self.topology, self.sub_id, self.app, self.defaults = topology, sub_id, app, defaults
        self.policy = policy        # default.timestamp.extractor and the exception handlers
        self.entry, self.cache_bytes, self.keys = entry, cache_bytes, keys   # keys: the tasks' placement keys
        self.combine = combine      # the rows are combined per window or key (window_combine, count_combine)

    def init(self, handle) -> None:
        self.handle = handle
        sub = with_global_stores(self.topology, self.topology.subtopologies[self.sub_id])
        names = [s.name for s in sub.stores] + [META_STORE]
        self.states = {n: handle.getMapState(_state_name(n), "k BINARY", "v BINARY") for n in names}
        self.partition_count = PartitionCounts(getattr(self.policy, "bootstrap_servers", None))

    def _backings(self):
        out = {}
        for name, state in self.states.items():
            topic = meta_changelog(self.app, self.sub_id) if name == META_STORE else changelog_topic(self.app, name)
            out[name] = BucketedBacking(state, topic)
        return out

    def handleInputRows(self, key, rows, timerValues):
        from pyspark.sql import Row
        partition = task_of(int(key[0]), self.keys)
        backings = self._backings()
        rows = [r.asDict(recursive=False) for r in rows]
        if rows and "source_partition" in rows[0]:     # global tables' rows are copied to every task
            for r in rows:
                r["partition"] = r.pop("source_partition")
        if isinstance(self.combine, KeyCount):
            task, out, last_ts = run_key_counts(self.topology, self.sub_id, self.app, partition, rows, self.defaults,
                                                self.combine, backing=lambda name: backings[name],
                                                cache_bytes=self.cache_bytes, policy=self.policy,
                                                partition_count=self.partition_count)
        elif self.combine is not None:
            task, out, last_ts = run_combined(self.topology, self.sub_id, self.app, partition, rows, self.defaults,
                                              self.combine, backing=lambda name: backings[name],
                                              cache_bytes=self.cache_bytes, policy=self.policy,
                                              partition_count=self.partition_count)
        else:
            task, out, last_ts = run_rows(self.topology, self.sub_id, self.app, partition, rows, self.defaults,
                                          backing=lambda name: backings[name], entry=self.entry,
                                          cache_bytes=self.cache_bytes, policy=self.policy,
                                          partition_count=self.partition_count)
        for t, p, k, v, ts, h in out:
            yield Row(topic=t, partition=p, key=k, value=v, timestamp=ts, headers=h)
        for name in sorted(backings):
            for t, p, k, v, ts, h in backings[name].flush(partition, last_ts):
                yield Row(topic=t, partition=p, key=k, value=v, timestamp=ts, headers=h)

    def handleInitialState(self, key, initialState, timerValues) -> None:
        """One bucket of a store's changelog entries (:func:`streams.restore.initial_state`),
        restoring a checkpoint that is gone (the application restarts from the broker)."""
        state = self.states.get(initialState["store"])
        if state is not None:
            entries = {e["key"]: e["value"] for e in initialState["entries"]}
            state.updateValue((bucket_key(initialState["bucket"]),), (encode_blob(entries),))
            state.updateValue((HEADER,), (encode_header(initialState["level"], initialState["count"]),))

    def close(self) -> None:
        counts = getattr(self, "partition_count", None)
        if counts is not None:
            counts.close()


def _state_name(store: str) -> str:
    return "s_" + "".join(c if c.isalnum() else "_" for c in store)


def stateless_batches(topology: Topology, sub_id: int, app: str, defaults: tuple, entry: str | None = None,
                      policy: TaskPolicy | None = None):
    """``mapInArrow``'s function for a stateless sub-topology."""
    import pyarrow as pa

    schema = pa.schema([("topic", pa.string()), ("partition", pa.int32()), ("key", pa.binary()),
                        ("value", pa.binary()), ("timestamp", pa.timestamp("us", tz="UTC")),
                        ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])))])

    def run(batches):
        # no stores, so no changelog: the task's meta lasts as long as this Spark task (a source
        # whose extractor reads the partition time makes the sub-topology stateful, SubTopology.stateful)
        metas: dict[int, DictBacking] = {}
        counts = PartitionCounts(getattr(policy, "bootstrap_servers", None))
        try:
            yield from _batches(batches, metas, counts)
        finally:
            counts.close()

    def _batches(batches, metas, counts):
        for batch in batches:
            rows = batch.to_pylist()
            by_partition: dict[int, list] = {}
            for r in rows:
                by_partition.setdefault(r["partition"], []).append(r)
            out = []
            for p, rs in sorted(by_partition.items()):
                meta = metas.setdefault(p, DictBacking())
                _, produced, _ = run_rows(topology, sub_id, app, p, rs, defaults, entry=entry, policy=policy,
                                          backing=lambda name, meta=meta: meta if name == "__meta" else DictBacking(),
                                          partition_count=counts)
                out.extend(produced)
            if out:
                cols = list(zip(*out))
                yield pa.RecordBatch.from_arrays([pa.array(c, t) for c, t in zip(cols, schema.types)], schema=schema)
    return run

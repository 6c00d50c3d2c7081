"""A count combined per key before its task (:mod:`streams.count_combine`) against the same task
applying the same batches record by record: after every batch, the same store, the same changes
forwarded in the same order (with their timestamps, headers and old values) and the same last
timestamp, over random histories and batch splits — for a stream's count (keys and values
sometimes null, two byte strings that read as one key, timestamps out of order) and a grouped
table's count (rows moving between groups, updates within a group, deletes, groups that lose a
row before the batch adds one)."""
from __future__ import annotations

from datetime import datetime, timezone

import pyarrow as pa
import pytest
from hypothesis import example, given, settings, strategies as st

from streams import Consumed, Produced, Serdes, StreamsBuilder
from streams.count_combine import change_flags, combinable, count_table
from streams.errors import StreamsError
from streams.grouped import Grouped
from streams.parameters import Materialized, Repartitioned
from streams.spark_task import run_key_counts, run_rows
from streams.stateless import pack_change
from streams.record import Change
from streams.windows import TimeWindows
from tests.streams.test_window_combine import Backings

pytestmark = pytest.mark.unit

S, L = Serdes.String(), Serdes.Long()
HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
BIG = 10 * 1024 * 1024


def stream_count(value_serde=S, repartition=False, caching=True, old_values=False):
    b = StreamsBuilder()
    s = b.stream("in", Consumed.with_(S, value_serde))
    if repartition:
        s = s.selectKey(lambda k, v: k).repartition(Repartitioned.with_(S, value_serde))
    m = Materialized.as_("counts") if caching else Materialized.as_("counts").withCachingDisabled()
    t = s.groupByKey().count(materialized=m)
    if old_values:      # a re-grouping downstream makes the count send old values
        t.groupBy(lambda k, v: (str(v), k), Grouped.with_(S, S)).count().toStream().to("out2", Produced.with_(S, L))
    else:
        t.toStream().to("out", Produced.with_(S, L))
    return b.build()


def table_count():
    b = StreamsBuilder()
    (b.table("in", Consumed.with_(S, S)).groupBy(lambda k, v: (v, k), Grouped.with_(S, S))
      .count(materialized=Materialized.as_("counts")).toStream().to("out", Produced.with_(S, L)))
    return b.build()


def arrow_batch(records: list[tuple], first_offset: int, topic: str = "in") -> pa.Table:
    """(key, value, timestamp, valid) records as ``mapInArrow`` receives them."""
    return pa.table({
        "topic": pa.array([topic] * len(records), pa.string()),
        "partition": pa.array([0] * len(records), pa.int32()),
        "offset": pa.array(range(first_offset, first_offset + len(records)), pa.int64()),
        "key": pa.array([k for k, *_ in records], pa.binary()),
        "value": pa.array([v for _, v, *_ in records], pa.binary()),
        "timestamp": pa.array([datetime.fromtimestamp(ts / 1000, tz=timezone.utc) for _, _, ts in records],
                              pa.timestamp("us", tz="UTC")),
        "headers": pa.array([[{"key": "o", "value": b"%d" % (first_offset + i)}] for i in range(len(records))],
                            HEADERS),
        # what Spark computes for a String key and a value whose bytes decide null
        "valid": pa.array([k is not None and v is not None for k, v, _ in records], pa.bool_())})


def task_rows(table: pa.Table) -> list[dict]:
    """Rows as the task gets them from Spark: the timestamp in epoch milliseconds."""
    rows = table.to_pylist()
    for r in rows:
        r["timestamp"] = int(r["timestamp"].timestamp() * 1000) if r["timestamp"] is not None else None
    return rows


def replay(topology, sub_id, combine, history, cuts, topic="in"):
    one, other = Backings(), Backings()
    at, n = 0, 0
    while at < len(history):
        batch = history[at:at + cuts[n % len(cuts)]]
        at, n = at + len(batch), n + 1
        table = arrow_batch(batch, at - len(batch), topic)
        _, expected, last_expected = run_rows(topology, sub_id, "app", 0, task_rows(table), (None, None),
                                              backing=one, cache_bytes=BIG)
        rows = task_rows(count_table(table, combine.table))
        assert len(rows) <= len(batch) + 1
        _, got, last_got = run_key_counts(topology, sub_id, "app", 0, rows, (None, None), combine,
                                          backing=other, cache_bytes=BIG)
        assert got == expected      # in order: the cache flushes by each key's last record
        assert last_got == last_expected
        assert other.state() == one.state()


# b"\xff" and b"\xfe" both read as "\ufffd" (Kafka's String serde replaces malformed UTF-8)
stream_records = st.lists(st.tuples(st.sampled_from([b"a", b"b", b"\xff", b"\xfe", None]),
                                    st.sampled_from([b"x", b"", None]), st.integers(-3, 40)), max_size=40)


@settings(max_examples=200, deadline=None)
@example([(b"\xff", b"x", 1), (b"\xfe", b"x", 5), (b"\xff", b"x", 3)], [3], False)   # one key, two forms
@example([(b"a", b"x", 1), (b"b", b"x", 2), (b"a", None, 3), (b"a", b"x", 0)], [4], True)
@given(stream_records, st.lists(st.integers(1, 12), min_size=1, max_size=8), st.booleans())
def test_a_stream_count_combined_per_key_leaves_the_state_and_changes_records_would(history, cuts, old_values):
    topology = stream_count(old_values=old_values)
    combine = combinable(topology.subtopologies[0], (None, None), BIG)
    assert combine is not None and not combine.table
    replay(topology, 0, combine, history, cuts)


def _changes(history):
    """(table key, value, ts) updates of a source table grouped by value, as the repartition
    topic carries them (KTableRepartitionMap: one change within a group, else the old group's
    subtraction then the new group's addition)."""
    table, out = {}, []
    for key, value, ts in history:
        old = table.get(key)
        if value is None:
            table.pop(key, None)
        else:
            table[key] = value
        if old is not None and value is not None and old == value:
            out.append((value, pack_change(Change(key, key), S), ts))
            continue
        if old is not None:
            out.append((old, pack_change(Change(None, key), S), ts))
        if value is not None:
            out.append((value, pack_change(Change(key, None), S), ts))
    return out


table_updates = st.lists(st.tuples(st.sampled_from(["k1", "k2", "k3", "k4"]), st.sampled_from([b"g", b"h", None]),
                                   st.integers(-3, 40)), max_size=40)


@settings(max_examples=200, deadline=None)
@example([("k1", b"g", 5), ("k1", b"h", 3), ("k2", b"g", 9), ("k1", b"g", 1)], [1, 3], 0)
@given(table_updates, st.lists(st.integers(1, 12), min_size=1, max_size=8), st.integers(0, 6))
def test_a_table_count_combined_per_key_leaves_the_state_and_changes_records_would(updates, cuts, drop):
    topology = table_count()
    sub = topology.subtopologies[1]
    combine = combinable(sub, (None, None), BIG)
    assert combine is not None and combine.table
    changes = _changes(updates)
    # a subtraction whose addition was never seen (the group has no row): skipped, as record by record
    changes = changes[drop:] if drop < len(changes) else changes
    topic = topology.topic("app", sub.sources[0], sub.sources[0].topics[0])
    replay(topology, 1, combine, changes, cuts, topic)


def filtered_count():
    b = StreamsBuilder()
    (b.stream("in", Consumed.with_(S, S)).filter("value <> 'x'").flatMapValues("array(value, value)").groupByKey()
     .count(materialized=Materialized.as_("counts")).toStream().to("out", Produced.with_(S, L)))
    return b.build()


def after_sql(table: pa.Table) -> pa.Table:
    """What Spark's SQL steps of :func:`filtered_count` hand the combining step: keys decoded and
    encoded again by the String serde, values filtered (null and 'x' dropped) and each doubled,
    the two rows of one record keeping its offset, timestamp and headers."""
    keep = [i for i, v in enumerate(table["value"].to_pylist()) if v is not None and S.deserialize(v) != "x"]
    rows = table.take(pa.array([i for i in keep for _ in (0, 1)], pa.int64()))
    keys = [None if k is None else S.serialize(S.deserialize(k)) for k in rows["key"].to_pylist()]
    return rows.set_column(rows.schema.get_field_index("key"), "key", pa.array(keys, pa.binary())) \
               .set_column(rows.schema.get_field_index("valid"), "valid", pa.array([k is not None for k in keys]))


@settings(max_examples=150, deadline=None)
@example([(b"\xff", b"y", 1), (b"\xfe", b"y", 5), (b"a", b"x", 3), (b"a", b"y", 2)], [4])
@given(stream_records, st.lists(st.integers(1, 12), min_size=1, max_size=8))
def test_a_count_after_spark_sql_steps_combined_per_key_leaves_what_records_would(history, cuts):
    """Behind a SQL filter and a flatMapValues that gives each record two rows of one offset."""
    from streams.spark_plan import plan
    topology = filtered_count()
    combine = combinable(topology.subtopologies[0], (None, None), BIG, plan(topology.subtopologies[0]))
    assert combine is not None and combine.typed
    one, other = Backings(), Backings()
    at, n = 0, 0
    while at < len(history):
        batch = history[at:at + cuts[n % len(cuts)]]
        at, n = at + len(batch), n + 1
        table = arrow_batch(batch, at - len(batch))
        _, expected, last_expected = run_rows(topology, 0, "app", 0, task_rows(table), (None, None),
                                              backing=one, cache_bytes=BIG)
        sql = after_sql(table)
        if not sql.num_rows:
            continue        # Spark hands the task nothing: no commit, nothing forwarded
        _, got, _ = run_key_counts(topology, 0, "app", 0, task_rows(count_table(sql, False)), (None, None),
                                   combine, backing=other, cache_bytes=BIG)
        assert got == expected
        assert other.state()["counts"] == one.state()["counts"]


def test_a_change_packed_for_the_repartition_topic_is_read_from_its_length_prefixes():
    packed = [pack_change(Change(n, o), S) for n, o in (("a", None), (None, "bb"), ("ccc", "d"), ("", ""))]
    has_new, has_old = change_flags(pa.array(packed, pa.binary()).slice(0))
    assert has_new.tolist() == [True, False, True, True]
    assert has_old.tolist() == [False, True, True, True]
    with pytest.raises(StreamsError, match="not a change"):
        change_flags(pa.array([b"\x02\x00"], pa.binary()))
    with pytest.raises(StreamsError, match="not a change"):
        change_flags(pa.array([None], pa.binary()))


def test_only_a_cached_count_alone_in_its_sub_topology_is_combined():
    plain = combinable(stream_count().subtopologies[0], (None, None), BIG)
    assert plain is not None and plain.key_serde == S and plain.value_serde is None   # a String value: bytes say null
    assert combinable(stream_count(value_serde=L).subtopologies[0], (None, None), BIG).value_serde == L
    behind = stream_count(value_serde=L, repartition=True).subtopologies
    assert combinable(behind[1], (None, None), BIG).value_serde is None     # this application wrote it
    assert combinable(stream_count().subtopologies[0], (None, None), 0) is None            # no record cache
    assert combinable(stream_count(caching=False).subtopologies[0], (None, None), BIG) is None
    b = StreamsBuilder()
    b.stream("in", Consumed.with_(S, S)).groupByKey().reduce(lambda a, v: a + v).toStream().to("o")
    assert combinable(b.build().subtopologies[0], (None, None), BIG) is None               # not a count
    b = StreamsBuilder()
    b.stream("in", Consumed.with_(S, S)).groupByKey().windowedBy(TimeWindows.ofSizeWithNoGrace(10)).count()
    assert combinable(b.build().subtopologies[0], (None, None), BIG) is None               # windowed: window_combine
    two = stream_count(old_values=True).subtopologies
    assert combinable(two[1], (None, None), BIG).table                                     # the re-grouped count
    assert combinable(table_count().subtopologies[0], (None, None), BIG) is None           # the table's own hop
    from streams.spark_plan import plan
    sub = filtered_count().subtopologies[0]
    assert combinable(sub, (None, None), BIG) is None                         # its source feeds the SQL steps
    assert combinable(sub, (None, None), BIG, plan(sub)).typed
    b = StreamsBuilder()
    b.stream("in", Consumed.with_(S, S)).selectKey("value").groupByKey().count().toStream().to("o", Produced.with_(S, L))
    keyed = b.build().subtopologies
    assert combinable(keyed[0], (None, None), BIG, plan(keyed[0])) is None   # the key changes: a repartition
    assert not combinable(keyed[1], (None, None), BIG, plan(keyed[1])).typed

"""A windowed count combined per window before its task (:mod:`streams.window_combine`) against
the same task applying the same batches record by record: after every batch, the same store, the
same stream time and dropped count, and the same updates forwarded (one per changed window per
commit, with its timestamp and its last record's headers), over random histories — keys sometimes
null, sometimes two byte strings that read as one key (malformed UTF-8), timestamps out of order
and sometimes negative — random batch splits, and random windows."""
from __future__ import annotations

from datetime import datetime, timezone

import pyarrow as pa
import pytest
from hypothesis import example, given, settings, strategies as st

from streams import Consumed, Produced, Serdes, StreamsBuilder
from streams.grouped import EmitStrategy
from streams.parameters import Materialized, Repartitioned
from streams.spark_task import run_combined, run_rows
from streams.stores import DictBacking
from streams.window_combine import combinable, combine_table
from streams.windows import SessionWindows, SlidingWindows, TimeWindows

pytestmark = pytest.mark.unit

S, L = Serdes.String(), Serdes.Long()
HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
BIG = 10 * 1024 * 1024


def windowed_count(windows, key_serde=S, value_serde=S, emit=None, repartition=False, caching=True):
    b = StreamsBuilder()
    s = b.stream("in", Consumed.with_(key_serde, value_serde))
    if repartition:
        s = s.selectKey(lambda k, v: k).repartition(Repartitioned.with_(S, value_serde))
    w = s.groupByKey().windowedBy(windows)
    if emit is not None:
        w = w.emitStrategy(emit)
    m = Materialized.as_("counts") if caching else Materialized.as_("counts").withCachingDisabled()
    w.count(materialized=m).toStream().map(lambda k, v: (f"{k.key}@{k.start}", v)).to("out", Produced.with_(S, L))
    return b.build()


def arrow_batch(records: list[tuple], first_offset: int) -> pa.Table:
    """The source's columns as ``mapInArrow`` receives them."""
    return pa.table({
        "topic": pa.array(["in"] * len(records), pa.string()),
        "partition": pa.array([0] * len(records), pa.int32()),
        "offset": pa.array(range(first_offset, first_offset + len(records)), pa.int64()),
        "key": pa.array([k for k, _, _ in records], pa.binary()),
        "timestamp": pa.array([datetime.fromtimestamp(ts / 1000, tz=timezone.utc) for _, ts, _ in records],
                              pa.timestamp("us", tz="UTC")),
        "headers": pa.array([[{"key": "h", "value": h.encode()}] for _, _, h in records], HEADERS),
        "key_valid": pa.array([k is not None for k, _, _ in records], pa.bool_())})


def task_rows(table: pa.Table) -> list[dict]:
    """Rows as the task gets them from Spark: the timestamp in epoch milliseconds."""
    rows = table.to_pylist()
    for r in rows:
        r["timestamp"] = int(r["timestamp"].timestamp() * 1000) if r["timestamp"] is not None else None
        r.setdefault("value", b"v")
    return rows


class Backings:
    def __init__(self):
        self.by_name: dict[str, DictBacking] = {}

    def __call__(self, name):
        return self.by_name.setdefault(name, DictBacking())

    def state(self):
        return {n: dict(b.data) for n, b in self.by_name.items()}


# b"\xff" and b"\xfe" both read as "\ufffd" (Kafka's String serde replaces malformed UTF-8)
records = st.lists(st.tuples(st.sampled_from([b"a", b"b", b"\xff", b"\xfe", None]), st.integers(-3, 40),
                             st.sampled_from("xyz")), max_size=40)


@settings(max_examples=200, deadline=None)
@example([(b"\xff", 1, "x"), (b"\xfe", 2, "y"), (b"\xff", 3, "z")], [3], 10, 10, 0)   # one key, two forms, interleaved
@example([(b"a", 1, "x"), (b"b", 2, "y"), (b"a", 3, "z")], [3], 10, 10, 0)   # a updated last: flushed after b
@given(records, st.lists(st.integers(1, 12), min_size=1, max_size=8), st.integers(1, 12), st.integers(1, 12),
       st.integers(0, 8))
def test_combined_batches_leave_the_state_and_updates_records_would(history, cuts, size, advance, grace):
    advance = min(advance, size)
    windows = TimeWindows.ofSizeAndGrace(size, grace).advanceBy(advance)
    topology = windowed_count(windows)
    sub = topology.subtopologies[0]
    combine = combinable(sub, (None, None), BIG)
    assert combine is not None
    one, other = Backings(), Backings()
    at, offset = 0, 0
    while at < len(history):
        batch = history[at:at + cuts[offset % len(cuts)]]
        at += len(batch)
        table = arrow_batch(batch, at - len(batch))
        offset += 1
        _, expected, last_expected = run_rows(topology, 0, "app", 0, task_rows(table), (None, None),
                                              backing=one, cache_bytes=BIG)
        rows = task_rows(combine_table(table, combine))
        _, got, last_got = run_combined(topology, 0, "app", 0, rows, (None, None), combine, backing=other,
                                        cache_bytes=BIG)
        assert got == expected      # in order: the cache flushes by each window's last record
        assert last_got == last_expected
        assert other.state() == one.state()


def filtered_windowed_count(windows):
    b = StreamsBuilder()
    (b.stream("in", Consumed.with_(S, S)).filter("value <> 'x'").flatMapValues("array(value, value)")
     .groupByKey().windowedBy(windows).count(materialized=Materialized.as_("counts")).toStream()
     .map(lambda k, v: (f"{k.key}@{k.start}", v)).to("out", Produced.with_(S, L)))
    return b.build()


@settings(max_examples=150, deadline=None)
@example([(b"\xff", 1, "y"), (b"\xfe", 2, "x"), (b"\xff", 3, "z")], [3], 10, 10, 0)
@given(records, st.lists(st.integers(1, 12), min_size=1, max_size=8), st.integers(1, 12), st.integers(1, 12),
       st.integers(0, 8))
def test_a_windowed_count_after_spark_sql_steps_combined_leaves_what_records_would(history, cuts, size, advance,
                                                                                  grace):
    """Behind a SQL filter (value 'x' dropped) and a flatMapValues giving each record two rows of
    one offset: Spark hands the combining step decoded keys, encoded again by their serde."""
    from streams.spark_plan import plan
    advance = min(advance, size)
    topology = filtered_windowed_count(TimeWindows.ofSizeAndGrace(size, grace).advanceBy(advance))
    sub = topology.subtopologies[0]
    combine = combinable(sub, (None, None), BIG, plan(sub))
    assert combine is not None and combine.typed and combine.value_serde is None
    assert combinable(sub, (None, None), BIG) is None       # its source feeds the SQL steps
    one, other = Backings(), Backings()
    at, n = 0, 0
    while at < len(history):
        batch = history[at:at + cuts[n % len(cuts)]]
        at, n = at + len(batch), n + 1
        table = arrow_batch(batch, at - len(batch))
        raw = task_rows(table)
        for r, (_, _, h) in zip(raw, batch):
            r["value"] = h.encode()         # the value the filter reads: the record's letter
        _, expected, last_expected = run_rows(topology, 0, "app", 0, raw, (None, None), backing=one,
                                              cache_bytes=BIG)
        keep = [i for i, (_, _, h) in enumerate(batch) if h != "x"]
        sql = table.take(pa.array([i for i in keep for _ in (0, 1)], pa.int64()))
        keys = [None if k is None else S.serialize(S.deserialize(k)) for k in sql["key"].to_pylist()]
        sql = sql.set_column(sql.schema.get_field_index("key"), "key", pa.array(keys, pa.binary())) \
                 .set_column(sql.schema.get_field_index("key_valid"), "key_valid", pa.array([k is not None for k in keys]))
        if not sql.num_rows:
            continue        # Spark hands the task nothing
        _, got, _ = run_combined(topology, 0, "app", 0, task_rows(combine_table(sql, combine)), (None, None),
                                 combine, backing=other, cache_bytes=BIG)
        assert got == expected
        assert other.state() == one.state()     # the store, and the stream time and dropped count


def test_only_a_cached_windowed_count_on_update_is_combined_and_a_value_that_may_fail_is_decoded():
    size = TimeWindows.ofSizeWithNoGrace(10)
    plain = combinable(windowed_count(size).subtopologies[0], (None, None), BIG)
    assert plain is not None and plain.key_serde == S and plain.value_serde is None   # a String value cannot fail
    assert combinable(windowed_count(size).subtopologies[0], (None, None), 0) is None           # no record cache
    assert combinable(windowed_count(size, caching=False).subtopologies[0], (None, None), BIG) is None
    on_close = windowed_count(size, emit=EmitStrategy.onWindowClose())
    assert combinable(on_close.subtopologies[0], (None, None), BIG) is None
    assert combinable(windowed_count(size, value_serde=L).subtopologies[0], (None, None), BIG).value_serde == L
    assert combinable(windowed_count(SlidingWindows.ofTimeDifferenceWithNoGrace(10)).subtopologies[0],
                      (None, None), BIG) is None
    assert combinable(windowed_count(SessionWindows.ofInactivityGapWithNoGrace(10)).subtopologies[0],
                      (None, None), BIG) is None
    # behind a repartition topic this application wrote, its values are not decoded again
    behind = windowed_count(size, value_serde=L, repartition=True).subtopologies
    assert combinable(behind[0], (None, None), BIG) is None
    assert combinable(behind[1], (None, None), BIG).value_serde is None

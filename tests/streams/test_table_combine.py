"""A cached source table that reads only each key's last record of a batch
(:mod:`streams.table_combine`) against the same task applying every record: after every batch,
the same stores, the same changes forwarded in the same order (with their timestamps and headers)
and the same last timestamp, over random histories — keys sometimes null, sometimes two byte
strings that read as one key (malformed UTF-8), tombstones, timestamps out of order, two input
partitions mixed in one Arrow batch — random batch splits, and three topologies downstream of the
table (a re-keying aggregation's first hop, a filter, a mapValues)."""
from __future__ import annotations

import random
from datetime import datetime, timezone

import pyarrow as pa
import pytest
from hypothesis import example, given, settings, strategies as st

from streams import Consumed, Produced, Serdes, StreamsBuilder
from streams.grouped import Grouped
from streams.parameters import Materialized
from streams.spark_task import run_rows
from streams.table_combine import combinable, latest_table
from streams.versioned import Stores
from tests.streams.test_window_combine import Backings

pytestmark = pytest.mark.unit

S, L = Serdes.String(), Serdes.Long()
HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
BIG = 10 * 1024 * 1024


def table_topology(shape: str = "groupBy", value_serde=S, materialized=None, caching=True):
    b = StreamsBuilder()
    m = materialized or Materialized.as_("t")
    if not caching:
        m = m.withCachingDisabled()
    t = b.table("in", Consumed.with_(S, value_serde), m)
    if shape == "groupBy":
        t.groupBy(lambda k, v: (v, k), Grouped.with_(S, S)).count().toStream().to("out", Produced.with_(S, L))
    elif shape == "filter":
        t.filter(lambda k, v: v != "y").toStream().to("out", Produced.with_(S, value_serde))
    else:
        t.mapValues(lambda v: (v or "") + "!").toStream().to("out", Produced.with_(S, S))
    return b.build()


def arrow_rows(records: list[tuple], first_offset: int) -> pa.Table:
    """The source's columns as ``mapInArrow`` receives them: (key, value, timestamp, partition)."""
    return pa.table({
        "topic": pa.array(["in"] * len(records), pa.string()),
        "partition": pa.array([p for *_, p in records], pa.int32()),
        "offset": pa.array(range(first_offset, first_offset + len(records)), pa.int64()),
        "key": pa.array([k for k, *_ in records], pa.binary()),
        "value": pa.array([v for _, v, *_ in records], pa.binary()),
        "timestamp": pa.array([datetime.fromtimestamp(ts / 1000, tz=timezone.utc) for _, _, ts, _ in records],
                              pa.timestamp("us", tz="UTC")),
        "headers": pa.array([[{"key": "o", "value": b"%d" % (first_offset + i)}] for i in range(len(records))],
                            HEADERS)})


def task_rows(table: pa.Table, partition: int) -> list[dict]:
    """One partition's rows as the task gets them from Spark: the timestamp in epoch milliseconds."""
    rows = [r for r in table.to_pylist() if r["partition"] == partition]
    for r in rows:
        r["timestamp"] = int(r["timestamp"].timestamp() * 1000)
    return rows


# b"\xff" and b"\xfe" both read as "\ufffd" (Kafka's String serde replaces malformed UTF-8)
records = st.lists(st.tuples(st.sampled_from([b"a", b"b", b"\xff", b"\xfe", None]),
                             st.sampled_from([b"x", b"y", b"z", None]), st.integers(-3, 40), st.integers(0, 1)),
                   max_size=40)


@settings(max_examples=200, deadline=None)
@example([(b"\xff", b"x", 1, 0), (b"\xfe", b"y", 2, 0), (b"\xff", None, 3, 0)], [3], "groupBy", 0)
@given(records, st.lists(st.integers(1, 12), min_size=1, max_size=8), st.sampled_from(["groupBy", "filter", "map"]),
       st.integers(0, 2**16))
def test_the_last_record_per_key_leaves_the_state_and_changes_every_record_would(history, cuts, shape, seed):
    topology = table_topology(shape)
    assert combinable(topology.subtopologies[0], (None, None), BIG) is not None
    one = {p: Backings() for p in (0, 1)}
    other = {p: Backings() for p in (0, 1)}
    at, n = 0, 0
    while at < len(history):
        batch = history[at:at + cuts[n % len(cuts)]]
        at, n = at + len(batch), n + 1
        table = arrow_rows(batch, at - len(batch))
        shuffled = table.take(pa.array(random.Random(seed + n).sample(range(len(batch)), len(batch)), pa.int64()))
        kept = latest_table(shuffled)
        assert kept.num_rows <= table.num_rows
        for p in (0, 1):
            if not task_rows(table, p):
                continue
            _, expected, last_expected = run_rows(topology, 0, "app", p, task_rows(table, p), (None, None),
                                                  backing=one[p], cache_bytes=BIG)
            _, got, last_got = run_rows(topology, 0, "app", p, task_rows(kept, p), (None, None),
                                        backing=other[p], cache_bytes=BIG)
            assert got == expected
            assert last_got == last_expected
            assert other[p].state() == one[p].state()


def test_each_key_bytes_keeps_its_last_record_per_partition_and_records_without_a_key_stay():
    rows = [(b"a", b"1", 5, 0), (b"a", b"2", 4, 1), (None, b"3", 3, 0), (b"a", b"4", 2, 0),
            (b"b", None, 1, 0), (None, b"5", 0, 0), (b"b", b"6", 9, 1)]
    kept = latest_table(arrow_rows(rows, 10))
    assert kept.column_names == ["topic", "partition", "offset", "key", "value", "timestamp", "headers"]
    assert [(r["partition"], r["offset"]) for r in kept.to_pylist()] == [(0, 12), (0, 13), (0, 14), (0, 15),
                                                                         (1, 11), (1, 16)]


def test_only_a_cached_unversioned_table_alone_in_its_sub_topology_reads_its_last_records():
    plain = combinable(table_topology().subtopologies[0], (None, None), BIG)
    assert plain is not None and plain.value_serde is None      # a String value cannot fail
    assert combinable(table_topology(value_serde=L).subtopologies[0], (None, None), BIG).value_serde == L
    assert combinable(table_topology().subtopologies[0], (None, None), 0) is None          # no record cache
    assert combinable(table_topology(caching=False).subtopologies[0], (None, None), BIG) is None
    versioned = Materialized.as_(Stores.persistentVersionedKeyValueStore("t", 60_000))
    assert combinable(table_topology(materialized=versioned).subtopologies[0], (None, None), BIG) is None
    assert combinable(table_topology().subtopologies[1], (None, None), BIG) is None        # the aggregation
    # a second store downstream (a materialized filter) sees what the cache forwards too, but is not taken
    b = StreamsBuilder()
    b.table("in", Consumed.with_(S, S)).filter(lambda k, v: True, materialized=Materialized.as_("f"))
    assert combinable(b.build().subtopologies[0], (None, None), BIG) is None
    # a stream–table join reads two topics in one task: their order matters
    b = StreamsBuilder()
    b.stream("s", Consumed.with_(S, S)).join(b.table("in", Consumed.with_(S, S)), lambda l, r: l).to("o")
    assert combinable(b.build().subtopologies[0], (None, None), BIG) is None

"""``suppress(untilWindowCloses)`` after a windowed aggregation that is not its direct parent, as
Kafka's ``GraphGraceSearchUtil.findAndVerifyWindowGrace`` finds it: up every parent (through
stateless and stateful steps, ``toStream().toTable()`` and repartition topics) to the windowed
aggregations, waiting the largest of their close graces; refused when a path reaches a source."""
from __future__ import annotations

import pytest

from streams import Consumed, Grouped, Materialized, Produced, Serdes, StreamsBuilder
from streams.errors import TopologyError
from streams.serdes_windowed import WindowedSerdes
from streams.suppress import BufferConfig, Suppressed
from streams.testing import TopologyTestDriver
from streams.windows import SessionWindows, TimeWindows

pytestmark = pytest.mark.unit
S, L = Serdes.String(), Serdes.Long()
FINAL = Suppressed.untilWindowCloses(BufferConfig.unbounded())


def show(w, v):
    return f"{w.key}@{w.start}/{w.end}", v


def _run(make, inputs, topics=("input",)):
    """``make(builder, stream(s))`` gives a table whose suppression is written to "out"."""
    b = StreamsBuilder()
    streams = [b.stream(t, Consumed.with_(S, S)) for t in topics]
    make(b, *streams).suppress(FINAL).toStream().map(show).to("out", Produced.with_(S, L))
    d = TopologyTestDriver(b.build(), {"application.id": "app"})
    ins = {t: d.createInputTopic(t, S, S) for t in topics}
    out = d.createOutputTopic("out", S, L)
    for topic, k, t in inputs:
        ins[topic].pipeInput(k, "v", t)
    return [(r.key, r.value, r.timestamp) for r in out.readRecordsToList()]


def _counts(stream, windows):
    return stream.groupByKey(Grouped.with_(S, S)).windowedBy(windows).count()


TUMBLING = TimeWindows.ofSizeAndGrace(10, 5)
HISTORY = [("input", "a", 1), ("input", "a", 4), ("input", "b", 12), ("input", "a", 14),
           ("input", "a", 3),      # stream time 14: window [0,10) is open until 15
           ("input", "b", 15),     # closes [0,10)
           ("input", "a", 30)]     # closes [10,20)
EXPECTED = [("a@0/10", 3, 4), ("a@10/20", 1, 14), ("b@10/20", 2, 15)]


def test_direct_suppression_is_the_baseline():
    assert _run(lambda b, s: _counts(s, TUMBLING), HISTORY) == EXPECTED


def test_to_stream_to_table_keeps_the_windows_grace():
    assert _run(lambda b, s: _counts(s, TUMBLING).toStream().toTable(), HISTORY) == EXPECTED


def test_a_filtered_stream_of_a_windowed_table_keeps_the_windows_grace():
    got = _run(lambda b, s: _counts(s, TUMBLING).toStream().filter(lambda w, v: w.key == "a").toTable(), HISTORY)
    assert got == [r for r in EXPECTED if r[0].startswith("a@")]


def test_the_search_passes_a_stateful_step_between_table_and_window():
    """A key-value reduce of the windowed keys (no key change: no repartition): Kafka walks on
    through stateful nodes that are no windowed aggregation."""
    got = _run(lambda b, s: _counts(s, TUMBLING).toStream().groupByKey().reduce(lambda a, v: max(a, v)), HISTORY)
    assert got == EXPECTED


def test_the_search_follows_a_repartition_topic_back_to_its_writer():
    """A key change before ``toTable`` reads the windowed keys back from a repartition topic (in
    Kafka's graph the repartition node is a child of the step before it)."""
    serde = WindowedSerdes.timeWindowedSerdeFrom(S, 10)
    got = _run(lambda b, s: _counts(s, TUMBLING).toStream().selectKey(lambda w, v: w)
               .toTable(Materialized.with_(serde, L)), HISTORY)
    assert got == EXPECTED


def test_session_windows_wait_gap_plus_grace_through_to_table():
    sessions = SessionWindows.ofInactivityGapAndGrace(5, 2)
    history = [("input", "a", 0), ("input", "a", 3),
               ("input", "b", 9),       # stream time 9: a's session [0,3] is open until 3 + 5 + 2
               ("input", "b", 10)]
    make = lambda b, s: _counts(s, sessions).toStream().toTable()     # noqa: E731
    assert _run(make, history[:3]) == []
    assert _run(make, history) == [("a@0/3", 2, 3)]


def test_merged_windowed_streams_wait_the_largest_grace():
    """Kafka: every parent must define a grace; the suppression waits the largest."""
    small, large = TimeWindows.ofSizeAndGrace(10, 0), TimeWindows.ofSizeAndGrace(10, 8)
    history = [("one", "a", 1), ("two", "b", 2), ("one", "a", 12),   # stream time 12: closed for grace 0 only
               ("two", "b", 18)]                                      # 10 + 8: both closed
    got = _run(lambda b, one, two: _counts(one, small).toStream().merge(_counts(two, large).toStream()).toTable(),
               history, ("one", "two"))
    assert got == [("a@0/10", 1, 1), ("b@0/10", 1, 2)]
    got = _run(lambda b, one, two: _counts(one, small).toStream().merge(_counts(two, large).toStream()).toTable(),
               history[:3], ("one", "two"))
    assert got == []


def test_a_diamond_back_to_one_window_waits_its_grace():
    def make(b, s):
        windowed = _counts(s, TUMBLING).toStream()
        return windowed.filter(lambda w, v: w.key == "a").merge(windowed.filterNot(lambda w, v: w.key == "a")).toTable()
    assert _run(make, HISTORY) == EXPECTED


def test_a_path_without_a_window_is_refused_with_kafka_s_message():
    b = StreamsBuilder()
    windowed = _counts(b.stream("one", Consumed.with_(S, S)), TUMBLING).toStream()
    plain = b.stream("two", Consumed.with_(S, S)).mapValues(lambda v: 0)
    table = windowed.merge(plain).toTable()
    with pytest.raises(TopologyError, match=r"^Window close time is only defined for windowed computations\. "
                                            r"Got \[root->KSTREAM-SOURCE-\d+->KSTREAM-MAPVALUES-\d+->"
                                            r"KSTREAM-MERGE-\d+->KSTREAM-TOTABLE-\d+\]\.$"):
        table.suppress(FINAL)


def test_a_plain_table_is_refused_naming_its_chain_from_the_root():
    b = StreamsBuilder()
    table = b.stream("input", Consumed.with_(S, S)).toTable()
    with pytest.raises(TopologyError, match=r"^Window close time is only defined for windowed computations\. "
                                            r"Got \[root->KSTREAM-SOURCE-0000000000->KSTREAM-TOTABLE-0000000001\]\.$"):
        table.suppress(FINAL)


def test_a_store_keyed_by_windowed_keys_round_trips_through_the_state_codec():
    """On Spark a store's keys become state-codec bytes (its MapState and changelog): the table
    of a windowed stream keys its store by windowed keys, also with a struct (dict) key inside."""
    from streams.record import Windowed
    from streams.state_codec import decode_key, encode_key
    from streams.stores import DictBacking, KeyValueStore
    store = KeyValueStore("t", DictBacking())
    key = Windowed({"user": "ann", "n": 1}, 0, 10)
    store.put(key, 3)
    assert store.get(Windowed({"n": 1, "user": "ann"}, 0, 10)) == 3
    assert store.all() == [(key, 3)]
    (backing_key, _), = store.backing.items()
    assert decode_key(encode_key(backing_key)) == backing_key
    assert encode_key(Windowed("a", 0, 10)) != encode_key(Windowed("a", 0, 11))


@pytest.mark.parametrize("key, data", [
    (("k", "EUR"), b'{"$t":["k","EUR"]}'),
    (("b", ("W", "a", 0, 10)), b'{"$t":["b",{"$t":["W","a",0,10]}]}'),    # a suppress buffer's entry key
    ({"user": "ann", "n": [1, 2.5]}, b'{"$d":[["n",[1,2.5]],["user","ann"]]}'),
    (b"\x00\xff", b'{"$b":"AP8="}'),
    (float("inf"), b'{"$f":"inf"}'),
    ("\u00e9", b'"\xc3\xa9"'),
])
def test_keys_that_are_not_windowed_keep_their_state_bytes(key, data):
    """State and changelogs written before windowed keys had a tag read back the same: every
    other key encodes to the bytes it always had."""
    from streams.state_codec import decode_key, encode_key
    assert encode_key(key) == data
    assert decode_key(data) == key


def test_a_windowed_table_joins_a_table_of_its_stream_and_the_join_is_suppressed_to_its_grace():
    """Kafka keys both tables by ``Windowed``, so it joins them; the suppression after the join
    finds the windows up either side."""
    def joined(b, s):
        counts = _counts(s, TUMBLING)
        doubled = counts.toStream().mapValues(lambda v: 2 * v).toTable()
        return counts.join(doubled, lambda c, d: c + d)
    assert _run(joined, HISTORY) == [(k, 3 * v, t) for k, v, t in EXPECTED]


def test_a_windowed_table_does_not_join_a_table_of_plain_keys():
    b = StreamsBuilder()
    s = b.stream("input", Consumed.with_(S, S))
    plain = b.table("plain", Consumed.with_(S, L))
    with pytest.raises(TopologyError, match="a windowed table joins another windowed table"):
        _counts(s, TUMBLING).join(plain, lambda c, d: c + d)

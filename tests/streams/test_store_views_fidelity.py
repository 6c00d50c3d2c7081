"""The test driver's store views as Kafka's: key order by the key serde's bytes (compared unsigned,
as ``Bytes.BYTES_LEXICO_COMPARATOR``), ``all()`` in that order, an inverted range empty with
Kafka's warning, typed getters answering None for another store type, versioned stores read as of
a time, timestamped window stores; and a window store recording its size for readers without the
topology."""
from __future__ import annotations

import logging

import pytest

from streams.builder import StreamsBuilder
from streams.interactive import window_size
from streams.parameters import Consumed, Materialized
from streams.record import Windowed
from streams.serdes import Serdes
from streams.stores import DictBacking, StoreSpec
from streams.testing import ReadOnlyStore, TopologyTestDriver
from streams.versioned import Stores, VersionedRecord
from streams.windows import SessionWindows, TimeWindows

pytestmark = pytest.mark.unit

S, L = Serdes.String(), Serdes.Long()


def _table(key_serde, keys):
    b = StreamsBuilder()
    b.stream("in", Consumed.with_(key_serde, S)).toTable(materialized=Materialized.as_("kv"))
    d = TopologyTestDriver(b.build(), {"application.id": "iq"})
    t = d.createInputTopic("in", key_serde, S)
    for i, k in enumerate(keys):
        t.pipeInput(k, f"v{k}", i)
    return d


def test_all_is_in_key_order_and_reverse_all_is_its_reverse():
    """ReadOnlyKeyValueStore.all() iterates in key order (it gave insertion order while
    reverseAll() was sorted, so reverseAll() was not all() reversed)."""
    store = _table(S, ["c", "a", "b"]).getKeyValueStore("kv")
    assert [k for k, _ in store.all()] == ["a", "b", "c"]
    assert store.reverseAll() == store.all()[::-1]


def test_long_keys_are_ordered_by_their_big_endian_bytes_so_negatives_follow_positives():
    """Kafka's LongSerializer writes big-endian two's complement and stores compare the bytes
    unsigned: -1 (0xff...) orders after 5; a range whose FROM orders after its TO is empty, with
    the warning Kafka's CachingKeyValueStore.range logs."""
    store = _table(L, [5, -1, 0, 3, -5, 1]).getKeyValueStore("kv")
    assert [k for k, _ in store.all()] == [0, 1, 3, 5, -5, -1]
    assert [k for k, _ in store.range(0, -1)] == [0, 1, 3, 5, -5, -1]
    assert [k for k, _ in store.range(3, -5)] == [3, 5, -5]
    assert [k for k, _ in store.reverseAll()] == [-1, -5, 5, 3, 1, 0]


def test_an_inverted_range_is_empty_with_kafkas_warning(caplog):
    store = _table(L, [5, -1, 0]).getKeyValueStore("kv")
    with caplog.at_level(logging.WARNING, logger="streams.testing"):
        assert store.range(-5, 5) == []        # -5's bytes order after 5's
        assert store.reverseRange(3, 1) == []
    assert [r.getMessage() for r in caplog.records] == [
        "Returning empty iterator for fetch with invalid key range: from > to. This may be due to range arguments "
        "set in the wrong order, or serdes that don't preserve ordering when lexicographically comparing the "
        "serialized bytes. Note that the built-in numerical serdes do not follow this for negative numbers"] * 2


def test_string_keys_are_ordered_by_their_utf8_bytes():
    """UTF-8 bytes order code points, so an astral character follows U+FFFF, as in Kafka's stores."""
    store = _table(S, ["b", "\U0001F600", "\uffff", "é", "Z"]).getKeyValueStore("kv")
    assert [k for k, _ in store.all()] == ["Z", "b", "é", "\uffff", "\U0001F600"]


def test_without_a_key_serde_keys_are_ordered_by_value():
    """``riverlog streams query`` knows no serde: numbers by value, before strings."""
    kv = StoreSpec("kv", "keyValue").open(DictBacking())
    for k in [5, -1, "a", 0]:
        kv.put(k, (f"v{k}", 0))
    assert [k for k, _ in ReadOnlyStore("kv", [kv]).all()] == [-1, 0, 5, "a"]


def test_window_key_range_fetch_orders_keys_by_serde_bytes_across_tasks():
    b = StreamsBuilder()
    b.stream("in", Consumed.with_(L, S)).groupByKey().windowedBy(TimeWindows.ofSizeAndGrace(10, 1000)).count(
        materialized=Materialized.as_("w"))
    d = TopologyTestDriver(b.build(), {"application.id": "iq"}, partitions={"in": 3})
    t = d.createInputTopic("in", L, S)
    for k, ts in [(-1, 1), (2, 1), (1, 15), (-1, 12), (7, 3)]:
        t.pipeInput(k, "x", ts)
    w = d.getWindowStore("w")
    assert [(x.key, x.start) for x, _ in w.fetch(1, -1, 0, 100)] == [(1, 10), (2, 0), (7, 0), (-1, 0), (-1, 10)]
    assert [(x.key, x.start) for x, _ in w.all()] == [(2, 0), (7, 0), (-1, 0), (1, 10), (-1, 10)]
    assert [(x.start, x.end) for x, _ in w.fetchAll(0, 5)] == [(0, 10)] * 3


def test_typed_getters_answer_none_for_an_unknown_store_or_one_of_another_type():
    """TopologyTestDriver.getKeyValueStore & co. return null, not throw, for a store of another
    type or none; a versioned store is no KeyValueStore."""
    b = StreamsBuilder()
    s = b.stream("in", Consumed.with_(S, S))
    s.toTable(materialized=Materialized.as_("kv"))
    s.groupByKey().windowedBy(TimeWindows.ofSizeAndGrace(10, 0)).count(materialized=Materialized.as_("w"))
    s.groupByKey().windowedBy(SessionWindows.ofInactivityGapAndGrace(5, 0)).count(materialized=Materialized.as_("s"))
    b.table("prices", Consumed.with_(S, S), Materialized.as_(Stores.persistentVersionedKeyValueStore("vp", 100)))
    d = TopologyTestDriver(b.build(), {"application.id": "iq"})
    getters = {"kv": d.getKeyValueStore, "tkv": d.getTimestampedKeyValueStore, "w": d.getWindowStore,
               "tw": d.getTimestampedWindowStore, "s": d.getSessionStore, "v": d.getVersionedKeyValueStore}
    fits = {"kv": {"kv", "tkv"}, "w": {"w", "tw"}, "s": {"s"}, "vp": {"v"}, "nope": set()}
    for store, wanted in fits.items():
        for getter, get in getters.items():
            assert (get(store) is not None) == (getter in wanted), (store, getter)
    assert d.getStateStore("nope") is None
    assert set(d.getAllStateStores()) == {"kv", "w", "s", "vp"}


def test_a_timestamped_window_store_gives_value_and_timestamp():
    b = StreamsBuilder()
    b.stream("in", Consumed.with_(S, S)).groupByKey().windowedBy(TimeWindows.ofSizeAndGrace(10, 1000)).count(
        materialized=Materialized.as_("w"))
    d = TopologyTestDriver(b.build(), {"application.id": "iq"})
    t = d.createInputTopic("in", S, S)
    t.pipeInput("a", "x", 3)
    t.pipeInput("a", "x", 7)
    stamped = d.getTimestampedWindowStore("w").fetch("a", 0)
    assert (stamped.value, stamped.timestamp) == (2, 7)
    assert d.getWindowStore("w").fetch("a", 0) == 2


def test_a_versioned_store_is_read_as_of_a_time_with_valid_to():
    """VersionedKeyValueStore.get(key, asOfTimestamp): the version valid then, its validTo the
    next version's timestamp (a tombstone's too); nothing before the first version, during a
    tombstone, or older than the history retention (the latest version never expires)."""
    b = StreamsBuilder()
    b.table("prices", Consumed.with_(S, S), Materialized.as_(Stores.persistentVersionedKeyValueStore("vp", 100)))
    d = TopologyTestDriver(b.build(), {"application.id": "iq"})
    t = d.createInputTopic("prices", S, S)
    for value, ts in [("v10", 10), ("v20", 20), (None, 30), ("v40", 40)]:
        t.pipeInput("a", value, ts)
    store = d.getVersionedKeyValueStore("vp")
    assert store.get("a") == VersionedRecord("v40", 40, None)
    assert store.get("a", 9) is None
    assert store.get("a", 19) == VersionedRecord("v10", 10, 20)
    assert store.get("a", 20) == VersionedRecord("v20", 20, 30)
    assert store.get("a", 35) is None
    assert store.get("a", 1000) == VersionedRecord("v40", 40, None)
    t.pipeInput("b", "b", 200)                    # stream time 200: the history reaches back to 100
    assert store.get("a", 25) is None
    assert store.get("a", 150) == VersionedRecord("v40", 40, None)
    with pytest.raises(ValueError, match="key cannot be null"):
        store.get(None)


def test_a_window_store_records_its_size_for_readers_without_the_topology():
    """A changelog reader that knows no window size (``riverlog streams query``) gets it from
    the store's own entry, so a window ends at start + size, not at its start."""
    b = StreamsBuilder()
    b.stream("in", Consumed.with_(S, S)).groupByKey().windowedBy(TimeWindows.ofSizeAndGrace(10, 1000)).count(
        materialized=Materialized.as_("w"))
    d = TopologyTestDriver(b.build(), {"application.id": "iq"})
    t = d.createInputTopic("in", S, S)
    t.pipeInput("a", "x", 3)
    t.pipeInput("b", "x", 14)
    replayed = DictBacking()
    for key, value in d._interp.stores("w")[0].backing.changes:     # the changelog, replayed
        replayed.put(key, value) if value is not None else replayed.delete(key)
    assert window_size([replayed]) == 10
    reader = StoreSpec("w", "window", retention=2 ** 62).open(replayed)
    assert [w for w, _ in reader.all()] == [Windowed("a", 0, 10), Windowed("b", 10, 20)]
    assert window_size([DictBacking()]) is None

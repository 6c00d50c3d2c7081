"""``Materialized.as_(Stores....)`` as Kafka's RangeQueryIntegrationTest and
KStreamAggregationIntegrationTest give a store: in-memory, persistent and timestamped key-value
suppliers, window and session suppliers whose retention the store keeps, and the checks of Kafka's
``Stores`` factories. Through ``TopologyTestDriver``."""
from __future__ import annotations

import pytest

from streams import Materialized, SessionWindows, Stores, StreamsBuilder, TimeWindows
from streams.errors import TopologyError
from streams.parameters import Consumed
from streams.serdes import Serdes
from streams.testing import TopologyTestDriver

pytestmark = pytest.mark.unit
S = Serdes.String()
KEYS = [f"key-{2 * i}" for i in range(5)]


@pytest.mark.parametrize("supplier", [Stores.inMemoryKeyValueStore, Stores.persistentKeyValueStore,
                                      Stores.persistentTimestampedKeyValueStore])
@pytest.mark.parametrize("caching", [True, False])
def test_a_table_materialized_by_a_key_value_supplier_is_queried_by_its_name(supplier, caching):
    """RangeQueryIntegrationTest.testStoreConfig: ``builder.table(input, Materialized.as(supplier))``
    for each supplier and caching on or off; the store answers by the supplier's name."""
    m = Materialized.as_(supplier("mytable")).withKeySerde(S).withValueSerde(S)
    m = m.withCachingEnabled() if caching else m.withCachingDisabled()
    b = StreamsBuilder()
    table = b.table("input", Consumed.with_(S, S), m)
    assert table.queryableStoreName() == "mytable"
    with TopologyTestDriver(b.build(), {"application.id": "range"}) as d:
        topic = d.createInputTopic("input", S, S)
        for k in reversed(KEYS):
            topic.pipeInput(k, k.replace("key", "val"), 0)
        store = d.getKeyValueStore("mytable")
        assert store.range(None, None) == [(k, k.replace("key", "val")) for k in KEYS]
        assert store.reverseRange("key-1", "key-7") == [("key-6", "val-6"), ("key-4", "val-4"), ("key-2", "val-2")]


def _windowed_count(materialized, times):
    b = StreamsBuilder()
    (b.stream("input", Consumed.with_(S, S)).groupByKey()
     .windowedBy(TimeWindows.ofSizeWithNoGrace(10)).count(materialized))
    with TopologyTestDriver(b.build(), {"application.id": "windows"}) as d:
        topic = d.createInputTopic("input", S, S)
        for key, ts in times:
            topic.pipeInput(key, "v", ts)
        return d.getWindowStore("per-window").fetchAll(0, 1000)


def test_a_window_supplier_names_the_store_and_gives_its_retention():
    """A window of ``a`` that the windows' own retention (size + grace = 10) has dropped is still
    read through a supplier that keeps 100 ms, as Kafka's store built from the supplier keeps it."""
    times = [("a", 0), ("b", 50)]
    plain = _windowed_count(Materialized.as_("per-window"), times)
    assert [(w.key, w.start, c) for w, c in plain] == [("b", 50, 1)]
    kept = _windowed_count(Materialized.as_(Stores.persistentWindowStore("per-window", 100, 10, False)), times)
    assert [(w.key, w.start, w.end, c) for w, c in kept] == [("a", 0, 10, 1), ("b", 50, 60, 1)]
    in_memory = _windowed_count(Materialized.as_(Stores.inMemoryWindowStore("per-window", 100, 10, False)), times)
    assert in_memory == kept


def test_a_session_supplier_materializes_a_session_aggregation():
    """KStreamAggregationIntegrationTest.shouldReduceSessionWindows, with the store given by a
    session supplier: ``fetch(key)`` reads the key's sessions by the supplier's name."""
    b = StreamsBuilder()
    (b.stream("input", Consumed.with_(S, S)).groupByKey()
     .windowedBy(SessionWindows.ofInactivityGapAndGrace(1000, 60_000))
     .reduce(lambda a, v: f"{a}:{v}", Materialized.as_(Stores.persistentSessionStore("UserSessionsStore", 61_000))))
    with TopologyTestDriver(b.build(), {"application.id": "sessions"}) as d:
        topic = d.createInputTopic("input", S, S)
        for key, value, ts in [("bob", "start", 0), ("bob", "pause", 1001), ("bob", "resume", 1501)]:
            topic.pipeInput(key, value, ts)
        assert [(w.start, w.end, v) for w, v in d.getSessionStore("UserSessionsStore").fetch("bob")] == [
            (0, 0, "start"), (1001, 1501, "pause:resume")]


def test_a_supplier_of_another_kind_is_refused_when_the_topology_is_defined():
    b = StreamsBuilder()
    grouped = b.stream("input", Consumed.with_(S, S)).groupByKey()
    with pytest.raises(TopologyError, match="window store supplier"):
        grouped.count(Materialized.as_(Stores.inMemoryWindowStore("w", 100, 10, False)))
    with pytest.raises(TopologyError, match="keyValue store supplier"):
        grouped.windowedBy(TimeWindows.ofSizeWithNoGrace(10)).count(Materialized.as_(Stores.inMemoryKeyValueStore("k")))
    with pytest.raises(TopologyError, match="session store supplier"):
        b.table("t", Consumed.with_(S, S), Materialized.as_(Stores.inMemorySessionStore("s", 100)))


def test_the_factories_check_what_kafkas_check():
    with pytest.raises(TopologyError, match="name cannot be null"):
        Stores.inMemoryKeyValueStore(None)
    with pytest.raises(TopologyError, match="retentionPeriod cannot be negative"):
        Stores.persistentSessionStore("s", -1)
    with pytest.raises(TopologyError, match=r"must be no smaller than its window size. Got size=\[20\], "
                                            r"retention=\[10\]"):
        Stores.persistentWindowStore("w", 10, 20, False)
    with pytest.raises(TopologyError, match="retainDuplicates"):
        Stores.inMemoryWindowStore("w", 100, 10, True)
    assert Stores.persistentWindowStore("w", "1 minute", 10, False).retentionPeriod == 60_000

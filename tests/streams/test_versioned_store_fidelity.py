"""The versioned store against Kafka's ``RocksDBVersionedStoreTest`` (what ``put`` answers — the
new version's ``validTo`` — and what ``get(key, asOf)`` finds among values, tombstones and
repeated timestamps), ``StoresTest`` (the supplier's argument checks) and ``KTableSource`` over a
versioned store (what the table forwards)."""
from __future__ import annotations

import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams import Consumed, Materialized, Produced, Stores, StreamsBuilder, TopologyError
from streams.stores import DictBacking, KeyValueStore
from streams.testing import TopologyTestDriver
from streams.versioned import PUT_RETURN_CODE_IS_LATEST, PUT_RETURN_CODE_NOT_PUT, VersionedKeyValueStore, VersionedRecord
from tests.streams.join_kit import S

pytestmark = pytest.mark.unit

U = PUT_RETURN_CODE_IS_LATEST     # Kafka's PUT_RETURN_CODE_VALID_TO_UNDEFINED
SEG, HISTORY, BASE = 100_000, 300_000, 100 * 100_000     # RocksDBVersionedStoreTest's constants


def _store(history=HISTORY) -> VersionedKeyValueStore:
    return VersionedKeyValueStore(KeyValueStore("v", DictBacking()), history)


def _puts(store, steps) -> list:
    return [store.put(k, v, ts) for k, v, ts, _ in steps], [want for *_, want in steps]


def test_put_answers_valid_to_of_the_new_version():
    """shouldPutOlderWithNonNullLatest and shouldPutNonLatestTombstoneIntoNewSegmentWithValidTo."""
    store = _store()
    got, want = _puts(store, [("k", "v", BASE, U), ("k", "v2", BASE - 2, BASE), ("k", "v1", BASE - 1, BASE),
                              ("k", "v4", BASE - 4, BASE - 2)])
    assert got == want
    assert store.get_record("k", BASE - 3) == VersionedRecord("v4", BASE - 4, BASE - 2)
    assert store.get_record("k", BASE - 1) == VersionedRecord("v1", BASE - 1, BASE)
    store = _store()
    got, want = _puts(store, [("k", "vp30", SEG + 30, U), ("k", None, SEG - 10, SEG + 30),
                              ("k", "vn5", SEG - 5, SEG + 30), ("k", "vn1", SEG - 1, SEG + 30),
                              ("k", None, SEG - 2, SEG - 1)])
    assert got == want
    assert store.get_record("k", SEG + 10) == VersionedRecord("vn1", SEG - 1, SEG + 30)
    assert store.get_record("k", SEG - 2) is None
    assert store.get_record("k", SEG - 5) == VersionedRecord("vn5", SEG - 5, SEG - 2)
    assert store.get_record("k", SEG - 10) is None


def test_repeated_timestamps_replace_values_and_tombstones():
    """shouldPutRepeatTimestamps: a put at an existing version's timestamp replaces it."""
    store = _store()
    got, want = _puts(store, [
        ("k", "x", SEG + 20, U), ("k", None, SEG - 10, SEG + 20), ("k", "x", SEG - 10, SEG + 20),
        ("k", None, SEG - 10, SEG + 20), ("k", "x", SEG - 1, SEG + 20), ("k", "x", SEG + 1, SEG + 20),
        ("k", None, SEG - 1, SEG + 1), ("k", None, SEG + 1, SEG + 20), ("k", None, SEG + 10, SEG + 20),
        ("k", None, SEG + 5, SEG + 10), ("k", "vp5", SEG + 5, SEG + 10), ("k", "x", SEG - 5, SEG - 1),
        ("k", "vn5", SEG - 5, SEG - 1), ("k", None, SEG + 20, U), ("k", None, SEG + 20, U),
        ("k", "vn6", SEG - 6, SEG - 5)])
    assert got == want
    assert store.get("k") is None
    found = {t: store.get_record("k", t) for t in (SEG + 30, SEG + 15, SEG + 6, SEG + 2, SEG, SEG - 1, SEG - 5,
                                                     SEG - 6, SEG - 8)}
    assert found == {SEG + 30: None, SEG + 15: None, SEG + 6: VersionedRecord("vp5", SEG + 5, SEG + 10),
                     SEG + 2: None, SEG: None, SEG - 1: None, SEG - 5: VersionedRecord("vn5", SEG - 5, SEG - 1),
                     SEG - 6: VersionedRecord("vn6", SEG - 6, SEG - 5), SEG - 8: None}


def test_a_put_older_than_the_history_is_not_put():
    """shouldNotPutExpired: the grace period is the history retention, its bound inclusive."""
    store = _store()
    assert store.put("k", "v", HISTORY + 10) == U
    assert store.put("k1", "v1", 10) == U
    assert store.put("k2", "v2", 9) == PUT_RETURN_CODE_NOT_PUT
    assert store.get("k1").value == "v1" and store.get("k2") is None


def test_the_supplier_checks_its_arguments_as_kafkas_stores_do():
    """StoresTest.shouldThrowIfPersistentVersionedKeyValueStore*."""
    for args, message in [((None, 0), "name cannot be null"), (("s", -1), "historyRetention cannot be negative"),
                          (("s", 0, 0), "segmentInterval cannot be zero or negative"),
                          (("s", 0, -1), "segmentInterval cannot be zero or negative")]:
        with pytest.raises(TopologyError, match=message):
            Stores.persistentVersionedKeyValueStore(*args)
    assert Stores.persistentVersionedKeyValueStore("s", 0, 1).historyRetentionMs == 0


def _table_to_stream():
    b = StreamsBuilder()
    b.table("t", Consumed.with_(S, S), Materialized.as_(Stores.persistentVersionedKeyValueStore("v", 10))) \
        .toStream().to("out", Produced.with_(S, S))
    d = TopologyTestDriver(b.build(), {"application.id": "v"})
    return d, d.createInputTopic("t", S, S), d.createOutputTopic("out", S, S)


def test_a_versioned_table_forwards_out_of_order_updates_but_not_expired_ones(caplog):
    """KTableSource: a put into history is forwarded (marked not latest, which only table joins
    and re-groupings read); a put the store refused is not forwarded, and is logged."""
    d, t, out = _table_to_stream()
    t.pipeInput("k", "new", 100)
    t.pipeInput("k", "older", 95)                 # into history: toStream still sees it
    with caplog.at_level(logging.WARNING, logger="streams.versioned"):
        t.pipeInput("k", "expired", 89)           # older than 100 - 10
        t.pipeInput(None, "no key", 101)
    assert [(r.value, r.timestamp) for r in out.readRecordsToList()] == [("new", 100), ("older", 95)]
    assert "Skipping record for expired put." in caplog.text
    assert "Skipping record due to null key." in caplog.text
    assert d.getVersionedKeyValueStore("v").get("k", 96) == VersionedRecord("older", 95, 100)


# ---------------------------------------------------------------------- oracle
class _KafkaModel:
    """RocksDBVersionedStore's rules with every version kept: the oracle the pruning store must
    answer like."""

    def __init__(self, history: int):
        self.history, self.observed, self.versions = history, -1, {}

    def put(self, key, value, ts):
        if ts < self.observed - self.history:
            return PUT_RETURN_CODE_NOT_PUT
        self.observed = max(self.observed, ts)
        self.versions.setdefault(key, {})[ts] = value
        later = [t for t in self.versions[key] if t > ts]
        return min(later) if later else U

    def get(self, key, as_of):
        times = sorted(self.versions.get(key, {}))
        if times and self.versions[key][times[-1]] is not None and times[-1] <= as_of:
            return VersionedRecord(self.versions[key][times[-1]], times[-1], None)
        if as_of < self.observed - self.history:
            return None
        before = [t for t in times if t <= as_of]
        if not before or self.versions[key][before[-1]] is None:
            return None
        later = [t for t in times if t > before[-1]]
        return VersionedRecord(self.versions[key][before[-1]], before[-1], min(later) if later else None)


_step = st.tuples(st.sampled_from("abc"), st.sampled_from([None, "x", "y"]), st.integers(0, 400))


@settings(max_examples=150, deadline=None)
@given(history=st.sampled_from([0, 7, 64, 150]), steps=st.lists(_step, max_size=60))
def test_the_store_answers_as_kafkas_rules_whatever_it_prunes(history, steps):
    store, model = _store(history), _KafkaModel(history)
    for key, value, ts in steps:
        assert store.put(key, value, ts) == model.put(key, value, ts)
        for k in "abc":
            for as_of in range(max(0, ts - 2 * history - 3), ts + 3):
                assert store.get_record(k, as_of) == model.get(k, as_of), (k, as_of)


def test_a_deleted_key_leaves_nothing_once_its_tombstone_is_older_than_the_history():
    """Kafka drops a segment once stream time passes it by the history; a key deleted long ago
    keeps no versions, so a table whose keys come and go does not grow without bound."""
    backing = DictBacking()
    store = VersionedKeyValueStore(KeyValueStore("v", backing), 100)
    for i in range(50):
        store.put(f"gone-{i}", "v", 10 * i)
        store.put(f"gone-{i}", None, 10 * i + 5)
    store.put("live", "v", 2_000)
    assert {k[1] for k in backing.data if k[0] == "v"} == {"live"}
    assert not [k for k in backing.data if k[0] == "d"] and ("o", "expiry") not in backing.data
    assert store.get("gone-3", 1_950) is None and store.put("gone-3", "back", 1_950) == U

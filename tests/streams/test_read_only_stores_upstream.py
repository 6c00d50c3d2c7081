"""Scenario tables of Kafka's store tests (RocksDBVersionedStoreTest, AbstractKeyValueStoreTest,
AbstractWindowBytesStoreTest, AbstractSessionBytesStoreTest) run against the read-only views
interactive queries and the test driver answer with, over stores rebuilt from changelog records
made in memory: the pure path ``app.store()`` takes after reading the changelog."""
from __future__ import annotations

import logging

import pytest

from streams.interactive import apply_changelog_record
from streams.read_only_stores import ReadOnlyStore, ReadOnlyVersionedStore
from streams.record import Windowed
from streams.serdes import Serdes
from streams.state_codec import encode_key, encode_value
from streams.stores import DictBacking, StoreSpec
from streams.versioned import (PUT_RETURN_CODE_NOT_PUT, PUT_RETURN_CODE_VALID_TO_UNDEFINED, VersionedKeyValueStore,
                               VersionedRecord)

pytestmark = pytest.mark.unit

S, L = Serdes.String(), Serdes.Long()
HISTORY = 300_000
SEG = HISTORY // 3
BASE = 10
UNDEF = PUT_RETURN_CODE_VALID_TO_UNDEFINED


def _replayed(writer: DictBacking) -> DictBacking:
    """The backing a query rebuilds from ``writer``'s changelog records (keys and values in the
    state codec, a delete as a tombstone)."""
    restored = DictBacking()
    for key, value in writer.changes:
        apply_changelog_record(restored, encode_key(key), None if value is None else encode_value(value))
    return restored


# --------------------------------------------------------------- versioned (RocksDBVersionedStoreTest)

def _versioned(puts):
    writer = StoreSpec("v", "keyValue").open(DictBacking())
    store = VersionedKeyValueStore(writer, HISTORY)
    for key, value, ts, code in puts:
        assert store.put(key, value, ts) == code, (key, value, ts)
    return ReadOnlyVersionedStore("v", [StoreSpec("v", "keyValue").open(_replayed(writer.backing))], HISTORY)


VERSIONED = {
    "shouldPutLatest": (
        [("k", "v", BASE, UNDEF), ("k", "v2", BASE + 1, UNDEF)],
        [(None, ("v2", BASE + 1, None)), (BASE, ("v", BASE, BASE + 1)), (BASE + 1, ("v2", BASE + 1, None)),
         (BASE + 2, ("v2", BASE + 1, None))]),
    "shouldPutNullAsLatest": (
        [("k", None, BASE, UNDEF), ("k", None, BASE + 1, UNDEF)],
        [(None, None), (BASE, None), (BASE + 1, None), (BASE + 2, None)]),
    "shouldPutOlderWithNonNullLatest": (
        [("k", "v", BASE, UNDEF), ("k", "v2", BASE - 2, BASE), ("k", "v1", BASE - 1, BASE),
         ("k", "v4", BASE - 4, BASE - 2)],
        [(None, ("v", BASE, None)), (BASE, ("v", BASE, None)), (BASE - 1, ("v1", BASE - 1, BASE)),
         (BASE - 2, ("v2", BASE - 2, BASE - 1)), (BASE - 3, ("v4", BASE - 4, BASE - 2))]),
    "shouldPutOlderWithNullLatest": (
        [("k", None, BASE, UNDEF), ("k", "v2", BASE - 2, BASE), ("k", "v1", BASE - 1, BASE),
         ("k", "v4", BASE - 4, BASE - 2)],
        [(None, None), (BASE, None), (BASE - 1, ("v1", BASE - 1, BASE)), (BASE - 2, ("v2", BASE - 2, BASE - 1)),
         (BASE - 3, ("v4", BASE - 4, BASE - 2))]),
    "shouldPutOlderNullWithNonNullLatest": (
        [("k", "v", BASE, UNDEF), ("k", None, BASE - 2, BASE), ("k", None, BASE - 1, BASE),
         ("k", None, BASE - 4, BASE - 2), ("k", "v5", BASE - 5, BASE - 4), ("k", "v3", BASE - 3, BASE - 2),
         ("k", None, BASE - 6, BASE - 5)],
        [(None, ("v", BASE, None)), (BASE, ("v", BASE, None)), (BASE - 1, None), (BASE - 2, None),
         (BASE - 3, ("v3", BASE - 3, BASE - 2)), (BASE - 4, None), (BASE - 5, ("v5", BASE - 5, BASE - 4)),
         (BASE - 6, None)]),
    "shouldPutRepeatTimestamps": (
        [("k", "x", SEG + 20, UNDEF), ("k", None, SEG - 10, SEG + 20), ("k", "x", SEG - 10, SEG + 20),
         ("k", None, SEG - 10, SEG + 20), ("k", "x", SEG - 1, SEG + 20), ("k", "x", SEG + 1, SEG + 20),
         ("k", None, SEG - 1, SEG + 1), ("k", None, SEG + 1, SEG + 20), ("k", None, SEG + 10, SEG + 20),
         ("k", None, SEG + 5, SEG + 10), ("k", "vp5", SEG + 5, SEG + 10), ("k", "x", SEG - 5, SEG - 1),
         ("k", "vn5", SEG - 5, SEG - 1), ("k", None, SEG + 20, UNDEF), ("k", None, SEG + 20, UNDEF),
         ("k", "vn6", SEG - 6, SEG - 5)],
        [(None, None), (SEG + 30, None), (SEG + 15, None), (SEG + 6, ("vp5", SEG + 5, SEG + 10)), (SEG + 2, None),
         (SEG, None), (SEG - 1, None), (SEG - 5, ("vn5", SEG - 5, SEG - 1)), (SEG - 6, ("vn6", SEG - 6, SEG - 5)),
         (SEG - 8, None)]),
    "shouldPutNonLatestTombstoneIntoNewSegmentWithValidTo": (
        [("k", "vp30", SEG + 30, UNDEF), ("k", None, SEG - 10, SEG + 30), ("k", "vn5", SEG - 5, SEG + 30),
         ("k", "vn1", SEG - 1, SEG + 30), ("k", None, SEG - 2, SEG - 1)],
        [(None, ("vp30", SEG + 30, None)), (SEG + 10, ("vn1", SEG - 1, SEG + 30)),
         (SEG - 1, ("vn1", SEG - 1, SEG + 30)), (SEG - 2, None), (SEG - 5, ("vn5", SEG - 5, SEG - 2)),
         (SEG - 10, None)]),
    "shouldNotGetExpired": (
        [("k", "v_old", 0, UNDEF), ("k", "v", SEG - 10, UNDEF), ("ko", "vo", HISTORY + SEG - 11, UNDEF),
         ("ko", "vo2", HISTORY + SEG - 10, UNDEF)],
        [(SEG - 11, None), (SEG - 10, ("v", SEG - 10, None))]),
    "shouldGetExpiredIfLatestValue": (
        [("k", "v", 1, UNDEF), ("ko", "vo_old", 1, UNDEF), ("ko", "vo_new", HISTORY + 12, UNDEF)],
        [(10, ("v", 1, None))]),
    "shouldNotPutExpired": (
        [("k", "v", HISTORY + 10, UNDEF), ("k1", "v1", 10, UNDEF), ("k2", "v2", 9, PUT_RETURN_CODE_NOT_PUT)],
        []),
}


@pytest.mark.parametrize("case", sorted(VERSIONED))
def test_versioned_scenarios_of_kafkas_rocksdb_versioned_store_test(case):
    puts, gets = VERSIONED[case]
    view = _versioned(puts)
    for as_of, expected in gets:
        assert view.get("k", as_of) == (None if expected is None else VersionedRecord(*expected)), (case, as_of)
    if case == "shouldGetExpiredIfLatestValue":
        assert view.get("ko", 10) is None             # expired, and the latest is later than 10
    if case == "shouldNotPutExpired":
        assert view.get("k1") == VersionedRecord("v1", 10, None)
        assert view.get("k2") is None


def test_an_expired_versioned_get_logs_kafkas_warning(caplog):
    """RocksDBVersionedStore.get: an asOfTimestamp older than stream time - history retention
    answers null with "Returning null for expired get." (only when the latest version does not
    satisfy it)."""
    view = _versioned([("k", "v_old", 0, UNDEF), ("k", "v", 5, UNDEF), ("ko", "vo", HISTORY + 10, UNDEF)])
    with caplog.at_level(logging.WARNING):
        assert view.get("k", 6) == VersionedRecord("v", 5, None)
        assert "expired get" not in caplog.text
        assert view.get("k", 4) is None
    assert "Returning null for expired get." in caplog.text


# --------------------------------------------------------------- key-value (AbstractKeyValueStoreTest)

def _kv(entries, key_serde=S, parts=1, deletes=()):
    writers = [StoreSpec("kv", "keyValue").open(DictBacking()) for _ in range(parts)]
    for i, (k, v) in enumerate(entries):
        writers[i % parts].put(k, (v, i))
    for k in deletes:
        for w in writers:
            w.delete(k)
    return ReadOnlyStore("kv", [StoreSpec("kv", "keyValue").open(_replayed(w.backing)) for w in writers],
                         key_serde=key_serde)


def test_key_value_range_all_and_deletes_of_abstract_key_value_store_test(caplog):
    """testPutGetRange / testPutGetReverseRange / testPutGetRangeWithDefaultSerdes: bounds
    inclusive, deleted keys (tombstones) absent, from > to empty with Kafka's warning, a null key
    refused."""
    store = _kv([(0, "zero"), (1, "one"), (2, "two"), (3, "three"), (4, "four"), (5, "five")], L, parts=2,
                deletes=[3, 5])
    assert store.get(3) is None and store.get(5) is None
    assert store.range(2, 4) == [(2, "two"), (4, "four")]
    assert store.range(None, 1) == [(0, "zero"), (1, "one")]
    assert store.range(1, None) == [(1, "one"), (2, "two"), (4, "four")]
    assert store.reverseRange(0, 2) == [(2, "two"), (1, "one"), (0, "zero")]
    assert store.reverseAll() == [(4, "four"), (2, "two"), (1, "one"), (0, "zero")]
    assert store.approximateNumEntries() == 4
    with caplog.at_level(logging.WARNING):
        assert store.range(4, 1) == []
    assert "invalid key range: from > to" in caplog.text
    with pytest.raises(ValueError, match="key cannot be null"):
        store.get(None)


def test_prefix_scan_of_in_memory_key_value_store_test():
    """shouldMatchPositionAfterPut…/prefixScan: String keys by their bytes, only those starting
    with the serialized prefix; a null prefix refused."""
    store = _kv([("k1", "a"), ("k2", "b"), ("k10", "c"), ("x1", "d"), ("k", "e")])
    assert store.prefixScan("k1", S) == [("k1", "a"), ("k10", "c")]
    assert store.prefixScan("k", S) == [("k", "e"), ("k1", "a"), ("k10", "c"), ("k2", "b")]
    assert store.prefixScan("z", S) == []
    with pytest.raises(ValueError):
        store.prefixScan(None, S)


# --------------------------------------------------------------- windows (AbstractWindowBytesStoreTest)

def _windows(puts, size=10):
    writer = StoreSpec("w", "window", retention=1000, window_size=size).open(DictBacking())
    for k, start, v in puts:
        writer.put(k, (v, start), start)
    return ReadOnlyStore("w", [StoreSpec("w", "window", retention=1000).open(_replayed(writer.backing))],
                         kind="window", key_serde=S)


def test_window_fetch_bounds_are_inclusive_on_the_window_start():
    """shouldGetAll / testFetchRange / shouldFetchAndIterateOverExactKeys: fetch(key, from, to)
    gives the windows whose start is in [from, to]; the window's end plays no part."""
    store = _windows([("a", 0, "a0"), ("a", 10, "a10"), ("a", 20, "a20"), ("b", 10, "b10"), ("c", 5, "c5")])
    assert store.fetch("a", 10, 20) == [(10, "a10"), (20, "a20")]
    assert store.fetch("a", 1, 9) == []                  # [0,10) overlaps, but starts before 1
    assert store.fetch("a", 20, 10) == []
    assert store.backwardFetch("a", 0, 20) == [(20, "a20"), (10, "a10"), (0, "a0")]
    assert store.fetch("a", 10) == "a10" and store.fetch("a", 11) is None
    assert [(w.key, w.start, w.end) for w, _ in store.fetch("a", "b", 5, 10)] == [("a", 10, 20), ("b", 10, 20)]
    assert [(w.key, w.start) for w, _ in store.fetchAll(5, 10)] == [("c", 5), ("a", 10), ("b", 10)]
    assert [(w.key, w.start) for w, _ in store.backwardFetchAll(5, 10)] == [("b", 10), ("a", 10), ("c", 5)]
    assert [(w.key, w.start) for w, _ in store.fetch(None, "a", 0, 0)] == [("a", 0)]
    with pytest.raises(ValueError, match="key cannot be null"):
        store.fetch(None, 0, 10)


def test_window_backward_all_and_no_backward_fetch_of_one_window():
    """ReadOnlyWindowStore.backwardAll() is all() reversed (it was missing); there is no
    backwardFetch(key, time): it answered the one window's value reversed ("a10" as "01a")."""
    store = _windows([("a", 0, "a0"), ("b", 0, "b0"), ("a", 10, "a10")])
    assert [(w.key, w.start) for w, _ in store.backwardAll()] == [("a", 10), ("b", 0), ("a", 0)]
    with pytest.raises(TypeError, match="backwardFetch takes"):
        store.backwardFetch("a", 10)


# --------------------------------------------------------------- sessions (AbstractSessionBytesStoreTest)

def _sessions(puts):
    writer = StoreSpec("s", "session", retention=1000).open(DictBacking())
    for k, start, end, v in puts:
        writer.put(Windowed(k, start, end), v)
    writer.remove(Windowed("a", 100, 100))
    return ReadOnlyStore("s", [StoreSpec("s", "session", retention=1000).open(_replayed(writer.backing))],
                         kind="session", key_serde=S)


def test_find_sessions_bounds_of_abstract_session_bytes_store_test():
    """shouldFindValuesWithinMergingSessionWindowRange / shouldFetchAllSessionsWithSameRecordKey:
    a session is found when its end >= earliestSessionEndTime and its start <=
    latestSessionStartTime (both inclusive); a removed session is gone."""
    store = _sessions([("a", 0, 0, 1), ("a", 10, 20, 2), ("a", 100, 100, 9), ("b", 5, 15, 3)])
    assert [w for w, _ in store.fetch("a")] == [Windowed("a", 0, 0), Windowed("a", 10, 20)]
    assert store.findSessions("a", 0, 10) == [(Windowed("a", 0, 0), 1), (Windowed("a", 10, 20), 2)]
    assert store.findSessions("a", 1, 9) == []          # [0,0] ends before 1, [10,20] starts after 9
    assert store.findSessions("a", 20, 10) == [(Windowed("a", 10, 20), 2)]
    assert [w.key for w, _ in store.findSessions("a", "b", 15, 15)] == ["a", "b"]
    assert store.fetchSession("a", 10, 20) == 2 and store.fetchSession("a", 100, 100) is None
    assert [w for w, _ in store.backwardFetch("a")] == [Windowed("a", 10, 20), Windowed("a", 0, 0)]


# --------------------------------------------------------------- a method of another store type

@pytest.mark.parametrize("kind,call", [
    ("window", lambda s: s.range("a", "b")), ("window", lambda s: s.get("a")),
    ("window", lambda s: s.reverseRange("a", "b")), ("window", lambda s: s.findSessions("a", 0, 1)),
    ("window", lambda s: s.fetchSession("a", 0, 1)),
    ("session", lambda s: s.range()), ("session", lambda s: s.get("a")), ("session", lambda s: s.fetchAll(0, 9)),
    ("keyValue", lambda s: s.fetch("a", 0)), ("keyValue", lambda s: s.fetch("a", 0, 9)),
    ("keyValue", lambda s: s.fetchAll(0, 9)), ("keyValue", lambda s: s.findSessions("a", 0, 9)),
    ("keyValue", lambda s: s.fetchSession("a", 0, 9)),
])
def test_a_method_the_store_type_does_not_have_is_refused_not_answered_wrongly(kind, call):
    """ReadOnlyWindowStore has no range() or get(), ReadOnlySessionStore no range(): a window
    view's range() answered [] and a session view's range() listed its sessions; a key-value
    view's fetch() failed inside the store. Each now raises TypeError naming the store's type."""
    if kind == "window":
        store = _windows([("a", 0, "a0")])
    elif kind == "session":
        store = _sessions([("a", 0, 0, 1)])
    else:
        store = _kv([("a", 1)])
    with pytest.raises(TypeError, match=f"is a {kind} store"):
        call(store)

"""Kafka's record cache (``statestore.cache.max.bytes``): a cached table store forwards each key's
latest change once per commit (or when the cache is full), with the value forwarded before as the
old one; the oracle is the same topology without a cache, whose downstream table must be the same
at every commit."""
from __future__ import annotations

import re

import pytest
from hypothesis import example, given, settings, strategies as st

from streams import Consumed, Produced, Serdes, StreamsBuilder
from streams.aggregate import stream_count
from streams.app import _config
from streams.errors import InvalidConfigError
from streams.interpreter import Interpreter
from streams.parameters import Materialized
from streams.record import Change, Record
from streams.stores import StoreSpec
from streams.suppress import BufferConfig, Suppressed
from streams.table import KTableFilter, KTableSource
from streams.task import Collect, Task, chain
from streams.windows import SessionWindows, SlidingWindows, TimeWindows
from tests.streams.table_kit import Pipeline

pytestmark = pytest.mark.unit

BIG = 10 * 1024 * 1024
S, L = Serdes.String(), Serdes.Long()


def cached(stores, *processors, max_bytes=BIG) -> Pipeline:
    p = Pipeline(stores, *processors)
    p.task.use_cache(max_bytes)
    return p


def commit(p: Pipeline, start: int = 0) -> list[tuple]:
    p.task.commit()
    return [(r.key, r.value, r.timestamp) for r in p.out.records[start:]]


def test_a_commit_forwards_each_keys_latest_count_once_with_the_last_forwarded_value_as_old():
    p = cached(["count"], stream_count("count", send_old_values=True))
    assert p.pipe_all([("a", "x", 5), ("b", "x", 1), ("a", "x", 3), ("a", "x", 10)]) == []   # held until the commit
    assert commit(p) == [("b", Change(1, None), 1), ("a", Change(3, None), 10)]
    n = len(p.out.records)
    p.pipe_all([("a", "x", 11), ("a", "x", 12)])
    assert commit(p, n) == [("a", Change(5, 3), 12)]
    assert p.rows("count") == {"a": (5, 12), "b": (1, 1)}
    assert commit(p, len(p.out.records)) == []                 # nothing dirty: nothing forwarded


def test_a_key_added_and_deleted_between_commits_is_not_forwarded_but_a_deleted_old_key_is():
    p = cached(["t"], KTableSource("t", send_old_values=True))
    p.pipe_all([("old", 1, 1)])
    commit(p)
    n = len(p.out.records)
    p.pipe_all([("new", 2, 2), ("new", None, 3), ("old", 4, 4), ("old", None, 5)])
    assert commit(p, n) == [("old", Change(None, 1), 5)]
    assert p.rows("t") == {}


def test_the_forwarded_record_is_the_latest_write_with_its_headers_and_input_position():
    task = Task("app", 0, [StoreSpec("t", "keyValue")])
    task.use_cache(BIG)
    seen = []

    class Position(Collect):
        def process(self, record):
            seen.append((record.key, record.value.new, record.headers, task.source))

    head = chain(task, KTableSource("t"), Position())
    for offset, (value, headers) in enumerate([(1, (("h", b"1"),)), (2, (("h", b"2"),))]):
        task.source = ("in", 0, offset)
        head.process(Record("k", value, 10 + offset, headers))
    task.source = ("in", 0, 99)
    task.commit()
    assert seen == [("k", 2, (("h", b"2"),), ("in", 0, 1))]


def test_a_full_cache_forwards_its_least_recently_written_entry_at_once():
    p = cached(["t"], KTableSource("t"), max_bytes=1)           # every entry is over the size
    assert p.pipe_all([("a", 1, 1), ("b", 2, 2), ("a", 3, 3)]) == [
        ("a", Change(1, None), 1), ("b", Change(2, None), 2), ("a", Change(3, None), 3)]
    assert commit(p, 3) == []


def test_with_caching_disabled_every_update_is_forwarded_at_once_even_with_a_cache():
    task = Task("app", 0, [StoreSpec("t", "keyValue", caching=False)])
    task.use_cache(BIG)
    out = Collect()
    head = chain(task, KTableSource("t"), out)
    for key, value, ts in [("a", 1, 1), ("a", 2, 2), ("gone", None, 3)]:
        head.process(Record(key, value, ts))
    # Kafka without caching: a delete of a key the store never held is forwarded too.
    assert [(r.key, r.value) for r in out.records] == [("a", Change(1, None)), ("a", Change(2, None)),
                                                         ("gone", Change(None, None))]
    assert Materialized.as_("t").withCachingDisabled().caching is False
    assert Materialized.as_("t").withCachingDisabled().withCachingEnabled().caching is True


def test_the_cache_size_config_takes_kafkas_deprecated_name_and_refuses_a_negative_size():
    base = {"application.id": "a", "bootstrap.servers": "x:1"}
    assert _config(base)["statestore.cache.max.bytes"] == BIG
    assert _config({**base, "cache.max.bytes.buffering": 0})["statestore.cache.max.bytes"] == 0
    assert _config({**base, "cache.max.bytes.buffering": 0, "statestore.cache.max.bytes": 7})[
        "statestore.cache.max.bytes"] == 7
    for name in ("statestore.cache.max.bytes", "cache.max.bytes.buffering"):
        for bad in (-1, "lots"):
            with pytest.raises(InvalidConfigError, match=f"^Invalid value {re.escape(str(bad))} for configuration {re.escape(name)}: ") as e:
                _config({**base, name: bad})
            assert e.value.details["config"] == name


def test_interval_configs_are_milliseconds_at_least_zero():
    base = {"application.id": "a", "bootstrap.servers": "x:1"}
    assert _config(base)["repartition.purge.interval.ms"] == 30_000 and _config(base)["commit.interval.ms"] == 100
    for name in ("commit.interval.ms", "repartition.purge.interval.ms"):
        assert _config({**base, name: "0"})[name] == 0
        for bad in (-5, "abc"):
            with pytest.raises(InvalidConfigError, match=f"^Invalid value {re.escape(str(bad))} for configuration {re.escape(name)}: ") as e:
                _config({**base, name: bad})
            assert e.value.details["config"] == name


def even(key, value):
    return value % 2 == 0


def view(records, into: dict) -> dict:
    """Apply forwarded changes to a downstream table (a None new value deletes)."""
    for key, change, _ in records:
        if change.new is None:
            into.pop(key, None)
        else:
            into[key] = change.new
    return into


ROWS = st.lists(st.tuples(st.sampled_from("abcde"), st.one_of(st.none(), st.integers(0, 9)), st.integers(0, 50),
                          st.booleans()), max_size=60)


@settings(max_examples=150, deadline=None)
@given(rows=ROWS, max_bytes=st.sampled_from([1, 200, 400, BIG]))
def test_at_every_commit_the_downstream_table_is_the_one_without_a_cache(rows, max_bytes):
    """A source table and a materialized filter, both cached, against the same pipeline forwarding
    every update; a row's flag commits after it. Every forwarded old value is the key's previous
    forwarded new value, so a subtractor downstream takes out what it added."""
    def make(cache):
        stores = ["t", "f"]
        procs = (KTableSource("t", send_old_values=True), KTableFilter(even, store="f", send_old_values=True))
        return cached(stores, *procs, max_bytes=max_bytes) if cache else Pipeline(stores, *procs)

    plain, with_cache = make(False), make(True)
    plain_view, cached_view, last_new, consumed = {}, {}, {}, 0
    for key, value, ts, commits in rows + [("a", None, 0, True)]:
        plain_view = view(plain.pipe(key, value, ts), plain_view)
        with_cache.pipe(key, value, ts)
        if commits:
            forwarded = commit(with_cache, consumed)      # evicted before the commit, then flushed by it
            consumed = len(with_cache.out.records)
            for k, change, _ in forwarded:
                assert change.old == last_new.get(k), (k, change)
                last_new[k] = change.new
            cached_view = view(forwarded, cached_view)
            assert cached_view == plain_view
            assert with_cache.rows("f") == plain.rows("f") and with_cache.rows("t") == plain.rows("t")


def windowed_topology():
    """A tumbling, a sliding and a session count of one stream, each written with its window in the key."""
    b = StreamsBuilder()
    s = b.stream("in", Consumed.with_(S, S)).groupByKey()
    for topic, windows in (("tumbling", TimeWindows.ofSizeAndGrace(10, 5)),
                           ("sliding", SlidingWindows.ofTimeDifferenceAndGrace(6, 5)),
                           ("session", SessionWindows.ofInactivityGapAndGrace(4, 5))):
        (s.windowedBy(windows).count().toStream().map(lambda w, n: (f"{w.key}@{w.start}-{w.end}", n))
         .to(topic, Produced.with_(S, L)))
    return b.build()


def updates(interp, topic: str) -> dict:
    out: dict = {}
    for part in interp.topics.get(topic, []):
        for k, v, ts, _ in part:
            out.setdefault(S.deserialize(k), []).append((L.deserialize(v), ts))
    return out


def commit_all(interp) -> None:
    """Commit every task until what the commits forwarded has been processed and committed too."""
    while True:
        interp.commit()
        if not interp.pending:
            return
        interp.run()


def run_both(topology, rows, max_bytes: int, at_commit=lambda plain, with_cache: None):
    """``rows`` (key, timestamp, commit after it) into "in" of the topology without a cache and
    with one of ``max_bytes`` (committed where a row says so, and at the end); ``at_commit`` checks
    the two after each commit. Returns both interpreters."""
    plain = Interpreter(topology(), {"application.id": "w"})
    with_cache = Interpreter(topology(), {"application.id": "w"}, cache_bytes=max_bytes)
    for key, ts, commits in rows + [("a", 0, True)]:
        for interp in (plain, with_cache):
            interp.pipe("in", S.serialize(key), S.serialize("x"), ts)
        if commits:
            commit_all(with_cache)
            at_commit(plain, with_cache)
    return plain, with_cache


def is_subsequence(part: list, whole: list) -> bool:
    rest = iter(whole)
    return all(any(x == y for y in rest) for x in part)


@settings(max_examples=100, deadline=None)
@given(rows=st.lists(st.tuples(st.sampled_from("ab"), st.integers(0, 40), st.booleans()), max_size=40),
       max_bytes=st.sampled_from([300, BIG]))
@example(rows=[("b", 1, True), ("b", 1, False), ("b", 0, False)], max_bytes=BIG)   # a flushed session grown, then merged
def test_windowed_and_session_counts_through_the_cache_keep_the_same_windows_at_every_commit(rows, max_bytes):
    """Per window, the cached run forwards a subsequence of the uncached run's updates, and at every
    commit the windows downstream (a merged-away session deleted) are the same."""
    def same_windows(plain, with_cache):
        for topic in ("tumbling", "sliding", "session"):
            want, got = updates(plain, topic), updates(with_cache, topic)
            assert all(is_subsequence(got[k], want.get(k, [])) for k in got), topic
            latest = lambda u: {k: v[-1][0] for k, v in u.items() if v[-1][0] is not None}  # noqa: E731
            assert latest(got) == latest(want), topic

    run_both(windowed_topology, rows, max_bytes, same_windows)


@settings(max_examples=100, deadline=None)
@given(rows=st.lists(st.tuples(st.sampled_from("ab"), st.integers(0, 60), st.booleans()), max_size=40),
       max_bytes=st.sampled_from([300, BIG]))
def test_final_window_results_through_suppress_are_the_same_with_the_cache(rows, max_bytes):
    """``suppress(untilWindowCloses)`` after a cached windowed count emits each window once, with
    the value it emits without a cache: the cache only thins the updates it buffers."""
    def topology():
        b = StreamsBuilder()
        (b.stream("in", Consumed.with_(S, S)).groupByKey().windowedBy(TimeWindows.ofSizeAndGrace(10, 5)).count()
         .suppress(Suppressed.untilWindowCloses(BufferConfig.unbounded())).toStream()
         .map(lambda w, n: (f"{w.key}@{w.start}", n)).to("final", Produced.with_(S, L)))
        return b.build()

    plain, with_cache = run_both(topology, rows, max_bytes)
    assert updates(with_cache, "final") == updates(plain, "final")

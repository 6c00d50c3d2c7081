"""KTable source, filter, mapValues and toStream, with scenarios from Kafka's KTableSourceTest,
KTableFilterTest and KTableMapValuesTest (expected changes copied from there)."""
from __future__ import annotations

import logging

import pytest

from streams.errors import TopologyError
from streams.record import Change, Record
from streams.table import KTableFilter, KTableMapValues, KTableSource, KTableToStream
from tests.streams.table_kit import Pipeline

pytestmark = pytest.mark.unit

SOURCE_ROWS = [("A", "01", 10), ("B", "01", 20), ("C", "01", 15), ("A", "02", 8), ("B", "02", 22),
               ("A", "03", 12), ("A", None, 15), ("B", None, 20)]


def test_source_sending_old_values_forwards_each_update_with_the_row_it_replaces():
    p = Pipeline(["t"], KTableSource("t", send_old_values=True))
    assert p.pipe_all(SOURCE_ROWS) == [
        ("A", Change("01", None), 10), ("B", Change("01", None), 20), ("C", Change("01", None), 15),
        ("A", Change("02", "01"), 8), ("B", Change("02", "01"), 22),
        ("A", Change("03", "02"), 12),
        ("A", Change(None, "03"), 15), ("B", Change(None, "02"), 20)]
    assert p.rows("t") == {"C": ("01", 15)}


def test_source_not_sending_old_values_forwards_new_values_only():
    p = Pipeline(["t"], KTableSource("t"))
    assert p.pipe_all(SOURCE_ROWS) == [
        ("A", Change("01", None), 10), ("B", Change("01", None), 20), ("C", Change("01", None), 15),
        ("A", Change("02", None), 8), ("B", Change("02", None), 22),
        ("A", Change("03", None), 12),
        ("A", Change(None, None), 15), ("B", Change(None, None), 20)]


def test_source_keeps_the_latest_value_per_key_in_offset_order_even_when_its_timestamp_is_older(caplog):
    p = Pipeline(["t"], KTableSource("t", send_old_values=True))
    with caplog.at_level(logging.WARNING, logger="streams.table"):
        assert p.pipe_all([("key", "value", 10), ("key", "later", 5)]) == [
            ("key", Change("value", None), 10), ("key", Change("later", "value"), 5)]
    assert p.rows("t") == {"key": ("later", 5)}
    assert "Detected out-of-order KTable update for t, old timestamp=[10] new timestamp=[5]" in caplog.text


def test_source_forwards_an_identical_update_again_because_kip_557_is_disabled():
    p = Pipeline(["t"], KTableSource("t", send_old_values=True))
    assert p.pipe_all([("A", 1, 10), ("A", 1, 12)]) == [("A", Change(1, None), 10), ("A", Change(1, 1), 12)]
    assert p.rows("t") == {"A": (1, 12)}


@pytest.mark.parametrize("send_old", [False, True])
def test_source_tombstone_for_an_absent_key_is_not_forwarded_through_the_cache(send_old):
    p = Pipeline(["t"], KTableSource("t", send_old_values=send_old))
    assert p.pipe("A", None, 5) == []
    assert p.rows("t") == {}
    assert p.task.store("t").backing.changes == []


def test_source_tombstone_for_an_absent_key_is_forwarded_without_the_cache():
    p = Pipeline(["t"], KTableSource("t", send_old_values=True, caching=False))
    assert p.pipe_all([("A", None, 5), ("A", 1, 6), ("A", None, 7)]) == [
        ("A", Change(None, None), 5), ("A", Change(1, None), 6), ("A", Change(None, 1), 7)]


def test_source_drops_a_null_key_and_writes_nothing(caplog):
    p = Pipeline(["t"], KTableSource("t", send_old_values=True))
    with caplog.at_level(logging.WARNING, logger="streams.table"):
        assert p.pipe(None, "value", 1) == []
    assert p.rows("t") == {}
    assert "Skipping record due to null key" in caplog.text


def test_unmaterialized_source_forwards_every_value_without_old_values():
    p = Pipeline([], KTableSource(None))
    assert p.pipe_all([("A", 1, 1), ("A", None, 2), ("B", None, 3)]) == [
        ("A", Change(1, None), 1), ("A", Change(None, None), 2), ("B", Change(None, None), 3)]
    with pytest.raises(TopologyError, match="materialized"):
        KTableSource(None, send_old_values=True)


def test_source_headers_travel_with_the_change():
    p = Pipeline(["t"], KTableSource("t"))
    p.head.process(Record("A", 1, 3, headers=(("h", b"1"),)))
    assert p.out.records[0].headers == (("h", b"1"),)


# KTableFilterTest: predicate (key, value) -> value % 2 == 0 over an integer table.
FILTER_ROWS = [("A", 1, 5), ("B", 1, 10), ("C", 1, 15), ("A", 2, 15), ("B", 2, 8), ("A", 3, 20),
               ("A", None, 10), ("B", None, 20)]


def even(key, value):
    return value % 2 == 0


def _source_and_filter(filter_store=None, source_store="t", send_old=False, caching=True):
    """Table1 (the source) and table2 (its filter), each observed by its own collector."""
    seen1: list = []

    class Tap(KTableSource):
        def forward(self, record):
            seen1.append((record.key, record.value, record.timestamp))
            super().forward(record)

    stores = [s for s in (source_store, filter_store) if s]
    p = Pipeline(stores, Tap(source_store, send_old_values=send_old and source_store is not None, caching=caching),
                 KTableFilter(even, store=filter_store, send_old_values=send_old, caching=caching))
    return p, seen1


@pytest.mark.parametrize("filter_store", [None, "store2"], ids=["unmaterialized", "materialized"])
def test_filter_without_old_values_forwards_a_tombstone_for_every_failing_update(filter_store):
    # KTableFilterTest.doTestNotSendingOldValue (cache size 0 there).
    p, seen1 = _source_and_filter(filter_store, source_store=None, caching=False)
    out = p.pipe_all(FILTER_ROWS)
    assert seen1 == [("A", Change(1, None), 5), ("B", Change(1, None), 10), ("C", Change(1, None), 15),
                     ("A", Change(2, None), 15), ("B", Change(2, None), 8), ("A", Change(3, None), 20),
                     ("A", Change(None, None), 10), ("B", Change(None, None), 20)]
    assert out == [("A", Change(None, None), 5), ("B", Change(None, None), 10), ("C", Change(None, None), 15),
                   ("A", Change(2, None), 15), ("B", Change(2, None), 8),
                   ("A", Change(None, None), 20),
                   ("A", Change(None, None), 10), ("B", Change(None, None), 20)]


def test_materialized_filter_through_the_cache_forwards_deletes_only_of_rows_it_holds():
    p, _ = _source_and_filter("store2", source_store=None, caching=True)
    assert p.pipe_all(FILTER_ROWS) == [("A", Change(2, None), 15), ("B", Change(2, None), 8),
                                       ("A", Change(None, None), 20), ("B", Change(None, None), 20)]
    assert p.rows("store2") == {}


@pytest.mark.parametrize("filter_store", [None, "store2"], ids=["unmaterialized", "materialized"])
@pytest.mark.parametrize("caching", [False, True])
def test_filter_with_old_values_forwards_a_tombstone_only_for_a_row_that_stops_passing(filter_store, caching):
    # KTableFilterTest.doTestSendingOldValue with the parent sending old values.
    p, seen1 = _source_and_filter(filter_store, send_old=True, caching=caching)
    outs = [p.pipe(*row) for row in FILTER_ROWS]
    assert outs == [[], [], [],
                    [("A", Change(2, None), 15)], [("B", Change(2, None), 8)],
                    [("A", Change(None, 2), 20)],
                    [], [("B", Change(None, 2), 20)]]
    assert seen1[5:] == [("A", Change(3, 2), 20), ("A", Change(None, 3), 10), ("B", Change(None, 2), 20)]


def test_filter_with_old_values_skips_rows_that_never_pass():
    # KTableFilterTest.doTestSkipNullOnMaterialization (shouldSkip): nothing goes to a repartition.
    p = Pipeline(["t"], KTableSource("t", send_old_values=True),
                 KTableFilter(lambda k, v: v.lower() == "accept", send_old_values=True))
    assert p.pipe_all([("A", "reject", 5), ("B", "reject", 10), ("C", "reject", 20)]) == []


def test_filter_not_inverts_the_predicate():
    p = Pipeline(["t"], KTableSource("t", send_old_values=True), KTableFilter(even, filter_not=True,
                                                                              send_old_values=True))
    assert p.pipe_all([("A", 1, 1), ("A", 2, 2), ("B", 2, 3)]) == [("A", Change(1, None), 1),
                                                                    ("A", Change(None, 1), 2)]


def test_filter_does_not_call_the_predicate_on_a_delete():
    calls = []
    p = Pipeline([], KTableSource(None), KTableFilter(lambda k, v: calls.append(v) or True))
    assert p.pipe("A", None, 1) == [("A", Change(None, None), 1)]
    assert calls == []


def test_map_values_maps_new_and_old_values_and_never_a_delete():
    calls = []

    def length(key, value):
        calls.append(value)
        return len(value)

    p = Pipeline(["t"], KTableSource("t", send_old_values=True), KTableMapValues(length, send_old_values=True))
    assert p.pipe_all([("A", "01", 5), ("B", "001", 6), ("A", "0001", 7), ("A", None, 8)]) == [
        ("A", Change(2, None), 5), ("B", Change(3, None), 6), ("A", Change(4, 2), 7), ("A", Change(None, 4), 8)]
    assert None not in calls


def test_materialized_map_values_keeps_its_rows_and_reads_old_values_from_them():
    p = Pipeline(["t", "m"], KTableSource("t"), KTableMapValues(lambda k, v: v * 10, store="m",
                                                                send_old_values=True))
    assert p.pipe_all([("A", 1, 5), ("A", 2, 9), ("B", 3, 4), ("B", None, 6)]) == [
        ("A", Change(10, None), 5), ("A", Change(20, 10), 9), ("B", Change(30, None), 4), ("B", Change(None, 30), 6)]
    assert p.rows("m") == {"A": (20, 9)}


def test_map_values_without_old_values_drops_them():
    p = Pipeline(["t"], KTableSource("t", send_old_values=True), KTableMapValues(lambda k, v: k + v))
    assert p.pipe_all([("A", "x", 1), ("A", "y", 2)]) == [("A", Change("Ax", None), 1), ("A", Change("Ay", None), 2)]


def test_to_stream_emits_the_changelog_with_none_for_deletes():
    p = Pipeline(["t"], KTableSource("t", send_old_values=True), KTableToStream())
    assert p.pipe_all([("A", 1, 10), ("B", 2, 11), ("C", 3, 12), ("D", 4, 13), ("A", None, 14),
                       ("B", None, 15)]) == [("A", 1, 10), ("B", 2, 11), ("C", 3, 12), ("D", 4, 13),
                                             ("A", None, 14), ("B", None, 15)]

"""Grouped-stream count, reduce and aggregate, with KGroupedStreamImplTest's data and results."""
from __future__ import annotations

import logging

import pytest

from streams.aggregate import KStreamAggregate, KStreamReduce, stream_count
from streams.record import Change
from tests.streams.table_kit import Pipeline

pytestmark = pytest.mark.unit

# KGroupedStreamImplTest.processData; the last record's null value is dropped.
PROCESS_DATA = [("1", "A", 5), ("2", "B", 1), ("1", "C", 3), ("1", "D", 10), ("3", "E", 8), ("3", "F", 9),
                ("3", None, 11)]


def string_adder(agg, value):
    return f"{agg}+{value}"


def to_string_aggregate(**kw):
    return KStreamAggregate("agg", lambda: "0", lambda k, v, a: f"{a}+{v}", **kw)


def test_count_and_materialize_results():
    p = Pipeline(["count"], stream_count("count"))
    out = p.pipe_all(PROCESS_DATA)
    assert p.rows("count") == {"1": (3, 10), "2": (1, 1), "3": (2, 9)}
    assert out == [("1", Change(1, None), 5), ("2", Change(1, None), 1), ("1", Change(2, None), 5),
                   ("1", Change(3, None), 10), ("3", Change(1, None), 8), ("3", Change(2, None), 9)]


def test_reduce_and_materialize_results():
    p = Pipeline(["reduce"], KStreamReduce("reduce", string_adder))
    p.pipe_all(PROCESS_DATA)
    assert p.rows("reduce") == {"1": ("A+C+D", 10), "2": ("B", 1), "3": ("E+F", 9)}


def test_aggregate_and_materialize_results():
    p = Pipeline(["agg"], to_string_aggregate())
    p.pipe_all(PROCESS_DATA)
    assert p.rows("agg") == {"1": ("0+A+C+D", 10), "2": ("0+B", 1), "3": ("0+E+F", 9)}


@pytest.mark.parametrize("make", [lambda: stream_count("s"), lambda: KStreamReduce("s", string_adder)],
                         ids=["aggregate", "reduce"])
def test_null_keys_and_values_are_skipped_and_logged(make, caplog):
    p = Pipeline(["s"], make())
    with caplog.at_level(logging.WARNING, logger="streams.aggregate"):
        assert p.pipe_all([(None, "x", 1), ("k", None, 2)]) == []
    assert p.rows("s") == {}
    assert caplog.text.count("Skipping record due to null key or value") == 2


def test_reduce_sends_the_previous_aggregate_as_old_value():
    p = Pipeline(["s"], KStreamReduce("s", string_adder, send_old_values=True))
    assert p.pipe_all([("1", "A", 5), ("1", "C", 3)]) == [("1", Change("A", None), 5), ("1", Change("A+C", "A"), 5)]


def test_aggregate_first_old_value_is_the_initializer_without_the_cache_and_none_through_it():
    # KStreamAggregate forwards oldAgg = initializer(); the caching store forwards the stored row.
    p = Pipeline(["agg"], to_string_aggregate(send_old_values=True, caching=False))
    assert p.pipe_all([("1", "A", 5), ("1", "B", 6)]) == [("1", Change("0+A", "0"), 5),
                                                          ("1", Change("0+A+B", "0+A"), 6)]
    p = Pipeline(["agg"], to_string_aggregate(send_old_values=True))
    assert p.pipe_all([("1", "A", 5), ("1", "B", 6)]) == [("1", Change("0+A", None), 5),
                                                          ("1", Change("0+A+B", "0+A"), 6)]


def test_result_timestamp_is_the_largest_input_timestamp_of_the_key():
    p = Pipeline(["count"], stream_count("count"))
    assert [ts for _, _, ts in p.pipe_all([("k", "a", 7), ("k", "b", 3), ("k", "c", 9), ("j", "d", 1)])] == [
        7, 7, 9, 1]

"""Scenarios from Kafka's KStreamSessionWindowAggregateProcessorTest (gap 50, count)."""
from streams.window_aggregate import SessionWindowAggregate, count_functions
from streams.windows import SessionWindows
from tests.streams._windowing import Run

C = count_functions()


def run(grace=0):
    return Run(SessionWindowAggregate("s", SessionWindows.ofInactivityGapAndGrace(50, grace),
                                      C.initializer, C.aggregator, C.merger))


def test_merges_two_sessions_and_retracts_them():
    r = run(grace=1000)
    assert r.send("a", "1", 0) == [("a", 0, 0, 1, None, 0)]
    assert r.send("a", "1", 500) == [("a", 500, 500, 1, None, 500)]
    assert r.send("a", "1", 10) == [("a", 0, 0, None, 1, 0), ("a", 0, 10, 2, None, 10)]


def test_merges_three_sessions_into_one():
    r = run(grace=1000)
    r.send("a", "1", 0)
    r.send("a", "1", 100)
    assert r.send("a", "1", 50) == [("a", 0, 0, None, 1, 0), ("a", 100, 100, None, 1, 100),
                                    ("a", 0, 100, 3, None, 100)]


def test_out_of_order_within_grace_merges_and_late_is_dropped():
    r = run(grace=10)
    r.send("a", "1", 0)
    r.send("b", "1", 100)                              # stream time 100; close = 100 - 10 - 50 = 40
    # [0, 0] ended before storeTime - retention + 1 = 100 - 60 + 1: Kafka's store no longer finds it
    assert r.send("a", "1", 40) == [("a", 40, 40, 1, None, 40)]
    assert r.send("a", "1", 41) == [("a", 41, 41, 1, None, 41)]         # [40, 40] is hidden as well
    assert r.send("a", "1", 60) == [("a", 41, 41, None, 1, 41), ("a", 41, 60, 2, None, 60)]
    assert r.send("b", "1", 120) == [("b", 100, 100, None, 1, 100), ("b", 100, 120, 2, None, 120)]
    assert r.send("a", "1", 5) == []                   # [5, 5] ends before close 120 - 60
    assert r.dropped() == 1

"""Kafka's ``KStreamSlidingWindowAggregateTest`` ported to :class:`SlidingWindowAggregate`: the same
inputs (out-of-order and early records, records creating left and right windows, records dropped
by grace) and the expected results copied from the Java test, for both emit strategies.

Kafka gathers the results in two ways, kept here: per window start, the set of (value, timestamp)
forwarded for it (``gatherOutput``); or the forwarded list stably sorted by (key, window start), so
the order of a window's updates is checked too. The update runs use a store retention of 50 000 ms
as Kafka's test store suppliers do; the emit-on-close runs use the default retention, as Kafka's
``Materialized.as("store-name")`` does. (``testJoin``, a join of two windowed tables: in
``test_windows_kafka_parity.py``.)
"""
from __future__ import annotations

import random

import pytest

from streams.record import Record
from streams.task import Collect, Task, chain
from streams.window_aggregate import ON_WINDOW_CLOSE, ON_WINDOW_UPDATE, SlidingWindowAggregate, reduce_functions
from streams.windows import SlidingWindows

pytestmark = pytest.mark.unit

UPDATE, CLOSE = ON_WINDOW_UPDATE, ON_WINDOW_CLOSE
KAFKA_TEST_RETENTION = 50_000


def string_init():
    """MockInitializer.STRING_INIT"""
    return "0"


def tostring_adder(key, value, agg):
    """MockAggregator.TOSTRING_ADDER"""
    return f"{agg}+{value}"


def string_reducer(agg, value):
    """MockReducer.STRING_ADDER"""
    return f"{agg}+{value}"


class Sliding:
    """One SlidingWindowAggregate in a fresh task, as ``chain(Task(...), proc, Collect())``."""

    def __init__(self, d, grace, emit, retention=None, init=string_init, adder=tostring_adder):
        self.d = d
        self.proc = SlidingWindowAggregate("store", SlidingWindows.ofTimeDifferenceAndGrace(d, grace), init, adder,
                                           emit=emit)
        self.task = Task("app", 0, [self.proc.store_spec(retention)])
        self.collect = Collect()
        self.head = chain(self.task, self.proc, self.collect)

    def pipe(self, records) -> "Sliding":
        for key, value, ts in records:
            self.head.process(Record(key, value, ts))
        return self

    def out(self) -> list[tuple]:
        """What was forwarded, as (key, start, value, timestamp); every window is [start, start + d]."""
        rows = []
        for r in self.collect.records:
            assert r.key.end == r.key.start + self.d
            rows.append((r.key.key, r.key.start, r.value.new, r.timestamp))
        return rows

    def gathered(self) -> dict[int, set]:
        """Kafka's gatherOutput: window start -> set of (value, timestamp)."""
        out: dict[int, set] = {}
        for _, start, value, ts in self.out():
            out.setdefault(start, set()).add((value, ts))
        return out

    def sorted_by_window(self) -> list[tuple]:
        """The forwarded list stably sorted by (key, window start), as Kafka's comparator sorts it."""
        return sorted(self.out(), key=lambda r: (r[0], r[1]))

    def dropped(self) -> int:
        return self.task.meta("p0.dropped") or 0


def sets(d: dict) -> dict[int, set]:
    return {start: set(values) for start, values in d.items()}


def retention(emit):
    return KAFKA_TEST_RETENTION if emit == UPDATE else None


def a(*pairs):
    """Records of key "A" as (value, timestamp) pairs."""
    return [("A", v, ts) for v, ts in pairs]


# ---------------------------------------------------------------------- testAggregateSmallInput
AGGREGATE_SMALL = a(("1", 10), ("2", 10), ("3", 14), ("4", 15), ("5", 20), ("6", 22), ("7", 30))
AGGREGATE_SMALL_EXPECTED = {
    CLOSE: {0: [("0+1+2", 10)], 4: [("0+1+2+3", 14)], 5: [("0+1+2+3+4", 15)], 10: [("0+1+2+3+4+5", 20)],
            11: [("0+3+4+5", 20)], 12: [("0+3+4+5+6", 22)]},
    UPDATE: {0: [("0+1", 10), ("0+1+2", 10)], 4: [("0+1+2+3", 14)], 5: [("0+1+2+3+4", 15)],
             10: [("0+1+2+3+4+5", 20)], 11: [("0+3", 14), ("0+3+4", 15), ("0+3+4+5", 20)], 12: [("0+3+4+5+6", 22)],
             15: [("0+4", 15), ("0+4+5", 20), ("0+4+5+6", 22)], 16: [("0+5", 20), ("0+5+6", 22)],
             20: [("0+5+6+7", 30)], 21: [("0+6", 22), ("0+6+7", 30)], 23: [("0+7", 30)]},
}


@pytest.mark.parametrize("emit", [UPDATE, CLOSE])
def test_aggregate_small_input(emit):
    run = Sliding(10, 5, emit, retention(emit)).pipe(AGGREGATE_SMALL)
    assert run.gathered() == sets(AGGREGATE_SMALL_EXPECTED[emit])


# ---------------------------------------------------------------------- testReduceSmallInput
REDUCE_SMALL = a(("1", 10), ("2", 14), ("3", 15), ("4", 22), ("5", 26), ("6", 30))
REDUCE_SMALL_EXPECTED = {
    CLOSE: {0: [("1", 10)], 4: [("1+2", 14)], 5: [("1+2+3", 15)], 11: [("2+3", 15)], 12: [("2+3+4", 22)]},
    UPDATE: {0: [("1", 10)], 4: [("1+2", 14)], 5: [("1+2+3", 15)], 11: [("2", 14), ("2+3", 15)],
             12: [("2+3+4", 22)], 15: [("3", 15), ("3+4", 22)], 16: [("4", 22), ("4+5", 26)], 20: [("4+5+6", 30)],
             23: [("5", 26), ("5+6", 30)], 27: [("6", 30)]},
}


@pytest.mark.parametrize("emit", [UPDATE, CLOSE])
def test_reduce_small_input(emit):
    f = reduce_functions(string_reducer)
    run = Sliding(10, 5, emit, retention(emit), f.initializer, f.aggregator).pipe(REDUCE_SMALL)
    assert run.gathered() == sets(REDUCE_SMALL_EXPECTED[emit])


# ---------------------------------------------------------------------- testAggregateLargeInput
AGGREGATE_LARGE = (a(("1", 10), ("2", 20), ("3", 22), ("4", 15))
                   + [("B", "1", 12), ("B", "2", 13), ("B", "3", 18), ("B", "4", 19), ("B", "5", 25), ("B", "6", 14)]
                   + [("C", "1", 11), ("C", "2", 15), ("C", "3", 16), ("C", "4", 21), ("C", "5", 23)]
                   + [("D", "4", 11), ("D", "2", 12), ("D", "3", 29), ("D", "5", 16)])
AGGREGATE_LARGE_EXPECTED = {
    # grace 10: B@14, C@11, D@11, D@12 and D@16 come after their windows closed
    CLOSE: [("A", 0, "0+1", 10), ("A", 5, "0+1+4", 15), ("B", 2, "0+1", 12), ("B", 3, "0+1+2", 13),
            ("B", 8, "0+1+2+3+6", 18), ("C", 5, "0+2", 15), ("C", 6, "0+2+3", 16)],
    UPDATE: [("A", 0, "0+1", 10), ("A", 5, "0+1+4", 15), ("A", 10, "0+1+2", 20), ("A", 10, "0+1+2+4", 20),
             ("A", 11, "0+2", 20), ("A", 11, "0+2+4", 20), ("A", 12, "0+2+3", 22), ("A", 12, "0+2+3+4", 22),
             ("A", 16, "0+2+3", 22), ("A", 21, "0+3", 22),
             ("B", 2, "0+1", 12), ("B", 3, "0+1+2", 13), ("B", 4, "0+1+2+6", 14), ("B", 8, "0+1+2+3", 18),
             ("B", 8, "0+1+2+3+6", 18), ("B", 9, "0+1+2+3+4", 19), ("B", 9, "0+1+2+3+4+6", 19), ("B", 13, "0+2", 13),
             ("B", 13, "0+2+3", 18), ("B", 13, "0+2+3+4", 19), ("B", 13, "0+2+3+4+6", 19), ("B", 14, "0+3", 18),
             ("B", 14, "0+3+4", 19), ("B", 14, "0+3+4+6", 19), ("B", 15, "0+3+4+5", 25), ("B", 19, "0+4", 19),
             ("B", 19, "0+4+5", 25), ("B", 20, "0+5", 25),
             ("C", 1, "0+1", 11), ("C", 5, "0+1+2", 15), ("C", 6, "0+1+2+3", 16), ("C", 11, "0+1+2+3+4", 21),
             ("C", 12, "0+2", 15), ("C", 12, "0+2+3", 16), ("C", 12, "0+2+3+4", 21), ("C", 13, "0+2+3+4+5", 23),
             ("C", 16, "0+3", 16), ("C", 16, "0+3+4", 21), ("C", 16, "0+3+4+5", 23), ("C", 17, "0+4", 21),
             ("C", 17, "0+4+5", 23), ("C", 22, "0+5", 23),
             ("D", 1, "0+4", 11), ("D", 2, "0+4+2", 12), ("D", 6, "0+4+2+5", 16), ("D", 12, "0+2", 12),
             ("D", 12, "0+2+5", 16), ("D", 13, "0+5", 16), ("D", 19, "0+3", 29)],
}


@pytest.mark.parametrize("emit", [UPDATE, CLOSE])
def test_aggregate_large_input_with_out_of_order_records_creating_left_and_right_windows(emit):
    grace = 10 if emit == CLOSE else 50
    run = Sliding(10, grace, emit, retention(emit)).pipe(AGGREGATE_LARGE)
    assert run.sorted_by_window() == AGGREGATE_LARGE_EXPECTED[emit]


# ---------------------------------------------------------------------- early records (ts < time difference)
EARLY_SMALL = a(("1", 0), ("2", 5), ("3", 6), ("4", 3), ("5", 13), ("6", 10), ("7", 70))
EARLY_SMALL_EXPECTED = {
    CLOSE: {0: [("0+1+2+3+4+5+6", 13)], 1: [("0+2+3+4+5+6", 13)], 4: [("0+2+3+5+6", 13)], 6: [("0+3+5+6", 13)],
            7: [("0+5+6", 13)], 11: [("0+5", 13)]},
    UPDATE: {0: [("0+1", 0), ("0+1+2", 5), ("0+1+2+3", 6), ("0+1+2+3+4", 6), ("0+1+2+3+4+5", 13),
                 ("0+1+2+3+4+5+6", 13)],
             1: [("0+2", 5), ("0+2+3", 6), ("0+2+3+4", 6), ("0+2+3+4+5", 13), ("0+2+3+4+5+6", 13)],
             4: [("0+2+3", 6), ("0+2+3+5", 13), ("0+2+3+5+6", 13)], 6: [("0+3", 6), ("0+3+5", 13), ("0+3+5+6", 13)],
             7: [("0+5", 13), ("0+5+6", 13)], 11: [("0+5", 13)], 20: [("0+7", 70)]},
}


@pytest.mark.parametrize("emit", [UPDATE, CLOSE])
def test_early_records_small_input(emit):
    # "topic-Canonized": the default retention in both modes
    run = Sliding(50, 0, emit).pipe(EARLY_SMALL)
    assert run.gathered() == sets(EARLY_SMALL_EXPECTED[emit])


@pytest.mark.parametrize("emit", [UPDATE, CLOSE])
def test_early_no_grace_period_small_input(emit):
    # SlidingWindows.ofTimeDifferenceWithNoGrace(50): the same windows as the early test with grace 0
    records = EARLY_SMALL[:-1] + a(("6", 70))
    expected = {**EARLY_SMALL_EXPECTED[emit]}
    if emit == UPDATE:
        expected[20] = [("0+6", 70)]
    run = Sliding(50, 0, emit).pipe(records)
    assert run.gathered() == sets(expected)


EARLY_REPEATED = a(("1", 0), ("2", 2), ("3", 4), ("4", 0), ("5", 2), ("6", 2), ("7", 0), ("8", 7))
EARLY_REPEATED_EXPECTED = {
    CLOSE: {0: [("0+1+2+3+4+5+6+7", 4)], 1: [("0+2+3+5+6", 4)]},
    UPDATE: {0: [("0+1", 0), ("0+1+2", 2), ("0+1+2+3", 4), ("0+1+2+3+4", 4), ("0+1+2+3+4+5", 4),
                 ("0+1+2+3+4+5+6", 4), ("0+1+2+3+4+5+6+7", 4)],
             1: [("0+2", 2), ("0+2+3", 4), ("0+2+3+5", 4), ("0+2+3+5+6", 4)], 2: [("0+2+3+5+6+8", 7)],
             3: [("0+3", 4), ("0+3+8", 7)], 5: [("0+8", 7)]},
}


@pytest.mark.parametrize("emit", [UPDATE, CLOSE])
def test_early_records_repeated_input(emit):
    run = Sliding(5, 0, emit).pipe(EARLY_REPEATED)
    assert run.gathered() == sets(EARLY_REPEATED_EXPECTED[emit])


EARLY_LARGE = [("E", v, ts) for v, ts in (("1", 0), ("3", 5), ("4", 6), ("2", 3), ("6", 13), ("5", 10), ("7", 4),
                                           ("8", 2), ("9", 15))]
EARLY_LARGE_UPDATE = [
    ("E", 0, "0+1", 0), ("E", 0, "0+1+3", 5), ("E", 0, "0+1+3+4", 6), ("E", 0, "0+1+3+4+2", 6),
    ("E", 0, "0+1+3+4+2+5", 10), ("E", 0, "0+1+3+4+2+5+7", 10), ("E", 0, "0+1+3+4+2+5+7+8", 10),
    ("E", 1, "0+3", 5), ("E", 1, "0+3+4", 6), ("E", 1, "0+3+4+2", 6), ("E", 1, "0+3+4+2+5", 10),
    ("E", 1, "0+3+4+2+5+7", 10), ("E", 1, "0+3+4+2+5+7+8", 10),
    ("E", 3, "0+3+4+2+6", 13), ("E", 3, "0+3+4+2+6+5", 13), ("E", 3, "0+3+4+2+6+5+7", 13),
    ("E", 4, "0+3+4", 6), ("E", 4, "0+3+4+6", 13), ("E", 4, "0+3+4+6+5", 13), ("E", 4, "0+3+4+6+5+7", 13),
    ("E", 5, "0+3+4+6+5", 13), ("E", 5, "0+3+4+6+5+9", 15),
    ("E", 6, "0+4", 6), ("E", 6, "0+4+6", 13), ("E", 6, "0+4+6+5", 13), ("E", 6, "0+4+6+5+9", 15),
    ("E", 7, "0+6", 13), ("E", 7, "0+6+5", 13), ("E", 7, "0+6+5+9", 15),
    ("E", 11, "0+6", 13), ("E", 11, "0+6+9", 15), ("E", 14, "0+9", 15)]


@pytest.mark.parametrize("emit", [UPDATE, CLOSE])
def test_early_records_large_input(emit):
    grace = 1 if emit == CLOSE else 50
    run = Sliding(10, grace, emit, retention(emit)).pipe(EARLY_LARGE)
    expected = ([("E", 0, "0+1+3+4+2", 6), ("E", 1, "0+3+4+2", 6), ("E", 3, "0+3+4+2+6+5+7", 13)]
                if emit == CLOSE else EARLY_LARGE_UPDATE)
    assert run.sorted_by_window() == expected


@pytest.mark.parametrize("emit", [UPDATE, CLOSE])
def test_early_no_grace_period_large_input(emit):
    # grace 0: E@2 (after stream time 13) is dropped, E@10 and E@4 still reach the windows ending at 10+
    run = Sliding(10, 0, emit, 500 if emit == UPDATE else None).pipe(EARLY_LARGE)
    expected = {
        CLOSE: [("E", 0, "0+1+3+4+2", 6), ("E", 1, "0+3+4+2", 6), ("E", 3, "0+3+4+2+6+5+7", 13),
                ("E", 4, "0+3+4+6+5+7", 13)],
        UPDATE: [("E", 0, "0+1", 0), ("E", 0, "0+1+3", 5), ("E", 0, "0+1+3+4", 6), ("E", 0, "0+1+3+4+2", 6),
                 ("E", 1, "0+3", 5), ("E", 1, "0+3+4", 6), ("E", 1, "0+3+4+2", 6),
                 ("E", 3, "0+3+4+2+6", 13), ("E", 3, "0+3+4+2+6+5", 13), ("E", 3, "0+3+4+2+6+5+7", 13),
                 ("E", 4, "0+3+4", 6), ("E", 4, "0+3+4+6", 13), ("E", 4, "0+3+4+6+5", 13),
                 ("E", 4, "0+3+4+6+5+7", 13), ("E", 5, "0+3+4+6+5", 13), ("E", 5, "0+3+4+6+5+9", 15),
                 ("E", 6, "0+4", 6), ("E", 6, "0+4+6", 13), ("E", 6, "0+4+6+5", 13), ("E", 6, "0+4+6+5+9", 15),
                 ("E", 7, "0+6", 13), ("E", 7, "0+6+5", 13), ("E", 7, "0+6+5+9", 15),
                 ("E", 11, "0+6", 13), ("E", 11, "0+6+9", 15), ("E", 14, "0+9", 15)],
    }[emit]
    assert run.sorted_by_window() == expected


# ---------------------------------------------------------------------- no grace, not early
@pytest.mark.parametrize("emit", [UPDATE, CLOSE])
def test_no_grace_period_small_input(emit):
    records = a(("1", 100), ("2", 105), ("3", 106), ("4", 103), ("5", 113), ("6", 110))
    expected = {
        CLOSE: {50: [("0+1", 100)], 55: [("0+1+2", 105)], 56: [("0+1+2+3+4", 106)]},
        UPDATE: {50: [("0+1", 100)], 55: [("0+1+2", 105)], 56: [("0+1+2+3", 106), ("0+1+2+3+4", 106)],
                 63: [("0+1+2+3+4+5", 113), ("0+1+2+3+4+5+6", 113)],
                 101: [("0+2", 105), ("0+2+3", 106), ("0+2+3+4", 106), ("0+2+3+4+5", 113), ("0+2+3+4+5+6", 113)],
                 104: [("0+2+3", 106), ("0+2+3+5", 113), ("0+2+3+5+6", 113)],
                 106: [("0+3", 106), ("0+3+5", 113), ("0+3+5+6", 113)], 107: [("0+5", 113), ("0+5+6", 113)],
                 111: [("0+5", 113)]},
    }[emit]
    assert Sliding(50, 0, emit).pipe(records).gathered() == sets(expected)


@pytest.mark.parametrize("emit", [UPDATE, CLOSE])
def test_no_grace_period_large_input(emit):
    records = [("E", v, ts + 100) for _, v, ts in EARLY_LARGE]
    expected = {
        CLOSE: [("E", 90, "0+1", 100), ("E", 95, "0+1+3", 105), ("E", 96, "0+1+3+4+2", 106),
                ("E", 101, "0+3+4+2", 106), ("E", 103, "0+3+4+2+6+5+7", 113), ("E", 104, "0+3+4+6+5+7", 113)],
        UPDATE: [("E", 90, "0+1", 100), ("E", 95, "0+1+3", 105), ("E", 96, "0+1+3+4", 106),
                 ("E", 96, "0+1+3+4+2", 106), ("E", 101, "0+3", 105), ("E", 101, "0+3+4", 106),
                 ("E", 101, "0+3+4+2", 106), ("E", 103, "0+3+4+2+6", 113), ("E", 103, "0+3+4+2+6+5", 113),
                 ("E", 103, "0+3+4+2+6+5+7", 113), ("E", 104, "0+3+4", 106), ("E", 104, "0+3+4+6", 113),
                 ("E", 104, "0+3+4+6+5", 113), ("E", 104, "0+3+4+6+5+7", 113), ("E", 105, "0+3+4+6+5", 113),
                 ("E", 105, "0+3+4+6+5+9", 115), ("E", 106, "0+4", 106), ("E", 106, "0+4+6", 113),
                 ("E", 106, "0+4+6+5", 113), ("E", 106, "0+4+6+5+9", 115), ("E", 107, "0+6", 113),
                 ("E", 107, "0+6+5", 113), ("E", 107, "0+6+5+9", 115), ("E", 111, "0+6", 113),
                 ("E", 111, "0+6+9", 115), ("E", 114, "0+9", 115)],
    }[emit]
    assert Sliding(10, 0, emit, 500 if emit == UPDATE else None).pipe(records).sorted_by_window() == expected


# ---------------------------------------------------------------------- skipping
@pytest.mark.parametrize("emit", [UPDATE, CLOSE])
def test_a_null_key_is_skipped(emit):
    run = Sliding(10, 100, emit).pipe([(None, "1", 0)])
    assert run.out() == [] and run.dropped() == 1


@pytest.mark.parametrize("emit", [UPDATE, CLOSE])
def test_records_for_windows_expired_by_grace_are_skipped(emit):
    # shouldLogAndMeterWhenSkippingExpiredWindowByGrace: stream time 200, grace 90, so windows ending
    # before 110 are closed; k@100..k@105 and k@15 are dropped (7 records).
    records = [("k", v, ts) for v, ts in (("100", 200), ("0", 100), ("1", 101), ("2", 102), ("3", 103),
                                          ("4", 104), ("5", 105), ("6", 15), ("101", 300), ("102", 400))]
    run = Sliding(10, 90, emit, retention(emit)).pipe(records)
    expected = [("k", 190, "0+100", 200), ("k", 290, "0+101", 300)]
    if emit == UPDATE:
        expected.append(("k", 390, "0+102", 400))
    assert run.out() == expected
    assert run.dropped() == 7


# ---------------------------------------------------------------------- testAggregateRandomInput
RANDOM_INPUT = [("A", 10), ("B", 15), ("C", 16), ("D", 18), ("E", 30), ("F", 40), ("G", 55), ("H", 56), ("I", 58),
                ("J", 58), ("K", 62), ("L", 63), ("M", 63), ("N", 63), ("O", 76), ("P", 77), ("Q", 80), ("R", 2),
                ("S", 3), ("T", 5), ("U", 8)]
RANDOM_EXPECTED_FINAL = {52: ("GHIJK", 62), 53: ("GHIJKLMN", 63), 56: ("HIJKLMN", 63), 57: ("IJKLMN", 63),
                         59: ("KLMN", 63), 63: ("LMN", 63), 66: ("O", 76), 67: ("OP", 77), 70: ("OPQ", 80)}
RANDOM_EXPECTED_UPDATE = {0: ("ARSTU", 10), 3: ("ASTU", 10), 4: ("ATU", 10), 5: ("ABTU", 15), 6: ("ABCU", 16),
                          8: ("ABCDU", 18), 9: ("ABCD", 18), 11: ("BCD", 18), 16: ("CD", 18), 17: ("D", 18),
                          20: ("E", 30), 30: ("EF", 40), 31: ("F", 40), 45: ("G", 55), 46: ("GH", 56),
                          48: ("GHIJ", 58), **RANDOM_EXPECTED_FINAL, 77: ("PQ", 80), 78: ("Q", 80), 171: ("V", 181)}


def sorted_concat(key, value, agg):
    return "".join(sorted(agg + value))


@pytest.mark.parametrize("emit", [UPDATE, CLOSE])
@pytest.mark.parametrize("seed", range(20))
def test_aggregate_random_input_gives_the_same_final_windows_in_any_order(emit, seed):
    # The aggregate sorts its letters, so every window's last value is the same whatever the order.
    records = list(RANDOM_INPUT)
    random.Random(seed).shuffle(records)
    run = Sliding(10, 100, emit, retention(emit), lambda: "", sorted_concat)
    run.pipe([("A", v, ts) for v, ts in records] + [("A", "V", 181)])
    last = {start: (value, ts) for _, start, value, ts in run.out()}
    assert last == (RANDOM_EXPECTED_FINAL if emit == CLOSE else RANDOM_EXPECTED_UPDATE), f"seed {seed}"


# ---------------------------------------------------------------------- emit on close: once per window
@pytest.mark.parametrize("seed", range(10))
def test_emit_on_close_forwards_each_window_once_with_the_last_update_value(seed):
    """Against the update run of the same input: every closed window is emitted once, with the last
    value the update run forwarded for it, in the order the windows close."""
    rnd = random.Random(seed)
    records = [("k" + str(rnd.randrange(2)), str(i), rnd.randrange(0, 200)) for i in range(40)]
    records.sort(key=lambda r: r[2] + rnd.randrange(-15, 15))
    records.append(("k0", "end", 1_000))
    d, grace = 10, 20
    update = Sliding(d, grace, UPDATE, 10_000).pipe(records)
    close = Sliding(d, grace, CLOSE, 10_000).pipe(records)
    last = {}
    for key, start, value, ts in update.out():
        last[(key, start)] = (value, ts)
    emitted = [((key, start), (value, ts)) for key, start, value, ts in close.out()]
    assert len({w for w, _ in emitted}) == len(emitted)
    assert dict(emitted) == {w: v for w, v in last.items() if w[1] + d < 1_000 - grace}

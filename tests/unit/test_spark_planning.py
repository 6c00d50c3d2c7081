"""The Spark source's offset arithmetic: rate limits, task slices, the checkpoint's JSON form."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_source.options import SourceOptions
from spark_source.planning import Slice, align_to_time, available, from_json, rate_limit, slices, to_json


def test_json_round_trip_uses_the_kafka_sources_shape():
    offsets = {("a", 0): 5, ("a", 1): 7, ("b", 0): 0}
    assert to_json(offsets) == {"a": {"0": 5, "1": 7}, "b": {"0": 0}}
    assert from_json(to_json(offsets)) == offsets


def test_rate_limit_shares_the_budget_by_backlog_and_never_exceeds_it():
    start = {("t", 0): 0, ("t", 1): 100, ("t", 2): 50}
    latest = {("t", 0): 900, ("t", 1): 200, ("t", 2): 50}
    end = rate_limit(start, latest, 100)
    assert available(start, end) <= 100
    assert end[("t", 0)] == 90 and end[("t", 1)] == 110 and end[("t", 2)] == 50
    assert rate_limit(start, latest, 10_000) == latest


def test_every_partition_with_a_backlog_moves():
    start = {("t", p): 0 for p in range(5)}
    latest = {("t", 0): 1000, **{("t", p): 1 for p in range(1, 5)}}
    end = rate_limit(start, latest, 3)
    # The big backlog gets its proportional share (floor(3 * 1000 / 1004) = 2); each small one, whose
    # share rounds down to 0, still moves by one.
    assert end == {("t", 0): 2, **{("t", p): 1 for p in range(1, 5)}}


def test_a_share_is_spark_s_double_floored():
    # Spark's rateLimit: limit * (size / total) as doubles; 100 * (58 / 200) is 28.999999999999996
    start = {("t", 0): 0, ("t", 1): 0}
    assert rate_limit(start, {("t", 0): 58, ("t", 1): 142}, 100) == {("t", 0): 28, ("t", 1): 71}


def test_unlimited_topics_are_read_to_their_end_outside_the_budget():
    start = {("facts", 0): 0, ("facts", 1): 0, ("dims", 0): 0}
    latest = {("facts", 0): 500, ("facts", 1): 500, ("dims", 0): 300}
    end = rate_limit(start, latest, 100, frozenset({"dims"}))
    assert end == {("facts", 0): 50, ("facts", 1): 50, ("dims", 0): 300}
    # without the exemption the small topic takes its share of the same budget
    assert rate_limit(start, latest, 100)[("dims", 0)] == 23
    # a budget the limited topics' backlog fits in reads everything
    assert rate_limit(start, latest, 1_000, frozenset({"dims"})) == latest


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.tuples(st.sampled_from("abc"), st.integers(0, 3)),
                       st.tuples(st.integers(0, 50), st.integers(0, 500)), min_size=1),
       st.integers(1, 400), st.sets(st.sampled_from("abc")))
def test_a_rate_limit_keeps_its_budget_and_moves_every_backlog(parts, budget, unlimited):
    start = {tp: s for tp, (s, _) in parts.items()}
    latest = {tp: s + n for tp, (s, n) in parts.items()}
    end = rate_limit(start, latest, budget, frozenset(unlimited))
    assert set(end) == set(latest) and all(start[tp] <= end[tp] <= latest[tp] for tp in end)
    assert all(end[tp] == latest[tp] for tp in end if tp[0] in unlimited)
    limited = [tp for tp in end if tp[0] not in unlimited]
    backlog = [tp for tp in limited if latest[tp] > start[tp]]
    assert all(end[tp] > start[tp] for tp in backlog)
    # the shares, floored, stay within the budget; a backlog whose share rounds to 0 still moves by one
    moved = [end[tp] - start[tp] for tp in limited]
    assert sum(n for n in moved if n > 1) <= budget and sum(moved) <= budget + len(backlog), (moved, budget)
    if sum(latest[tp] - start[tp] for tp in limited) <= budget:
        assert end == latest


def test_a_cut_aligned_to_time_stops_every_partition_before_the_pivots_first_unread_timestamp():
    start = {("clicks", 0): 0, ("users", 0): 0, ("users", 1): 5}
    end = {("clicks", 0): 8, ("users", 0): 2, ("users", 1): 6}       # the budget's cut
    # users-0's first unread record (offset 2) is the oldest cut one: the pivot keeps its cut
    firsts = {("clicks", 0): 3, ("users", 0): 1, ("users", 1): None}
    assert align_to_time(start, end, firsts, ("users", 0)) == {("clicks", 0): 3, ("users", 0): 2, ("users", 1): 6}
    # a first offset before the batch's start reads nothing there; never past the budget's cut
    assert align_to_time(start, end, {("clicks", 0): 20, ("users", 1): 0}, ("users", 0)) == end | {("users", 1): 5}


def test_slices_cover_the_ranges_and_honour_min_partitions():
    start, end = {("t", 0): 0, ("t", 1): 10}, {("t", 0): 100, ("t", 1): 10, ("t", 2): 5}
    plain = slices(start, end)
    assert plain == [Slice("t", 0, 0, 100)]  # nothing new in 1; 2 has no start (new partitions get one first)
    cut = slices(start, end, min_partitions=4)
    assert len(cut) >= 4
    covered = sorted(o for s in cut for o in range(s.start, s.until))
    assert covered == list(range(100))


def test_min_partitions_splits_only_big_ranges_into_what_small_ones_leave_as_spark_does():
    start = {("s", p): 0 for p in range(4)}
    end = {("s", 0): 100, ("s", 1): 1, ("s", 2): 1, ("s", 3): 1}
    cut = slices(start, end, min_partitions=10)
    # the three small ranges stay whole; the big one takes the other 7 tasks, in even pieces
    assert [(s.partition, s.until - s.start) for s in cut] == [(0, 14)] * 5 + [(0, 15)] * 2 + [(1, 1), (2, 1), (3, 1)]
    assert sorted(o for s in cut if s.partition == 0 for o in range(s.start, s.until)) == list(range(100))
    # maxRecordsPerPartition cuts into ceil(size / max) pieces, even ones (Spark's getDividedPartition)
    assert [s.until - s.start for s in slices({("t", 0): 0}, {("t", 0): 10}, max_records=3)] == [2, 2, 3, 3]


@pytest.mark.parametrize("options, name", [
    ({}, "riverlog.bootstrap.servers"),
    ({"riverlog.bootstrap.servers": "h:1"}, "subscribe"),
    ({"riverlog.bootstrap.servers": "h:1", "subscribe": "a", "assign": '{"a": [0]}'}, "subscribe"),
    ({"riverlog.bootstrap.servers": "h:1", "subscribe": "a", "maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger"),
    ({"riverlog.bootstrap.servers": "h:1", "subscribePattern": "(", }, "subscribePattern"),
    ({"riverlog.bootstrap.servers": "h:1", "subscribe": "a", "maxTriggerDelay": "soon"}, "maxTriggerDelay"),
    ({"riverlog.bootstrap.servers": "h:1", "subscribe": "a", "unlimitedTopics": "a"}, "unlimitedTopics"),
    ({"riverlog.bootstrap.servers": "h:1", "subscribe": "a", "alignByTimestamp": "true"}, "alignByTimestamp"),
    ({"riverlog.bootstrap.servers": "h:1", "subscribe": "a", "maxOffsetsPerTrigger": "5", "unlimitedTopics": "b"},
     "unlimitedTopics"),
])
def test_bad_options_name_the_option(options, name):
    with pytest.raises(Exception, match=name):
        SourceOptions.parse(options, streaming=True)


def test_batch_and_stream_defaults_differ_as_in_spark():
    base = {"riverlog.bootstrap.servers": "h:1", "subscribe": "a"}
    assert SourceOptions.parse(base, streaming=True).starting == "latest"
    assert SourceOptions.parse(base, streaming=False).starting == "earliest"
    with pytest.raises(Exception, match="endingOffsets"):
        SourceOptions.parse({**base, "endingOffsets": "latest"}, streaming=True)


def test_a_budget_equal_to_the_backlog_is_still_shared_in_doubles_as_spark_does():
    # Spark's rateLimit prorates whenever there is a backlog: 22 * (15 / 22) is just below 15 in doubles,
    # so a budget equal to the backlog leaves one offset of t-0 for the next batch (no shortcut to latest).
    start = {("t", 0): 0, ("t", 1): 0}
    assert rate_limit(start, {("t", 0): 15, ("t", 1): 7}, 22) == {("t", 0): 14, ("t", 1): 7}
    # with room to spare the batch reads everything
    assert rate_limit(start, {("t", 0): 15, ("t", 1): 7}, 23) == {("t", 0): 15, ("t", 1): 7}

"""Late-record boundaries for every window type. Stream time S is set by another key's record, then
key A's record arrives. Each row: S relative to the window's end, accepted or dropped, exact output."""
import pytest

from streams.window_aggregate import (ON_WINDOW_CLOSE, SessionWindowAggregate, SlidingWindowAggregate,
                                      TimeWindowAggregate, count_functions)
from streams.windows import SessionWindows, SlidingWindows, TimeWindows
from tests.streams._windowing import Run

C = count_functions()


def late_a(proc, stream_time, ts):
    run = Run(proc)
    run.send("B", "b", stream_time)
    return run.send("A", "a", ts), run.dropped()


# TimeWindows [80, 90), grace 5. KStreamWindowAggregate: a window is updated iff
# windowEnd > observedStreamTime - grace, i.e. dropped once stream time >= end + grace.
@pytest.mark.parametrize("stream_time, accepted", [
    (89, True),    # end - 1
    (90, True),    # end: still within grace
    (94, True),    # end + grace - 1
    (95, False),   # end + grace: 90 > 95 - 5 is false
])
def test_time_window_boundaries(stream_time, accepted):
    out, dropped = late_a(TimeWindowAggregate("s", TimeWindows.ofSizeAndGrace(10, 5), C.initializer, C.aggregator),
                          stream_time, 85)
    assert out == ([("A", 80, 90, 1, 0, 85)] if accepted else [])
    assert dropped == (0 if accepted else 1)


@pytest.mark.parametrize("stream_time, accepted", [(89, True), (90, False)])
def test_time_window_boundaries_without_grace(stream_time, accepted):
    out, _ = late_a(TimeWindowAggregate("s", TimeWindows.ofSizeWithNoGrace(10), C.initializer, C.aggregator),
                    stream_time, 85)
    assert out == ([("A", 80, 90, 1, 0, 85)] if accepted else [])


def test_hopping_window_boundary_drops_only_the_closed_windows():
    # windows of 85 with size 10, advance 5: [80, 90) and [85, 95); grace 0, stream time 90
    out, dropped = late_a(TimeWindowAggregate("s", TimeWindows.ofSizeWithNoGrace(10).advanceBy(5),
                                              C.initializer, C.aggregator), 90, 85)
    assert out == [("A", 85, 95, 1, 0, 85)] and dropped == 1


# SlidingWindows, difference 10, grace 5: the record's left window [75, 85] has an inclusive end.
# KStreamSlidingWindowAggregate: the record is dropped iff ts + d < streamTime - grace; a window is
# updated iff windowEnd >= streamTime - grace: so accepted up to and including end + grace.
@pytest.mark.parametrize("stream_time, accepted", [
    (84, True),    # end - 1
    (85, True),    # end
    (89, True),    # end + grace - 1
    (90, True),    # end + grace: inclusive end, 85 >= 90 - 5
    (91, False),   # end + grace + 1
])
def test_sliding_window_boundaries(stream_time, accepted):
    out, dropped = late_a(SlidingWindowAggregate("s", SlidingWindows.ofTimeDifferenceAndGrace(10, 5),
                                                 C.initializer, C.aggregator), stream_time, 85)
    assert out == ([("A", 75, 85, 1, 0, 85)] if accepted else [])
    assert dropped == (0 if accepted else 1)


# SessionWindows gap 10, grace 5: a session [85, 85] is dropped iff end < streamTime - grace - gap
# (KStreamSessionWindowAggregate), i.e. it can still be written until stream time = end + gap + grace.
@pytest.mark.parametrize("stream_time, accepted", [
    (94, True),    # end + gap - 1
    (95, True),    # end + gap
    (99, True),    # end + gap + grace - 1
    (100, True),   # end + gap + grace: 85 < 100 - 15 is false
    (101, False),
])
def test_session_window_boundaries(stream_time, accepted):
    out, dropped = late_a(SessionWindowAggregate("s", SessionWindows.ofInactivityGapAndGrace(10, 5),
                                                 C.initializer, C.aggregator, C.merger), stream_time, 85)
    assert out == ([("A", 85, 85, 1, None, 85)] if accepted else [])
    assert dropped == (0 if accepted else 1)


# Emit-on-close (KIP-825): a window is emitted once, when the close time passes its end:
# time windows when end <= streamTime - grace; sliding and session windows when end < streamTime - grace
# (- gap for sessions).
@pytest.mark.parametrize("stream_time, emitted", [(94, False), (95, True)])
def test_time_window_emitted_on_close(stream_time, emitted):
    run = Run(TimeWindowAggregate("s", TimeWindows.ofSizeAndGrace(10, 5), C.initializer, C.aggregator,
                                  emit=ON_WINDOW_CLOSE))
    assert run.send("A", "a", 85) == []
    assert run.send("B", "b", stream_time) == ([("A", 80, 90, 1, None, 85)] if emitted else [])
    assert run.send("B", "b", stream_time) == []      # only once


@pytest.mark.parametrize("stream_time, emitted", [(90, False), (91, True)])
def test_sliding_window_emitted_on_close(stream_time, emitted):
    run = Run(SlidingWindowAggregate("s", SlidingWindows.ofTimeDifferenceAndGrace(10, 5), C.initializer,
                                     C.aggregator, emit=ON_WINDOW_CLOSE))
    run.send("A", "a", 85)
    assert run.send("B", "b", stream_time) == ([("A", 75, 85, 1, None, 85)] if emitted else [])


@pytest.mark.parametrize("stream_time, emitted", [(100, False), (101, True)])
def test_session_window_emitted_on_close(stream_time, emitted):
    run = Run(SessionWindowAggregate("s", SessionWindows.ofInactivityGapAndGrace(10, 5), C.initializer,
                                     C.aggregator, C.merger, emit=ON_WINDOW_CLOSE))
    run.send("A", "a", 85)
    assert run.send("B", "b", stream_time) == ([("A", 85, 85, 1, None, 85)] if emitted else [])


def test_time_window_closed_and_expired_by_one_jump_is_not_emitted_as_in_kafka():
    # The time-ordered store hides windows with start < storeTime - retention (retention = size +
    # grace = 10); storeTime jumps to 20 so window 0 is gone before the emit fetch. A longer
    # retention keeps it.
    run = Run(TimeWindowAggregate("s", TimeWindows.ofSizeWithNoGrace(10), C.initializer, C.aggregator,
                                  emit=ON_WINDOW_CLOSE))
    run.send("A", "a", 5)
    assert run.send("A", "a", 25) == []

    class Longer(TimeWindowAggregate):
        def store_spec(self, retention=None):
            return super().store_spec(30)
    run = Run(Longer("s", TimeWindows.ofSizeWithNoGrace(10), C.initializer, C.aggregator, emit=ON_WINDOW_CLOSE))
    run.send("A", "a", 5)
    assert run.send("A", "a", 25) == [("A", 0, 10, 1, None, 5)]

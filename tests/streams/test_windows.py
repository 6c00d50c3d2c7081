from datetime import timedelta

import pytest

from streams.errors import TopologyError
from streams.windows import JoinWindows, SessionWindows, SlidingWindows, TimeWindows, duration_ms


def test_tumbling_windows_for_a_timestamp():
    w = TimeWindows.ofSizeWithNoGrace(10)
    assert w.windowsFor(0) == {0: 10}
    assert w.windowsFor(9) == {0: 10}
    assert w.windowsFor(10) == {10: 20}
    assert (w.size(), w.gracePeriodMs(), w.retentionMs()) == (10, 0, 10)


def test_hopping_windows_for_a_timestamp():
    w = TimeWindows.ofSizeAndGrace(10, 3).advanceBy(4)
    assert w.windowsFor(21) == {12: 22, 16: 26, 20: 30}
    assert w.windowsFor(3) == {0: 10}                       # no window starts before 0
    assert w.windowsFor(12) == {4: 14, 8: 18, 12: 22}
    assert w.retentionMs() == 13 and w.gracePeriodMs() == 3


def test_windows_are_immutable_values():
    w = TimeWindows.ofSizeWithNoGrace("1 minute")
    assert w.advanceBy("30 seconds") != w and w.advanceMs == 60_000
    assert w == TimeWindows.ofSizeAndGrace(60_000, 0)
    with pytest.raises(AttributeError):
        w.sizeMs = 5


@pytest.mark.parametrize("make, argument", [
    (lambda: TimeWindows.ofSizeWithNoGrace(0), "size"),
    (lambda: TimeWindows.ofSizeWithNoGrace(-1), "size"),
    (lambda: TimeWindows.ofSizeAndGrace(10, -1), "afterWindowEnd"),
    (lambda: TimeWindows.ofSizeWithNoGrace(10).advanceBy(11), "advance"),
    (lambda: TimeWindows.ofSizeWithNoGrace(10).advanceBy(0), "advance"),
    (lambda: SlidingWindows.ofTimeDifferenceWithNoGrace(-1), "timeDifference"),
    (lambda: SlidingWindows.ofTimeDifferenceAndGrace(10, -1), "afterWindowEnd"),
    (lambda: SessionWindows.ofInactivityGapWithNoGrace(0), "inactivityGap"),
    (lambda: SessionWindows.ofInactivityGapAndGrace(5, "-1 second"), "afterWindowEnd"),
    (lambda: JoinWindows.ofTimeDifferenceWithNoGrace(5).before(-6), "timeDifference"),
    (lambda: JoinWindows.ofTimeDifferenceAndGrace(5, -1), "afterWindowEnd"),
    (lambda: TimeWindows.ofSizeWithNoGrace("ten seconds"), "size"),
    (lambda: TimeWindows.ofSizeWithNoGrace(1.5), "size"),
])
def test_invalid_arguments_name_the_argument(make, argument):
    with pytest.raises(TopologyError) as e:
        make()
    assert e.value.details["argument"] == argument
    assert argument in str(e.value)


def test_sliding_windows_allow_a_zero_difference_as_kafka():
    w = SlidingWindows.ofTimeDifferenceAndGrace("10 seconds", "1 second")
    assert (w.timeDifferenceMs(), w.gracePeriodMs(), w.retentionMs()) == (10_000, 1_000, 21_000)
    assert SlidingWindows.ofTimeDifferenceWithNoGrace(0).timeDifferenceMs() == 0


def test_session_and_join_windows():
    s = SessionWindows.ofInactivityGapAndGrace(timedelta(minutes=5), "30 seconds")
    assert (s.inactivityGap(), s.gracePeriodMs(), s.retentionMs(), s.closeGraceMs()) == (300_000, 30_000, 330_000, 330_000)
    j = JoinWindows.ofTimeDifferenceAndGrace(10, 2).before(3)
    assert (j.beforeMs, j.afterMs, j.gracePeriodMs(), j.size()) == (3, 10, 2, 13)
    assert JoinWindows.ofTimeDifferenceWithNoGrace(10).after(0).size() == 10
    with pytest.raises(TopologyError):
        j.windowsFor(5)


@pytest.mark.parametrize("text, ms", [
    ("500 milliseconds", 500), ("1 millisecond", 1), ("10 seconds", 10_000), ("1 second", 1_000),
    ("1 minute", 60_000), ("2 minutes", 120_000), ("1 hour", 3_600_000), ("1 day", 86_400_000),
    ("1 hour 30 minutes", 5_400_000), ("interval 2 seconds", 2_000), ("1.5 seconds", 1_500),
    ("  3 MINUTES ", 180_000), ("1000 microseconds", 1), ("1 week", 604_800_000), ("10s", 10_000),
])
def test_duration_strings(text, ms):
    assert duration_ms(text) == ms


def test_durations_as_int_and_timedelta():
    assert duration_ms(42) == 42
    assert duration_ms(timedelta(seconds=1, milliseconds=5)) == 1_005
    for bad in (timedelta(microseconds=1), "1 microsecond", "", "5", True, None, 1.0):
        with pytest.raises(TopologyError):
            duration_ms(bad, "size")

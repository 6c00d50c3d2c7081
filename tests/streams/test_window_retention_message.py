"""A ``Materialized.withRetention`` shorter than the windows need is refused when the aggregation is
defined, with the text of Kafka's ``WindowStoreMaterializer``, ``SlidingWindowStoreMaterializer``
and ``SessionStoreMaterializer`` (store name, then the windows' numbers and the retention)."""
from __future__ import annotations

import re

import pytest

from streams import Consumed, Materialized, Serdes, StreamsBuilder
from streams.errors import TopologyError
from streams.windows import SessionWindows, SlidingWindows, TimeWindows

pytestmark = pytest.mark.unit
S = Serdes.String()


def _grouped():
    return StreamsBuilder().stream("input", Consumed.with_(S, S)).groupByKey()


def _refused(aggregate, message):
    """``message``: the whole text, or a pattern for a text with a drawn name in it."""
    pattern = message.pattern if isinstance(message, re.Pattern) else re.escape(message)
    with pytest.raises(TopologyError, match="^" + pattern + "$"):
        aggregate()


def test_time_windows():
    w = _grouped().windowedBy(TimeWindows.ofSizeAndGrace(10_000, 1_000))
    _refused(lambda: w.count(materialized=Materialized.as_("w").withRetention(5_000)),
             "The retention period of the window store w must be no smaller than its window size plus the grace "
             "period. Got size=[10000], grace=[1000], retention=[5000]")


def test_sliding_windows():
    w = _grouped().windowedBy(SlidingWindows.ofTimeDifferenceAndGrace(100, 7))
    _refused(lambda: w.count(materialized=Materialized.as_("slide").withRetention(206)),
             "The retention period of the window store slide must be no smaller than 2 * time difference plus the "
             "grace period. Got time difference=[100], grace=[7], retention=[206]")


def test_session_windows():
    w = _grouped().windowedBy(SessionWindows.ofInactivityGapAndGrace(50, 5))
    _refused(lambda: w.reduce(lambda a, v: a + v, materialized=Materialized.as_("sess").withRetention(54)),
             "The retention period of the session store sess must be no smaller than the session inactivity gap "
             "plus the grace period. Got gap=[50], grace=[5], retention=[54]")


def test_an_unnamed_store_is_named_by_the_name_it_draws():
    """Kafka's ``MaterializedInternal`` names the store before the materializer checks it."""
    w = _grouped().windowedBy(TimeWindows.ofSizeAndGrace(10, 0))
    _refused(lambda: w.aggregate(lambda: "", lambda k, v, a: a + v, materialized=Materialized.with_(S, S)
                                 .withRetention(9)),
             "The retention period of the window store KSTREAM-AGGREGATE-STATE-STORE-0000000001 must be no smaller "
             "than its window size plus the grace period. Got size=[10], grace=[0], retention=[9]")


def test_a_retention_of_exactly_size_plus_grace_is_taken():
    w = _grouped().windowedBy(TimeWindows.ofSizeAndGrace(10, 3))
    assert w.count(materialized=Materialized.as_("ok").withRetention(13)).queryableStoreName() == "ok"


def test_a_windowed_cogroup_names_its_store():
    c = _grouped().cogroup(lambda k, v, a: a + v).windowedBy(SessionWindows.ofInactivityGapWithNoGrace(100))
    _refused(lambda: c.aggregate(lambda: "", lambda k, a, b: a + b, Materialized.as_("s").withRetention(99)),
             "The retention period of the session store s must be no smaller than the session inactivity gap "
             "plus the grace period. Got gap=[100], grace=[0], retention=[99]")


def test_an_unnamed_windowed_cogroup_store_is_named_by_the_name_it_draws():
    c = _grouped().cogroup(lambda k, v, a: a + v).windowedBy(TimeWindows.ofSizeAndGrace(1000, 100))
    _refused(lambda: c.aggregate(lambda: "", Materialized.with_(Serdes.String(), Serdes.String()).withRetention(10)),
             re.compile(r"The retention period of the window store COGROUPKSTREAM-AGGREGATE-STATE-STORE-\d{10} must "
                        r"be no smaller than its window size plus the grace period\. Got size=\[1000\], "
                        r"grace=\[100\], retention=\[10\]"))

"""What SQL sees of a record in the Python evaluator: Spark's column names and types."""
from datetime import datetime, timezone

import pytest

from streams import Consumed, Produced, Serdes, StreamsBuilder, TimeWindows
from streams.record import Record, Windowed
from streams.testing import TopologyTestDriver

pytestmark = pytest.mark.unit


def test_headers_and_windowed_keys_are_structs():
    row = Record(Windowed("ann", 60_000, 120_000), 3, 61_000, (("trace", b"x"),)).row("t", 0, 7)
    assert row["key"] == {"key": "ann", "start": datetime(1970, 1, 1, 0, 1, tzinfo=timezone.utc),
                          "end": datetime(1970, 1, 1, 0, 2, tzinfo=timezone.utc)}
    assert row["headers"] == [{"key": "trace", "value": b"x"}]
    assert (row["topic"], row["partition"], row["offset"]) == ("t", 0, 7)


def test_sql_reads_a_windowed_key_and_headers_travel_to_the_output():
    b = StreamsBuilder()
    (b.stream("in", Consumed.with_(Serdes.String(), Serdes.String()))
      .groupByKey().windowedBy(TimeWindows.ofSizeWithNoGrace(60_000)).count()
      .toStream().selectKey("concat(key.key, '@', date_format(key.start, 'HH:mm'))")
      .to("out", Produced.with_(Serdes.String(), Serdes.Long())))
    d = TopologyTestDriver(b.build())
    i = d.createInputTopic("in", Serdes.String(), Serdes.String())
    i.pipeInput("ann", "a", 61_000, headers=(("h", b"1"),))
    out = d.createOutputTopic("out", Serdes.String(), Serdes.Long()).readRecordsToList()
    assert [(r.key, r.value, r.headers) for r in out] == [("ann@00:01", 1, (("h", b"1"),))]

"""``streams.testing`` against Kafka's ``streams/test-utils``: the ``TestInputTopic`` overloads and
clock (``TestInputTopic.java``), ``TestOutputTopic`` reads and their errors (``TestOutputTopic.java``,
``TopologyTestDriver.readRecord``), and ``TestRecord``'s constructors (``test/TestRecord.java``), as
``TestTopicsTest`` and ``TopologyTestDriverTest`` check them."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from broker.errors import RiverlogError
from streams import testing
from streams.builder import StreamsBuilder
from streams.errors import IllegalStateError
from streams.parameters import Consumed, Produced
from streams.serdes import Serdes
from streams.testing import KeyValue, TestRecord, TopologyTestDriver

pytestmark = pytest.mark.unit

S, L = Serdes.String(), Serdes.Long()
T0 = datetime(2024, 5, 1, tzinfo=timezone.utc)
T0_MS = 1_714_521_600_000


def passthrough(out_topic="out"):
    b = StreamsBuilder()
    b.stream("in", Consumed.with_(S, S)).to(out_topic, Produced.with_(S, S))
    return TopologyTestDriver(b.build(), {"application.id": "t"})


def records(d, topic="out"):
    return [(r.key, r.value, r.timestamp) for r in d.createOutputTopic(topic, S, S).readRecordsToList()]


# ---------------------------------------------------------------------- TestInputTopic overloads
def test_one_argument_is_a_value_with_a_null_key():
    """``pipeInput(V value)`` / ``pipeValueList``: the key is null (TestTopicsTest.testValue)."""
    d = passthrough()
    d.createInputTopic("in", S, S).pipeInput("Hello")
    assert records(d) == [(None, "Hello", 0)]


def test_a_value_and_a_datetime_are_a_value_with_its_timestamp():
    """``pipeInput(V value, Instant timestamp)``."""
    d = passthrough()
    d.createInputTopic("in", S, S).pipeInput("Hello", T0)
    assert records(d) == [(None, "Hello", T0_MS)]


def test_key_value_and_timestamp_forms_and_keywords():
    d = passthrough()
    i = d.createInputTopic("in", S, S)
    i.pipeInput("k1", "v1", 5)
    i.pipeInput("k2", "v2", T0 + timedelta(milliseconds=7))
    i.pipeInput(key="k3", value="v3", timestamp=9)
    i.pipeInput("k4", "v4", 11, [("h", b"1")])
    assert records(d) == [("k1", "v1", 5), ("k2", "v2", T0_MS + 7), ("k3", "v3", 9), ("k4", "v4", 11)]
    with pytest.raises(TypeError, match="timestamp is given twice"):
        i.pipeInput("k", "v", 1, timestamp=2)


def test_pipe_value_list_with_start_and_advance():
    """``pipeValueList(values, startTimestamp, advance)`` (TestTopicsTest.testValueListWithTime)."""
    d = passthrough()
    d.createInputTopic("in", S, S).pipeValueList(["a", "b", "c"], T0, timedelta(milliseconds=1001))
    assert records(d) == [(None, "a", T0_MS), (None, "b", T0_MS + 1001), (None, "c", T0_MS + 2002)]


def test_the_topic_clock_advances_by_exact_milliseconds():
    """``createInputTopic(topic, ks, vs, startTimestamp, autoAdvance)``: each record without a
    timestamp takes the clock, which then moves by exactly ``autoAdvance`` (1001 ms, not 1000)."""
    d = passthrough()
    i = d.createInputTopic("in", S, S, T0, timedelta(milliseconds=1001))
    i.pipeInput("k", "a")
    i.pipeKeyValueList([("k", "b"), ("k", "c")])
    i.advanceTime(timedelta(milliseconds=3))
    i.pipeRecordList([TestRecord("k", "d"), TestRecord("k", "e", 1)])
    assert records(d) == [("k", "a", T0_MS), ("k", "b", T0_MS + 1001), ("k", "c", T0_MS + 2002),
                          ("k", "d", T0_MS + 3006), ("k", "e", 1)]


@pytest.mark.parametrize("call", [
    lambda d: d.createInputTopic("in", S, S).advanceTime(timedelta(milliseconds=-1)),
    lambda d: d.createInputTopic("in", S, S, 0, timedelta(milliseconds=-1)),
    lambda d: d.createInputTopic("in", S, S).pipeKeyValueList([("k", "v")], 0, -5),
    lambda d: d.advanceWallClockTime(-1),
], ids=["advanceTime", "autoAdvance", "pipeKeyValueList", "advanceWallClockTime"])
def test_a_negative_duration_is_refused(call):
    """Kafka: "advance must be positive" / "autoAdvance must be positive" (IllegalArgumentException)."""
    d = passthrough()
    with pytest.raises(ValueError, match="must not be negative"):
        call(d)
    assert records(d) == []


# ---------------------------------------------------------------------- TestOutputTopic errors
def test_reading_an_empty_topic_raises_no_such_element():
    """``readRecord`` on a drained topic: Kafka's ``NoSuchElementException("Empty topic: ...")``."""
    d = passthrough()
    d.createInputTopic("in", S, S).pipeInput("k", "v", 1)
    out = d.createOutputTopic("out", S, S)
    assert out.readKeyValue() == KeyValue("k", "v")
    assert out.isEmpty() and out.getQueueSize() == 0
    with pytest.raises(testing.NoSuchElementError, match="Empty topic: 'out'") as e:
        out.readValue()
    assert isinstance(e.value, IndexError) and isinstance(e.value, RiverlogError)   # a typed error, with a code


def test_reading_a_topic_nothing_was_written_to_names_the_sinks():
    """Kafka's "Uninitialized topic" (and its warning for a topic no sink names)."""
    d = passthrough()
    d.createInputTopic("in", S, S).pipeInput("k", "v", 1)
    typo = d.createOutputTopic("otu", S, S)
    assert typo.isEmpty()
    with pytest.raises(testing.NoSuchElementError, match=r"Uninitialized topic: 'otu'.*sinks write to \['out'\]"):
        typo.readRecord()


def test_output_topics_of_one_topic_share_the_drivers_read_position():
    """Kafka's driver keeps one queue per output topic: a second ``createOutputTopic`` of the same
    topic reads on where the first stopped (TopologyTestDriver.getRecordsQueue)."""
    d = passthrough()
    d.createInputTopic("in", S, S).pipeKeyValueList([("a", "1"), ("b", "2"), ("c", "3")])
    first = d.createOutputTopic("out", S, S)
    assert first.readKeyValue() == KeyValue("a", "1")
    second = d.createOutputTopic("out", S, S)
    assert second.getQueueSize() == 2 and first.getQueueSize() == 2
    assert second.readKeyValuesToList() == [KeyValue("b", "2"), KeyValue("c", "3")]
    assert first.isEmpty()


def test_read_key_values_to_map_refuses_a_null_key_as_kafkas_illegal_state():
    d = passthrough()
    i = d.createInputTopic("in", S, S)
    i.pipeInput("a", "1", 1)
    i.pipeInput("2")
    out = d.createOutputTopic("out", S, S)
    with pytest.raises(IllegalStateError, match="Null keys not allowed with readKeyValuesToMap"):
        out.readKeyValuesToMap()


# ---------------------------------------------------------------------- TestRecord
def test_test_record_constructors_follow_kafkas():
    assert (TestRecord("v").key, TestRecord("v").value) == (None, "v")
    kafka_order = TestRecord("k", "v", [("h", b"1")], T0)        # (key, value, headers, recordTime)
    assert kafka_order == TestRecord("k", "v", T0_MS, (("h", b"1"),))
    assert TestRecord("k", "v", [("h", b"1")]).timestamp is None    # (key, value, headers)
    assert kafka_order.getHeaders() == (("h", b"1"),)
    assert kafka_order.getRecordTime() == T0 and kafka_order.timestamp == T0_MS
    assert TestRecord("k", "v").getRecordTime() is None
    with pytest.raises(ValueError, match="Invalid timestamp: -1"):
        TestRecord("k", "v", -1)


def test_output_records_carry_the_input_headers_and_equal_an_expected_test_record():
    d = passthrough()
    d.createInputTopic("in", S, S).pipeInput(TestRecord("k", "v", [("h", b"1")], T0))
    assert d.createOutputTopic("out", S, S).readRecord() == TestRecord("k", "v", T0, [("h", b"1")])


def test_close_warns_of_records_still_waiting_under_max_task_idle_ms(caplog):
    """``TopologyTestDriver#close``: Kafka's warning names ``max.task.idle.ms`` when piped records
    never reached the topology (a join whose other input partition stayed empty)."""
    b = StreamsBuilder()
    table = b.table("t", Consumed.with_(S, S))
    b.stream("s", Consumed.with_(S, S)).join(table, lambda v, tv: v + tv).to("out", Produced.with_(S, S))
    d = TopologyTestDriver(b.build(), {"application.id": "t", "max.task.idle.ms": 1_000})
    d.createInputTopic("s", S, S).pipeInput("k", "v", 1)
    with caplog.at_level("WARNING", logger="streams.testing"):
        d.close()
    assert "cannot be processed due to the max.task.idle.ms configuration" in caplog.text
    d2 = passthrough()
    d2.createInputTopic("in", S, S).pipeInput("k", "v", 1)
    caplog.clear()
    with caplog.at_level("WARNING", logger="streams.testing"):
        d2.close()
    assert "max.task.idle.ms" not in caplog.text


def test_a_test_record_is_piped_alone():
    d = passthrough()
    with pytest.raises(TypeError, match="takes the record alone"):
        d.createInputTopic("in", S, S).pipeInput(TestRecord("k", "v"), 5)
    assert records(d) == []

"""Serdes against Kafka's own: the windowed key formats of ``WindowedSerdes`` (``WindowKeySchema``
and ``SessionKeySchema``) and the serde class names Kafka's configs hold. The expected bytes are
built from Kafka's layout (``ByteBuffer.put(key).putLong(start)``; sessions ``putLong(end)
.putLong(start)``), not from Riverlog's writer."""
from __future__ import annotations

import struct

import pytest

from broker.errors import InvalidConfigError
from streams.builder import StreamsBuilder
from streams.parameters import Consumed, Produced
from streams.record import Windowed
from streams.serdes import Serdes, SerializationError, WindowedSerdes, serde_of
from streams.testing import TopologyTestDriver
from streams.windows import SessionWindows, SlidingWindows, TimeWindows

BASE = 1_700_000_000_000


def _long(x: int) -> bytes:
    return struct.pack(">q", x)


def test_time_windowed_key_is_the_inner_bytes_then_the_8_byte_start():
    serde = WindowedSerdes.timeWindowedSerdeFrom(Serdes.String(), 10_000)
    data = serde.serialize(Windowed("ann", BASE, BASE + 10_000), "out")
    assert data == b"ann" + _long(BASE)
    assert serde.deserialize(data, "out") == Windowed("ann", BASE, BASE + 10_000)
    long_keyed = WindowedSerdes.timeWindowedSerdeFrom(Serdes.Long(), "1 minute")
    assert long_keyed.serialize(Windowed(-1, -60_000, 0)) == _long(-1) + _long(-60_000)
    assert long_keyed.deserialize(_long(-1) + _long(-60_000)) == Windowed(-1, -60_000, 0)


def test_time_windowed_end_is_start_plus_size_capped_at_long_max():
    """``WindowKeySchema.timeWindowForSize``: an end past Long.MAX_VALUE is Long.MAX_VALUE."""
    serde = WindowedSerdes.timeWindowedSerdeFrom(Serdes.Long(), 100)
    assert serde.deserialize(_long(1) + _long(2**63 - 50)) == Windowed(1, 2**63 - 50, 2**63 - 1)


def test_time_windowed_changelog_keys_carry_a_sequence_number():
    """``forChangelog(true)``: ``WindowKeySchema.fromStoreKey`` reads key, start, 4-byte seqnum."""
    serde = WindowedSerdes.timeWindowedSerdeFrom(Serdes.String(), 5).forChangelog(True)
    assert serde.deserialize(b"k" + _long(40) + struct.pack(">i", 7)) == Windowed("k", 40, 45)


def test_session_windowed_key_is_the_inner_bytes_then_end_then_start():
    serde = WindowedSerdes.sessionWindowedSerdeFrom(Serdes.Long())
    data = serde.serialize(Windowed(7, BASE, BASE + 3_000))
    assert data == _long(7) + _long(BASE + 3_000) + _long(BASE)
    assert serde.deserialize(data) == Windowed(7, BASE, BASE + 3_000)


@pytest.mark.parametrize("serde", [WindowedSerdes.timeWindowedSerdeFrom(Serdes.String(), 10),
                                   WindowedSerdes.sessionWindowedSerdeFrom(Serdes.String())])
def test_windowed_null_and_empty_read_as_null_and_short_bytes_fail(serde):
    """``TimeWindowedDeserializer``/``SessionWindowedDeserializer``: null or empty data is null."""
    assert serde.deserialize(None) is None and serde.deserialize(b"") is None and serde.serialize(None) is None
    with pytest.raises(SerializationError, match="expected at least"):
        serde.deserialize(b"\x00" * 7, "out")
    with pytest.raises(SerializationError, match="not a Windowed key"):
        serde.serialize("plain", "out")


def test_a_windowed_count_written_by_to_reads_back_with_kafkas_layouts():
    """``toStream().to(topic, Produced.with(WindowedSerdes...))`` of time and session windowed
    counts writes the keys Kafka's ``TimeWindowedDeserializer``/``SessionWindowedDeserializer``
    read."""
    b = StreamsBuilder()
    grouped = b.stream("clicks", Consumed.with_(Serdes.String(), Serdes.String())).groupByKey()
    (grouped.windowedBy(TimeWindows.ofSizeWithNoGrace(10_000)).count().toStream()
     .to("per-window", Produced.with_(WindowedSerdes.timeWindowedSerdeFrom(Serdes.String(), 10_000), Serdes.Long())))
    (grouped.windowedBy(SessionWindows.ofInactivityGapWithNoGrace(5_000)).count().toStream()
     .filter(lambda k, v: v is not None)
     .to("per-session", Produced.with_(WindowedSerdes.sessionWindowedSerdeFrom(Serdes.String()), Serdes.Long())))
    driver = TopologyTestDriver(b.build(), {"application.id": "windowed-keys"})
    clicks = driver.createInputTopic("clicks", Serdes.String(), Serdes.String())
    for key, ts in [("ann", BASE + 1_000), ("ann", BASE + 2_000), ("bob", BASE + 12_000)]:
        clicks.pipeInput(key, "x", ts)
    windows = driver.createOutputTopic("per-window", Serdes.Bytes(), Serdes.Long()).readKeyValuesToList()
    assert windows == [(b"ann" + _long(BASE), 1), (b"ann" + _long(BASE), 2), (b"bob" + _long(BASE + 10_000), 1)]
    sessions = driver.createOutputTopic("per-session", Serdes.Bytes(), Serdes.Long()).readKeyValuesToList()
    assert sessions[-1] == (b"bob" + _long(BASE + 12_000) + _long(BASE + 12_000), 1)
    assert (b"ann" + _long(BASE + 2_000) + _long(BASE + 1_000), 2) in sessions


def test_a_windowed_tables_stream_writes_kafkas_windowed_keys_without_being_told():
    """Kafka gives a windowed aggregation's table the windowed key serde
    (``TimeWindowedKStreamImpl``: ``FullTimeWindowedSerde(keySerde, size)``, sliding windows their
    time difference, ``SessionWindowedSerde``), so ``toStream().to(topic)`` with only the value
    serde writes the windowed bytes; it used to fail ("String serde: cannot serialize Windowed")."""
    b = StreamsBuilder()
    grouped = b.stream("clicks", Consumed.with_(Serdes.String(), Serdes.String())).groupByKey()
    grouped.windowedBy(TimeWindows.ofSizeWithNoGrace(10_000)).count().toStream().to(
        "per-window", Produced.valueSerde(Serdes.Long()))
    grouped.windowedBy(SlidingWindows.ofTimeDifferenceWithNoGrace(3_000)).count().toStream().to(
        "per-slide", Produced.valueSerde(Serdes.Long()))
    grouped.windowedBy(SessionWindows.ofInactivityGapWithNoGrace(5_000)).count().toStream().filter(
        lambda k, v: v is not None).to("per-session", Produced.valueSerde(Serdes.Long()))
    driver = TopologyTestDriver(b.build(), {"application.id": "windowed-keys-default"})
    driver.createInputTopic("clicks", Serdes.String(), Serdes.String()).pipeInput("ann", "x", BASE + 1_000)
    read = lambda topic, serde: driver.createOutputTopic(topic, serde, Serdes.Long()).readKeyValuesToList()  # noqa: E731
    assert read("per-window", Serdes.Bytes()) == [(b"ann" + _long(BASE), 1)]
    (key, count), = read("per-slide", WindowedSerdes.timeWindowedSerdeFrom(Serdes.String(), 3_000))
    assert (key.key, key.start, key.end, count) == ("ann", BASE - 2_000, BASE + 1_000, 1)
    assert read("per-session", Serdes.Bytes()) == [(b"ann" + _long(BASE + 1_000) + _long(BASE + 1_000), 1)]


@pytest.mark.parametrize("name", ["org.apache.kafka.common.serialization.Serdes$ByteBufferSerde",
                                  "ByteBufferSerde", "ByteBuffer"])
def test_kafkas_byte_buffer_serde_name_is_known(name):
    serde = serde_of(name)
    assert serde == Serdes.ByteBuffer() and serde.serialize(b"\x00\xff") == b"\x00\xff"
    assert serde.deserialize(b"") == b""


def test_windowed_serde_needs_an_inner_serde_and_a_positive_size():
    with pytest.raises(InvalidConfigError):
        WindowedSerdes.timeWindowedSerdeFrom(Serdes.String(), 0)
    with pytest.raises(InvalidConfigError):
        WindowedSerdes.sessionWindowedSerdeFrom("NoSuchSerde")


def _int(x: int) -> bytes:
    return struct.pack(">i", x)


def test_list_of_a_constant_size_serde_lists_its_null_indexes_first():
    """``ListSerializer`` with ``CONSTANT_SIZE`` (flag 0): null count, null indexes, entry count,
    then only the non-null entries' bytes."""
    serde = Serdes.ListSerde(list, Serdes.Integer())
    data = serde.serialize([1, None, -2])
    assert data == b"\x00" + _int(1) + _int(1) + _int(3) + _int(1) + _int(-2)
    assert serde.deserialize(data) == [1, None, -2]
    uuids = Serdes.ListSerde(Serdes.UUID())
    text = b"00000000-0000-0000-0000-000000000001"
    assert uuids.deserialize(b"\x00" + _int(0) + _int(1) + text) == [uuids.inner.deserialize(text)]


def test_list_of_a_variable_size_serde_writes_lengths_and_minus_one_for_null():
    """``VARIABLE_SIZE`` (flag 1): entry count, then each entry as its length (-1: null) and bytes."""
    serde = Serdes.ListSerde(Serdes.String())
    data = serde.serialize(["ab", None, ""])
    assert data == b"\x01" + _int(3) + _int(2) + b"ab" + _int(-1) + _int(0)
    assert serde.deserialize(data) == ["ab", None, ""]
    assert serde.deserialize(None) is None and serde.serialize(None) is None
    assert serde.deserialize(b"\x01" + _int(0)) == []


@pytest.mark.parametrize("data, message", [
    (b"\x02" + _int(0), "Invalid serialization strategy flag value"),
    (b"", "Invalid serialization strategy flag value"),
    (b"\x01" + _int(2) + _int(1) + b"a", "Unable to deserialize into a List"),
    (b"\x01" + _int(1) + _int(5) + b"ab", "End of the stream was reached prematurely"),
])
def test_malformed_lists_fail_with_kafkas_messages(data, message):
    with pytest.raises(SerializationError, match=message):
        Serdes.ListSerde(Serdes.String()).deserialize(data, "t")


# Texts and whether Spark's try_parse_json (the schema-less Json serde's Spark side, Jackson's
# parser) reads them, as Spark 4 answers; the Python side must draw the same line.
SCHEMALESS = {'{"a":1} x': True, '[1]x': True, '"a"x': True, '5 x': True, 'true,': True, 'null]': True,
              '5\n}': True, '-0': True, 'NaN': False, '{"a":NaN}': False, 'Infinity': False, '-Infinity': False,
              '{"a":1,"a":2}': False, '{"a":"\\ud800"}': False, '5x': False, '01': False, '5,': False,
              '1.5e3x': False, 'truex': False, 'nullx': False, '': False, "{'a':1}": False, '[1,]': False}


@pytest.mark.parametrize("text, readable", list(SCHEMALESS.items()))
def test_schemaless_json_reads_what_its_spark_side_reads(text, readable):
    serde = Serdes.Json()
    if readable:
        serde.deserialize(text.encode(), "t")
    else:
        with pytest.raises(SerializationError, match="not JSON"):
            serde.deserialize(text.encode(), "t")


def test_schemaless_json_reads_the_first_value_and_ignores_what_follows():
    assert Serdes.Json().deserialize(b'{"a":[1,2]} {"b":3}') == {"a": [1, 2]}
    assert Serdes.Json().deserialize(b'"\\ud83d\\ude00"') == "\U0001F600"

"""A GlobalKTable join's SQL key selector sees every column of the stream record (``key``,
``value``, ``timestamp``, ``topic``, ``partition``, ``offset``, ``headers``), as every SQL argument
does; Kafka's ``KeyValueMapper`` may read the record context the same way
(``KStreamKTableJoinProcessor`` calls it while that record is being processed)."""
from __future__ import annotations

import pytest

from broker.client import murmur2
from streams import Consumed, Produced, StreamsBuilder
from streams.record import Windowed
from streams.serdes_windowed import WindowedSerdes
from streams.testing import TopologyTestDriver
from tests.streams.join_kit import S, show

pytestmark = pytest.mark.unit


def _join(selector, kind: str = "join", stream_serde=S):
    b = StreamsBuilder()
    g = b.globalTable("global", Consumed.with_(S, S))
    getattr(b.stream("stream", Consumed.with_(stream_serde, S)), kind)(g, selector, show) \
        .to("out", Produced.with_(stream_serde, S))
    d = TopologyTestDriver(b.build(), {"application.id": "gs"}, partitions={"stream": 2, "global": 3})
    return (d.createInputTopic("stream", stream_serde, S), d.createInputTopic("global", S, S),
            d.createOutputTopic("out", stream_serde, S))


def _key_in(partition: int) -> str:
    return next(k for k in (f"k{i}" for i in range(100)) if murmur2(k.encode(), 2) == partition)


def test_the_selector_sees_the_records_partition():
    stream, table, out = _join("if(partition = 0, value, null)")
    table.pipeInput("FK1", "Y1", 0)
    first, second = _key_in(0), _key_in(1)
    stream.pipeInput(first, "FK1", 1)
    stream.pipeInput(second, "FK1", 2)           # partition 1: no join key, an inner join drops it
    assert [(r.key, r.value) for r in out.readRecordsToList()] == [(first, "FK1 - Y1")]


def test_the_selector_sees_the_records_topic_and_offset():
    stream, table, out = _join("concat(topic, '-', cast(offset as string))")
    table.pipeInput("stream-0", "first", 0)
    table.pipeInput("stream-1", "second", 0)
    key = _key_in(1)
    stream.pipeInput(key, "a", 1)
    stream.pipeInput(key, "b", 2)
    assert out.readValuesToList() == ["a - first", "b - second"]


def test_the_selector_sees_the_records_timestamp_and_headers():
    stream, table, out = _join("if(timestamp >= timestamp '1970-01-01 00:00:01', "
                               "cast(headers[0].value as string), null)", kind="leftJoin")
    table.pipeInput("FK", "Y", 0)
    stream.pipeInput("k", "early", 999, headers=[("fk", b"FK")])
    stream.pipeInput("k", "late", 1_000, headers=[("fk", b"FK")])
    assert out.readValuesToList() == ["early - null", "late - Y"]


def test_a_windowed_key_reads_as_a_struct_in_the_selector():
    """As in every SQL argument, a windowed key is ``struct<key, start, end>``."""
    serde = WindowedSerdes.timeWindowedSerdeFrom(S, 10)
    stream, table, out = _join("key.key", stream_serde=serde)
    table.pipeInput("u1", "Y", 0)
    stream.pipeInput(Windowed("u1", 0, 10), "x", 1)
    assert out.readValuesToList() == ["x - Y"]

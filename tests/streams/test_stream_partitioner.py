"""``Produced.streamPartitioner`` and ``Repartitioned.withStreamPartitioner``: a callable
``(topic, key, value, num_partitions)`` chooses each record's partition, as Kafka's
``StreamPartitioner.partition``; None leaves it to the default partitioner, a set of partitions
(KIP-837's ``partitions()``) writes the record to each (none: dropped)."""
from __future__ import annotations

import pytest

from streams import Consumed, Produced, Repartitioned, Serdes, StreamsBuilder
from streams.errors import StreamsError
from streams.testing import TopologyTestDriver

S = Serdes.String()


def _partitions_of(driver, topic: str) -> list[list[str]]:
    return [[v.decode() for (_, v, _, _) in part] for part in driver._interp.topics[topic]]


def by_value(topic, key, value, n):
    return {"first": 0, "last": n - 1}.get(value)


def test_produced_partitioner_chooses_the_partition_of_each_record():
    calls = []

    def spy(topic, key, value, n):
        calls.append((topic, key, value, n))
        return by_value(topic, key, value, n)
    b = StreamsBuilder()
    b.stream("in", Consumed.with_(S, S)).to("out", Produced.with_(S, S).withStreamPartitioner(spy))
    with TopologyTestDriver(b.build(), {"application.id": "p"}, partitions={"out": 4}) as d:
        i = d.createInputTopic("in", S, S)
        for v in ("first", "last", "first"):
            i.pipeInput("k", v, 1)
        parts = _partitions_of(d, "out")
    assert parts == [["first", "first"], [], [], ["last"]]
    assert calls[1] == ("out", "k", "last", 4)


def test_none_is_the_default_partitioner_and_a_set_multicasts():
    b = StreamsBuilder()
    b.stream("in", Consumed.with_(S, S)).to(
        "out", Produced.streamPartitioner(lambda t, k, v, n: {"all": set(range(n)), "none": set()}.get(v))
        .withKeySerde(S).withValueSerde(S))
    with TopologyTestDriver(b.build(), {"application.id": "p"}, partitions={"out": 3}) as d:
        i = d.createInputTopic("in", S, S)
        i.pipeInput("k", "all", 1)
        i.pipeInput("k", "none", 2)
        i.pipeInput("k", "dflt", 3)
        parts = _partitions_of(d, "out")
    from streams.interpreter import murmur2_partition
    home = murmur2_partition(b"k", 3)
    expected = [["all"] for _ in range(3)]
    expected[home].append("dflt")
    assert parts == expected


def test_a_partition_out_of_range_fails():
    b = StreamsBuilder()
    b.stream("in", Consumed.with_(S, S)).to("out", Produced.with_(S, S, lambda t, k, v, n: n))
    with TopologyTestDriver(b.build(), {"application.id": "p"}, partitions={"out": 2}) as d:
        with pytest.raises(StreamsError, match="partition 2"):
            d.createInputTopic("in", S, S).pipeInput("k", "v", 1)


def test_repartitioned_partitioner_places_records_of_the_repartition_topic():
    b = StreamsBuilder()
    (b.stream("in", Consumed.with_(S, S))
     .repartition(Repartitioned.with_(S, S).withName("r").withNumberOfPartitions(3).withStreamPartitioner(by_value))
     .to("out", Produced.with_(S, S)))
    with TopologyTestDriver(b.build(), {"application.id": "rp"}) as d:
        i = d.createInputTopic("in", S, S)
        i.pipeInput("k", "first", 1)
        i.pipeInput("k", "last", 2)
        parts = _partitions_of(d, "rp-r-repartition")
        out = [r.value for r in d.createOutputTopic("out", S, S).readRecordsToList()]
    assert parts == [["first"], [], ["last"]]
    assert out == ["first", "last"]


def test_a_partitioner_must_be_callable():
    with pytest.raises(Exception, match="partitioner"):
        Produced.streamPartitioner("nope")
    with pytest.raises(Exception, match="partitioner"):
        Repartitioned.streamPartitioner(3)

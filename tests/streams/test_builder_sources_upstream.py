"""Reading a topic twice, as Kafka's ``StreamsBuilderTest`` defines it: two ``stream()`` calls of
the same topics share one source node (``mergeDuplicateSourceNodes``, KAFKA-6687), whatever the
order of the topics; overlapping but unequal subscriptions, two reset policies, a table and a stream
(or two tables) of one topic are refused."""
from __future__ import annotations

import pytest

from streams import Consumed, Produced, Serdes, StreamsBuilder
from streams.errors import TopologyError
from streams.testing import TopologyTestDriver

S = Serdes.String()


def test_streams_from_the_same_topic_share_one_source_and_each_sees_every_record():
    b = StreamsBuilder()
    kept = b.stream("topic", Consumed.with_(S, S)).filter(lambda k, v: v.startswith("a"))
    upper = b.stream("topic", Consumed.with_(S, S)).mapValues(lambda v: v.upper())
    kept.merge(upper).to("out", Produced.with_(S, S))
    tp = b.build()
    text = str(tp.describe()).split("\n\n")[0]
    assert text.count("Source:") == 1
    assert ("Source: KSTREAM-SOURCE-0000000000 (topics: [topic])\n"
            "      --> KSTREAM-FILTER-0000000001, KSTREAM-MAPVALUES-0000000003") in text
    with TopologyTestDriver(tp, {"application.id": "same-topic"}) as d:
        i = d.createInputTopic("topic", S, S)
        i.pipeInput("k", "ab", 1)
        i.pipeInput("k", "b", 2)
        out = [(r.key, r.value) for r in d.createOutputTopic("out", S, S).readRecordsToList()]
    assert out == [("k", "ab"), ("k", "AB"), ("k", "B")]


def test_the_same_collection_of_topics_in_another_order_is_one_subscription():
    b = StreamsBuilder()
    b.stream(["topic1", "topic2"]).to("out")
    b.stream(["topic2", "topic1"]).to("out2")
    assert str(b.build().describe()).split("\n\n")[0].count("Source:") == 1


def test_overlapping_but_unequal_topics_are_refused():
    b = StreamsBuilder()
    b.stream(["topic"])
    with pytest.raises(TopologyError):
        b.stream(["topic", "anotherTopic"]).to("out")
        b.build()


@pytest.mark.parametrize("first,second", [("earliest", "latest"), ("earliest", None), (None, "latest")])
def test_another_reset_policy_on_the_same_topic_is_refused(first, second):
    b = StreamsBuilder()
    c1 = Consumed.with_(S, S) if first is None else Consumed.with_(S, S).withOffsetResetPolicy(first)
    c2 = Consumed.with_(S, S) if second is None else Consumed.with_(S, S).withOffsetResetPolicy(second)
    b.stream("topic", c1)
    with pytest.raises(TopologyError, match=r"^Can't configure different offset reset policies on the same "
                                            r"input topic\(s\)$"):
        b.stream("topic", c2)


def test_other_serdes_on_the_same_topic_are_refused_rather_than_decoded_with_the_first():
    b = StreamsBuilder()
    b.stream("topic", Consumed.with_(S, S))
    with pytest.raises(TopologyError, match="other serdes"):
        b.stream("topic", Consumed.with_(S, Serdes.Long()))


def test_two_tables_or_a_stream_and_a_table_of_one_topic_are_refused():
    b = StreamsBuilder()
    b.table("topic")
    b.table("topic")
    with pytest.raises(TopologyError):
        b.build()
    b = StreamsBuilder()
    b.stream("topic").to("out")
    b.table("topic")
    with pytest.raises(TopologyError):
        b.build()

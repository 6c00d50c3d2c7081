"""Where a restarted application starts when the group's committed offset is out of the input
partition's range (FineGrainedAutoResetIntegrationTest's reset policies, Kafka's
``StreamThread.resetOffsets``): the source's reset policy, not the dead offset. A real broker, no
Spark: ``StreamsApp._committed`` gives the ``startingOffsets`` of a query started from the broker."""
from __future__ import annotations

import pytest

from broker.client import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from streams.app import StreamsApp
from streams.builder import StreamsBuilder
from streams.errors import StreamsError
from streams.parameters import Consumed, Produced
from streams.serdes import Serdes

S = Serdes.String()
EARLIEST, LATEST = -2, -1


def _app(bootstrap: str) -> StreamsApp:
    b = StreamsBuilder()
    b.stream("early", Consumed.with_(S, S).withOffsetResetPolicy("earliest")).to("out", Produced.with_(S, S))
    b.stream("late", Consumed.with_(S, S).withOffsetResetPolicy("latest")).to("out", Produced.with_(S, S))
    app = StreamsApp(b.build(), None, {"application.id": "resets", "bootstrap.servers": bootstrap})
    app._create_internal_topics()       # as a start does first: it learns the topics' partitions
    return app


def test_a_committed_offset_out_of_the_partitions_range_is_reset_by_the_sources_policy(broker_factory):
    bootstrap = broker_factory().bootstrap
    topics = ["early", "late"]
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        for f in admin.create_topics([NewTopic(t, 2, 1) for t in topics]).values():
            f.result(30)
        p = Producer({"bootstrap.servers": bootstrap})
        for t in topics:
            for part in (0, 1):
                for i in range(10):
                    p.produce(t, value=b"v", key=str(i).encode(), partition=part)
        assert p.flush(30) == 0
        # partition 0: records below 5 deleted (retention while the application was down)
        for f in admin.delete_records({TopicPartition(t, 0): 5 for t in topics}).values():
            f.result(30)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "resets", "enable.auto.commit": False})
    try:
        # partition 0 committed at 2 (now below the log start 5); partition 1 at 40 (past the end 10)
        c.commit(offsets=[TopicPartition(t, 0, 2) for t in topics] + [TopicPartition(t, 1, 40) for t in topics],
                 asynchronous=False)
    finally:
        c.close()
    assert _app(bootstrap)._committed(topics) == {"early": {"0": EARLIEST, "1": EARLIEST},
                                                  "late": {"0": LATEST, "1": LATEST}}
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "resets", "enable.auto.commit": False})
    try:
        # in range (the log start and the end included): kept
        c.commit(offsets=[TopicPartition(t, 0, 5) for t in topics] + [TopicPartition(t, 1, 10) for t in topics],
                 asynchronous=False)
    finally:
        c.close()
    assert _app(bootstrap)._committed(topics) == {"early": {"0": 5, "1": 10}, "late": {"0": 5, "1": 10}}
    # auto.offset.reset=none (Kafka's NONE): a source without its own policy and without a valid
    # committed offset fails the start, naming the partition; a committed one in range is kept
    b = StreamsBuilder()
    b.stream("early", Consumed.with_(S, S)).to("out", Produced.with_(S, S))
    strict = StreamsApp(b.build(), None, {"application.id": "resets", "bootstrap.servers": bootstrap,
                                          "auto.offset.reset": "none"})
    strict._create_internal_topics()
    assert strict._committed(["early"]) == {"early": {"0": 5, "1": 10}}
    strict.app = "never-committed"
    with pytest.raises(StreamsError, match="No valid committed offset found for input topic early"):
        strict._committed(["early"])


def test_a_sources_none_policy_wins_over_auto_offset_reset():
    # Kafka 4.0's AutoOffsetReset.none() (KIP-1106) for one source: a partition of it with no valid
    # committed offset fails the start, while the application's other sources follow auto.offset.reset.
    b = StreamsBuilder()
    b.stream("strict", Consumed.with_(S, S).withOffsetResetPolicy("none")).to("out", Produced.with_(S, S))
    b.stream("loose", Consumed.with_(S, S)).to("out", Produced.with_(S, S))
    app = StreamsApp(b.build(), None, {"application.id": "resets", "bootstrap.servers": "127.0.0.1:1",
                                       "auto.offset.reset": "earliest"})
    assert app._reset("loose") == EARLIEST
    assert app._reset("strict") not in (EARLIEST, LATEST) and app._reset("strict") < 0
